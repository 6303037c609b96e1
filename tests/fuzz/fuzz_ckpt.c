/* libFuzzer target for ddp_train's checkpoint reader (ckpt_parse in apps/kit/checkpoint.c).
 * Byte 0 of the input is a flag: bit 0 set = rewrite the trailing CRC32 before parsing, so the
 * fuzzer also reaches the checks behind the CRC (tensor table, sizes); the rest is the file.
 * A checkpoint that parses (version 1 or 2) must describe offsets inside the buffer, copy out
 * cleanly, and survive a serialise -> parse round trip (always written as version 2) with the
 * same state, optimizer buffers included. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"

#define REQUIRE(cond)                                                              \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      fprintf(stderr, "fuzz_ckpt: invariant failed: %s (err: %s)\n", #cond, err); \
      abort();                                                                     \
    }                                                                              \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The stored CRC32 is little-endian, as every integer of the format. */
static void put_u32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[512] = "";
  if (size < 1) return 0;
  int fix_crc = data[0] & 1;
  size_t bytes = size - 1;
  unsigned char *buf = malloc(bytes ? bytes : 1); /* exact size: ASan sees any overread */
  REQUIRE(buf != NULL);
  if (bytes) memcpy(buf, data + 1, bytes);
  if (fix_crc && bytes >= 4) put_u32(buf + bytes - 4, ckpt_crc32(buf, bytes - 4));
  ckpt_view_t v;
  memset(&v, 0, sizeof v);
  if (ckpt_parse(buf, bytes, &v, err, sizeof err) != 0) {
    REQUIRE(err[0] != '\0');
    free(buf);
    return 0;
  }
  REQUIRE(v.bytes == bytes);
  REQUIRE(v.st.nparams >= 1 && v.st.nparams <= CKPT_MAX_PARAMS);
  REQUIRE(v.st.nstate >= 1 && v.st.nstate <= CKPT_MAX_STATE && v.state_off == v.momentum_off);
  size_t ns = v.st.nstate, T = (size_t)v.st.total;
  REQUIRE(v.state_off + 4 * T * ns + 4 == bytes);
  /* Copy everything out, tensor by tensor, as ddp_train does on resume. */
  size_t n = v.st.nparams;
  size_t *counts = calloc(n, sizeof *counts);
  float **params = calloc(n, sizeof *params), **state = calloc(n * ns, sizeof *state);
  REQUIRE(counts && params && state);
  size_t off_p = v.params_off, off_s = v.state_off;
  for (size_t i = 0; i < n; i++) {
    counts[i] = (size_t)ckpt_u64_at(buf, v.counts_off + 8 * i);
    params[i] = malloc(counts[i] * sizeof(float));
    REQUIRE(params[i]);
    ckpt_copy_floats(buf, off_p, params[i], counts[i]);
    for (size_t k = 0; k < ns; k++) {
      state[k * n + i] = malloc(counts[i] * sizeof(float));
      REQUIRE(state[k * n + i]);
      ckpt_copy_floats(buf, off_s + 4 * T * k, state[k * n + i], counts[i]);
    }
    off_p += 4 * counts[i];
    off_s += 4 * counts[i];
  }
  REQUIRE(off_p == v.state_off && off_s == v.state_off + 4 * T);
  /* Compatibility check against itself passes; against another world size it fails. */
  REQUIRE(ckpt_check_compatible(buf, &v, v.st.model, counts, v.st.nparams, v.st.world,
                                v.st.batch, v.st.seed, err, sizeof err) == 0);
  REQUIRE(ckpt_check_compatible(buf, &v, v.st.model, counts, v.st.nparams, v.st.world + 1,
                                v.st.batch, v.st.seed, err, sizeof err) != 0);
  REQUIRE(ckpt_check_optim(&v, v.st.optim, "same", v.st.nstate, err, sizeof err) == 0);
  REQUIRE(ckpt_check_optim(&v, v.st.optim + 1, "other", v.st.nstate, err, sizeof err) != 0);
  /* Round trip. */
  void *out = NULL;
  size_t out_bytes = 0;
  REQUIRE(ckpt_serialize(&v.st, params, state, counts, &out, &out_bytes, err, sizeof err) == 0);
  REQUIRE(out_bytes == ckpt_file_bytes_state(v.st.nparams, v.st.total, v.st.nstate));
  REQUIRE(v.version != CKPT_VERSION || out_bytes == bytes);
  ckpt_view_t w;
  REQUIRE(ckpt_parse(out, out_bytes, &w, err, sizeof err) == 0);
  REQUIRE(w.version == CKPT_VERSION);
  REQUIRE(w.st.nparams == v.st.nparams && w.st.total == v.st.total && w.st.world == v.st.world &&
          w.st.batch == v.st.batch && w.st.seed == v.st.seed && w.st.epoch == v.st.epoch &&
          w.st.global_step == v.st.global_step && w.st.rng == v.st.rng &&
          w.st.optim == v.st.optim && w.st.nstate == v.st.nstate &&
          w.st.optim_steps == v.st.optim_steps && strcmp(w.st.model, v.st.model) == 0);
  /* Parameters and every state buffer are byte-identical (NaN payloads included). */
  REQUIRE(memcmp((char *)out + w.params_off, buf + v.params_off, 4 * T * (1 + ns)) == 0);
  free(out);
  for (size_t i = 0; i < n; i++) {
    free(params[i]);
    for (size_t k = 0; k < ns; k++) free(state[k * n + i]);
  }
  free(counts);
  free(params);
  free(state);
  free(buf);
  return 0;
}
