/* Helpers shared by the device tests: typed element access that is exact for small integers
 * in every dtype (f16/bf16 built bit by bit, independent of the library's converters), and a
 * host function that sleeps on a stream. Header-only. */
#ifndef DDP_DEVICE_UTIL_H
#define DDP_DEVICE_UTIL_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "ddp.h"

static inline void sleep_ms(void *arg) {
  struct timespec ts = {0, (long)(intptr_t)arg * 1000000L};
  nanosleep(&ts, NULL);
}

static inline void set_flag(void *arg) { *(volatile int *)arg = 1; }

/* Value for element i of buffer b on this rank: small integers, exact in every dtype. */
static inline double val(int rank, int b, size_t i) { return (double)(((int)i * 7 + rank * 3 + b * 5) % 11) - 3; }

static inline void put(void *p, ddp_dtype_t t, size_t i, double v) {
  switch (t) {
    case DDP_F32: ((float *)p)[i] = (float)v; break;
    case DDP_F64: ((double *)p)[i] = v; break;
    case DDP_F16: { /* exact for small integers: build the half by hand */
      float f = (float)v;
      uint16_t h = 0;
      if (f != 0) {
        int sign = f < 0;
        float a = fabsf(f);
        int e = 0;
        while (a >= 2) a /= 2, e++;
        while (a < 1) a *= 2, e--;
        h = (uint16_t)((sign << 15) | ((e + 15) << 10) | (uint16_t)lrintf((a - 1) * 1024));
      }
      ((uint16_t *)p)[i] = h;
      break;
    }
    case DDP_BF16: {
      float f = (float)v;
      uint32_t u;
      memcpy(&u, &f, 4);
      ((uint16_t *)p)[i] = (uint16_t)(u >> 16);
      break;
    }
    case DDP_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case DDP_I64: ((int64_t *)p)[i] = (int64_t)v; break;
    case DDP_U8: ((uint8_t *)p)[i] = (uint8_t)(v + 3); break;
    default: break;
  }
}

static inline double get(const void *p, ddp_dtype_t t, size_t i) {
  switch (t) {
    case DDP_F32: return ((const float *)p)[i];
    case DDP_F64: return ((const double *)p)[i];
    case DDP_F16: {
      uint16_t h = ((const uint16_t *)p)[i];
      int e = (h >> 10) & 31, m = h & 1023;
      double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
      return (h >> 15) ? -v : v;
    }
    case DDP_BF16: {
      uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16;
      float f;
      memcpy(&f, &u, 4);
      return f;
    }
    case DDP_I32: return ((const int32_t *)p)[i];
    case DDP_I64: return (double)((const int64_t *)p)[i];
    case DDP_U8: return ((const uint8_t *)p)[i] - 3.0;
    default: return 0;
  }
}

#endif
