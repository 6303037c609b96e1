/* Helpers of the collectives tests: verifiable integer-valued data per (rank, index, op),
 * typed element access, and a cross-rank bitwise-identity check. */
#ifndef COLL_COMMON_H
#define COLL_COMMON_H

#include <math.h>
#include <stdint.h>

#include "ddp_test.h"

static const ddp_dtype_t coll_dtypes[] = {DDP_F32, DDP_F64, DDP_F16, DDP_BF16,
                                          DDP_I32, DDP_I64, DDP_U8};
static const ddp_op_t coll_ops[] = {DDP_SUM, DDP_AVG, DDP_MIN, DDP_MAX, DDP_PROD};

/* Input value of rank r at index i for op: small integers, so every dtype holds every partial
 * result exactly (bf16 has 8 significant bits: |sum| <= 6*8 and prod <= 2^8). */
static inline int64_t coll_val(int r, size_t i, ddp_op_t op, ddp_dtype_t dt) {
  int64_t k = (int64_t)((size_t)r * 5 + i * 3);
  int uns = dt == DDP_U8;
  switch (op) {
    case DDP_PROD: return 1 + (int64_t)(((size_t)r + i) % 2);
    case DDP_MIN:
    case DDP_MAX: return uns ? k % 11 : k % 11 - 5;
    default: return uns ? k % 7 : k % 7 - 3;
  }
}

/* The exact result over p ranks (avg: the sum; the caller divides). */
static inline int64_t coll_expect(int p, size_t i, ddp_op_t op, ddp_dtype_t dt) {
  int64_t acc = coll_val(0, i, op, dt);
  for (int r = 1; r < p; r++) {
    int64_t v = coll_val(r, i, op, dt);
    switch (op) {
      case DDP_MIN: acc = v < acc ? v : acc; break;
      case DDP_MAX: acc = v > acc ? v : acc; break;
      case DDP_PROD: acc *= v; break;
      default: acc += v; break;
    }
  }
  if (dt == DDP_U8) acc &= 0xff;
  return acc;
}

/* bf16 of a float by truncation: exact for the small integers used here. */
static inline uint16_t coll_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16);
}
static inline float coll_bf16_f(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline void coll_set(void *buf, ddp_dtype_t dt, size_t i, double v) {
  switch (dt) {
    case DDP_F32: ((float *)buf)[i] = (float)v; break;
    case DDP_F64: ((double *)buf)[i] = v; break;
    case DDP_F16: { _Float16 h = (_Float16)v; memcpy((uint16_t *)buf + i, &h, 2); break; }
    case DDP_BF16: ((uint16_t *)buf)[i] = coll_bf16((float)v); break;
    case DDP_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case DDP_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
    case DDP_U8: ((uint8_t *)buf)[i] = (uint8_t)(int64_t)v; break;
    default: break;
  }
}

static inline double coll_get(const void *buf, ddp_dtype_t dt, size_t i) {
  switch (dt) {
    case DDP_F32: return ((const float *)buf)[i];
    case DDP_F64: return ((const double *)buf)[i];
    case DDP_F16: { _Float16 h; memcpy(&h, (const uint16_t *)buf + i, 2); return (double)h; }
    case DDP_BF16: return coll_bf16_f(((const uint16_t *)buf)[i]);
    case DDP_I32: return ((const int32_t *)buf)[i];
    case DDP_I64: return (double)((const int64_t *)buf)[i];
    case DDP_U8: return ((const uint8_t *)buf)[i];
    default: return NAN;
  }
}

static inline void coll_fill(void *buf, ddp_dtype_t dt, size_t n, int rank, ddp_op_t op) {
  for (size_t i = 0; i < n; i++) coll_set(buf, dt, i, (double)coll_val(rank, i, op, dt));
}

/* Expected value of element i of the reduction (avg divided the way the library divides:
 * integers truncated, f32 in float, others in double, f16/bf16 compared with tolerance). */
static inline double coll_expected(int p, size_t i, ddp_op_t op, ddp_dtype_t dt) {
  int64_t s = coll_expect(p, i, op, dt);
  if (op != DDP_AVG) return (double)s;
  switch (dt) {
    case DDP_F32: return (double)((float)s / (float)p);
    case DDP_I32: case DDP_I64: return (double)(s / p);
    case DDP_U8: return (double)((uint64_t)s / (uint64_t)p);
    default: return (double)s / p;
  }
}

/* Number of mismatching elements of buf (first one reported). */
static inline size_t coll_verify(const void *buf, ddp_dtype_t dt, size_t n, int p, ddp_op_t op,
                                 const char *what) {
  size_t bad = 0;
  int approx = op == DDP_AVG && (dt == DDP_F16 || dt == DDP_BF16);
  for (size_t i = 0; i < n; i++) {
    double want = coll_expected(p, i, op, dt), got = coll_get(buf, dt, i);
    int ok = approx ? fabs(got - want) <= 0.01 * fabs(want) + 1e-3 : got == want;
    if (!ok) {
      if (!bad)
        fprintf(stderr, "%s: %s %s count %zu: element %zu is %.9g, expected %.9g\n", what,
                ddp_dtype_name(dt), ddp_op_name(op), n, i, got, want);
      bad++;
    }
  }
  return bad;
}

/* 1 when `bytes` of buf are identical on every rank of comm. */
static inline int coll_identical(const void *buf, size_t bytes, MPI_Comm comm) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < bytes; i++) h = (h ^ ((const uint8_t *)buf)[i]) * 1099511628211ull;
  uint64_t lo = 0, hi = 0;
  MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, comm);
  MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, comm);
  return lo == hi;
}

#endif /* COLL_COMMON_H */
