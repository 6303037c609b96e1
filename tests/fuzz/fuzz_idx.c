/* libFuzzer target for the IDX dataset reader (ddp_dataset_open_idx in samplers/dataset.c).
 * Input layout: byte 0 = flags (bit 0: images file named .gz, bit 1: labels file named .gz),
 * bytes 1-2 = length of the images part (little endian, clamped), then the images file, then
 * the labels file. Both are written to /dev/shm (per process) and opened; a dataset that opens
 * must serve every sample with labels in [0, classes) and pixels in [0, 1]. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ddp_sampler.h"

#define REQUIRE(cond)                                                                  \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      fprintf(stderr, "fuzz_idx: invariant failed: %s (last error: %s)\n", #cond,      \
              ddp_last_error());                                                       \
      abort();                                                                         \
    }                                                                                  \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int write_file(const char *path, const uint8_t *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  size_t w = n ? fwrite(p, 1, n, f) : 0;
  int rc = fclose(f);
  return (w == n && rc == 0) ? 0 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 3) return 0;
  int flags = data[0];
  size_t split = (size_t)data[1] | ((size_t)data[2] << 8);
  data += 3;
  size -= 3;
  if (split > size) split = size;
  char img[128], lab[128];
  snprintf(img, sizeof img, "/dev/shm/ddp_fuzz_idx_%ld_img%s", (long)getpid(), (flags & 1) ? ".gz" : "");
  snprintf(lab, sizeof lab, "/dev/shm/ddp_fuzz_idx_%ld_lab%s", (long)getpid(), (flags & 2) ? ".gz" : "");
  if (write_file(img, data, split) || write_file(lab, data + split, size - split)) {
    unlink(img);
    unlink(lab);
    return 0;
  }
  ddp_dataset_t *ds = (ddp_dataset_t *)(uintptr_t)0x1; /* must stay untouched on failure */
  ddp_status_t st = ddp_dataset_open_idx(img, lab, 0.0f, 1.0f, &ds);
  unlink(img);
  unlink(lab);
  if (st != DDP_OK) {
    REQUIRE(st == DDP_EFORMAT || st == DDP_EIO || st == DDP_ENOMEM);
    REQUIRE(ddp_last_error()[0] != '\0');
    REQUIRE(ds == (ddp_dataset_t *)(uintptr_t)0x1);
    return 0;
  }
  ddp_dataset_info_t info;
  REQUIRE(ddp_dataset_info(ds, &info) == DDP_OK);
  REQUIRE(info.count >= 1 && info.classes >= 1 && info.sample_elems >= 1);
  REQUIRE(info.ndim >= 1 && info.ndim <= DDP_DATASET_MAX_DIMS);
  size_t elems = 1;
  for (int d = 0; d < info.ndim; d++) elems *= info.dims[d];
  REQUIRE(elems == info.sample_elems);
  /* The data was in the input, so a sample cannot exceed the input's size. */
  REQUIRE(info.sample_elems <= size);
  float *x = malloc(info.sample_elems * sizeof *x);
  REQUIRE(x != NULL);
  uint64_t n = info.count < 64 ? info.count : 64;
  for (uint64_t i = 0; i <= n; i++) {
    uint64_t idx = i < n ? i : info.count - 1;
    int32_t label = -1;
    REQUIRE(ddp_dataset_get(ds, idx, x, info.sample_elems, &label) == DDP_OK);
    REQUIRE(label >= 0 && label < info.classes);
    for (size_t k = 0; k < info.sample_elems; k++) REQUIRE(x[k] >= 0.0f && x[k] <= 1.0f);
  }
  /* Out of range and too small a buffer are refused. */
  REQUIRE(ddp_dataset_get(ds, info.count, x, info.sample_elems, NULL) == DDP_EINVAL);
  if (info.sample_elems > 1)
    REQUIRE(ddp_dataset_get(ds, 0, x, info.sample_elems - 1, NULL) == DDP_EINVAL);
  free(x);
  ddp_dataset_destroy(&ds);
  return 0;
}
