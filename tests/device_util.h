/* Helpers shared by the device tests: typed element access that is exact for small integers
 * in every dtype (the harness's typed buffers), and a host function that sleeps on a stream.
 * Header-only. */
#ifndef DDP_DEVICE_UTIL_H
#define DDP_DEVICE_UTIL_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "ddp.h"
#include "ddp_test_typed.h"

static inline void sleep_ms(void *arg) {
  struct timespec ts = {0, (long)(intptr_t)arg * 1000000L};
  nanosleep(&ts, NULL);
}

static inline void set_flag(void *arg) { *(volatile int *)arg = 1; }

/* Value for element i of buffer b on this rank: small integers, exact in every dtype. */
static inline double val(int rank, int b, size_t i) { return (double)(((int)i * 7 + rank * 3 + b * 5) % 11) - 3; }

/* Element i as a double through the typed buffers (f16/bf16 bit by bit, independent of the
 * library's converters); u8 holds v + 3, since the values go down to -3. */
static inline void put(void *p, ddp_dtype_t t, size_t i, double v) {
  ddp_tbuf_set(p, t, i, t == DDP_U8 ? v + 3 : v);
}

static inline double get(const void *p, ddp_dtype_t t, size_t i) {
  double v = ddp_tbuf_get(p, t, i);
  return t == DDP_U8 ? v - 3 : v;
}

#endif
