/* libFuzzer target for the DDP_* configuration parser (ddp__config_parse_text in
 * runtime/core/config.c) and the size parser: any input either parses into a configuration whose
 * every field is in range, or fails with DDP_ECONFIG / DDP_EINVAL and a message naming it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ddp_internal.h"

#define REQUIRE(cond)                                                       \
  do {                                                                      \
    if (!(cond)) {                                                          \
      fprintf(stderr, "fuzz_config: invariant failed: %s (last error: %s)\n", #cond, \
              ddp_last_error());                                            \
      abort();                                                              \
    }                                                                       \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ddp__config_t cfg, before;
  ddp__config_defaults(&cfg);
  memset(&before, 0xA5, sizeof before);
  before = cfg;
  ddp_status_t st = ddp__config_parse_text(&cfg, (const char *)data, size);
  if (st == DDP_OK) {
    REQUIRE(cfg.debug >= DDP_LOG_NONE && cfg.debug <= DDP_LOG_TRACE);
    REQUIRE(memchr(cfg.debug_file, '\0', sizeof cfg.debug_file) != NULL);
    REQUIRE(memchr(cfg.timeline, '\0', sizeof cfg.timeline) != NULL);
    REQUIRE(cfg.ranks_per_node >= 0);
    REQUIRE(cfg.device >= -2 && cfg.device <= 1023);
    REQUIRE(cfg.cuda_aware >= -1 && cfg.cuda_aware <= 1);
    REQUIRE((unsigned)cfg.allreduce_algo < DDP_ALGO_COUNT);
    REQUIRE(cfg.staging_chunk >= 4096 && cfg.staging_chunk <= ((size_t)1 << 30));
    REQUIRE(cfg.staging_depth >= 2 && cfg.staging_depth <= 4);
    REQUIRE((unsigned)cfg.transport < DDP_TRANSPORT_COUNT);
    REQUIRE(cfg.timeout_s > 0 && cfg.timeout_s <= 1e7);
    REQUIRE(cfg.on_timeout_return == 0 || cfg.on_timeout_return == 1);
    REQUIRE(cfg.check == 0 || cfg.check == 1);
    REQUIRE(cfg.require_gpu == 0 || cfg.require_gpu == 1);
    char buf[2048];
    ddp__config_format(&cfg, buf, sizeof buf);
    REQUIRE(strstr(buf, "DDP_CHECK=") != NULL);
  } else {
    /* A failed parse names the variable and leaves the configuration untouched. */
    REQUIRE(st == DDP_ECONFIG);
    REQUIRE(strstr(ddp_last_error(), "DDP_") != NULL);
    REQUIRE(memcmp(&cfg, &before, sizeof cfg) == 0);
  }
  /* The size parser on the same bytes as one NUL-terminated string. */
  char *s = malloc(size + 1);
  if (!s) return 0;
  memcpy(s, data, size);
  s[size] = '\0';
  size_t bytes = 12345;
  st = ddp__parse_size(s, &bytes);
  REQUIRE(st == DDP_OK || st == DDP_EINVAL);
  if (st != DDP_OK) REQUIRE(bytes == 12345);
  free(s);
  return 0;
}
