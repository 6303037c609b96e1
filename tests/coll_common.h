/* Helpers of the collectives tests: verifiable integer-valued data per (rank, index, op),
 * typed element access (through the harness's typed buffers, ddp_test_typed.h), and a
 * cross-rank bitwise-identity check. */
#ifndef COLL_COMMON_H
#define COLL_COMMON_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ddp_test.h"
#include "ddp_test_typed.h"

static const ddp_dtype_t coll_dtypes[] = {DDP_F32, DDP_F64, DDP_F16, DDP_BF16,
                                          DDP_I32, DDP_I64, DDP_U8};
static const ddp_op_t coll_ops[] = {DDP_SUM, DDP_AVG, DDP_MIN, DDP_MAX, DDP_PROD};

/* Test data are sized for up to this many ranks (sums of large integers stay in range). */
#define COLL_MAX_RANKS 8

/* A 64-bit mix of (rank, index) (splitmix64's finaliser): every rank and every index has its
 * own values, with no period across ranks or indices. */
static inline uint64_t coll_mix(int r, size_t i) {
  uint64_t z = (uint64_t)(unsigned)r * 0x9E3779B97F4A7C15ull + (uint64_t)i + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Input value of rank r at index i for op and dtype, chosen so that the exact result is
 * known and every partial result an algorithm can form is exact in the dtype:
 * - prod: +-1 or +-2 (u8: 1 or 2), so every product is a power of two within 2^8;
 * - min/max: u8 over its whole range 0..255 (half the values above the signed range), i32/i64
 *   every 8th index at their largest and smallest values, otherwise integers in [-128, 128]
 *   (exact in bf16's 8 significant bits);
 * - sum/avg: u8 over 0..255 (the sum wraps modulo 256, as unsigned arithmetic does), i32/i64
 *   every 8th index near +-max/8 (the sum of up to COLL_MAX_RANKS stays in range), otherwise
 *   integers in [-8, 8] (|sum| <= 64, exact in bf16). */
static inline int64_t coll_val(int r, size_t i, ddp_op_t op, ddp_dtype_t dt) {
  uint64_t h = coll_mix(r, i);
  int big = i % 8 == 1 && (dt == DDP_I32 || dt == DDP_I64);
  int64_t top = dt == DDP_I64 ? INT64_MAX : INT32_MAX, low = dt == DDP_I64 ? INT64_MIN : INT32_MIN;
  int64_t off = (int64_t)((h >> 8) % 1024);
  switch (op) {
    case DDP_PROD: {
      int64_t m = 1 + (int64_t)(h & 1);
      return dt != DDP_U8 && (h & 2) ? -m : m;
    }
    case DDP_MIN:
    case DDP_MAX:
      if (dt == DDP_U8) return (int64_t)(h % 256);
      if (big) return (h & 4) ? top - off : low + off;
      return (int64_t)(h % 257) - 128;
    default:
      if (dt == DDP_U8) return (int64_t)(h % 256);
      if (big) return (h & 4) ? top / COLL_MAX_RANKS - off : -(top / COLL_MAX_RANKS - off);
      return (int64_t)(h % 17) - 8;
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

/* The exact integer result (avg: truncated as integer division truncates). */
static inline int64_t coll_expect_avg(int p, size_t i, ddp_op_t op, ddp_dtype_t dt) {
  int64_t s = coll_expect(p, i, op, dt);
  if (op != DDP_AVG) return s;
  return dt == DDP_U8 ? (int64_t)((uint64_t)s / (uint64_t)p) : s / p;
}

/* The f16 (11 significant bits) or bf16 (8) value nearest to num/den, ties to even: what the
 * library's avg must give for an exact sum num over den ranks. Exact integer arithmetic
 * (normal numbers, |num| < 2^40: the test data's range). */
static inline double coll_round_half(int64_t num, int64_t den, ddp_dtype_t dt) {
  if (num == 0) return 0.0;
  int bits = dt == DDP_F16 ? 11 : 8, e = 0;
  int64_t a = num < 0 ? -num : num;
  frexp((double)a / (double)den, &e); /* 2^(e-1) <= a/den < 2^e, up to double rounding */
  if ((double)a >= ldexp((double)den, e)) e++;
  while (e > -60 && (double)a < ldexp((double)den, e - 1)) e--;
  int E = e - bits; /* the spacing of representable values is 2^E */
  int64_t n = E < 0 ? a << -E : a, d = E > 0 ? den << E : den;
  int64_t k = n / d, rem = n % d;
  if (2 * rem > d || (2 * rem == d && (k & 1))) k++;
  double v = ldexp((double)k, E);
  return num < 0 ? -v : v;
}

static inline int coll_is_int(ddp_dtype_t dt) { return ddp_tbuf_is_int(dt); }

/* Element i as a double (floating dtypes) and as an integer (integer dtypes, exact). */
static inline double coll_get(const void *buf, ddp_dtype_t dt, size_t i) { return ddp_tbuf_get(buf, dt, i); }
static inline int64_t coll_get_int(const void *buf, ddp_dtype_t dt, size_t i) {
  return ddp_tbuf_is_int(dt) ? ddp_tbuf_get_int(buf, dt, i) : INT64_MIN;
}

/* Stores integer v (exactly: integer dtypes hold it, the floating ones get small integers). */
static inline void coll_set(void *buf, ddp_dtype_t dt, size_t i, int64_t v) { ddp_tbuf_set_int(buf, dt, i, v); }

/* 1 when element i holds exactly the integer v. */
static inline int coll_elem_is(const void *buf, ddp_dtype_t dt, size_t i, int64_t v) {
  return coll_is_int(dt) ? coll_get_int(buf, dt, i) == v : coll_get(buf, dt, i) == (double)v;
}

static inline void coll_fill(void *buf, ddp_dtype_t dt, size_t n, int rank, ddp_op_t op) {
  for (size_t i = 0; i < n; i++) coll_set(buf, dt, i, coll_val(rank, i, op, dt));
}

/* 1 when element `got` of buf is element i of the exact reduction over p ranks. avg divides
 * the way the library defines it: integers truncated, f32 in float, f64 in double, f16/bf16
 * the exact quotient rounded to nearest even. Writes the expected value to *want. */
static inline int coll_check_elem(const void *buf, ddp_dtype_t dt, size_t got, size_t i, int p,
                                  ddp_op_t op, double *want) {
  int64_t s = coll_expect(p, i, op, dt);
  if (coll_is_int(dt)) {
    int64_t w = coll_expect_avg(p, i, op, dt);
    *want = (double)w;
    return coll_get_int(buf, dt, got) == w;
  }
  if (op != DDP_AVG) *want = (double)s;
  else if (dt == DDP_F32) *want = (double)((float)s / (float)p);
  else if (dt == DDP_F64) *want = (double)s / p;
  else *want = coll_round_half(s, p, dt);
  return coll_get(buf, dt, got) == *want;
}

/* Number of mismatching elements of buf, which holds elements first..first+n-1 of the
 * reduction over p ranks (the first mismatch is reported). */
static inline size_t coll_verify_at(const void *buf, ddp_dtype_t dt, size_t n, size_t first,
                                    int p, ddp_op_t op, const char *what) {
  size_t bad = 0;
  if (p > COLL_MAX_RANKS) {
    fprintf(stderr, "%s: the test data are sized for at most %d ranks, not %d\n", what,
            COLL_MAX_RANKS, p);
    return n ? n : 1;
  }
  for (size_t i = 0; i < n; i++) {
    double want = 0;
    if (!coll_check_elem(buf, dt, i, first + i, p, op, &want)) {
      if (!bad && coll_is_int(dt))
        fprintf(stderr, "%s: %s %s count %zu: element %zu is %lld, expected %lld\n", what,
                ddp_dtype_name(dt), ddp_op_name(op), n, first + i,
                (long long)coll_get_int(buf, dt, i), (long long)coll_expect_avg(p, first + i, op, dt));
      else if (!bad)
        fprintf(stderr, "%s: %s %s count %zu: element %zu is %.9g, expected %.9g\n", what,
                ddp_dtype_name(dt), ddp_op_name(op), n, first + i, coll_get(buf, dt, i), want);
      bad++;
    }
  }
  return bad;
}

static inline size_t coll_verify(const void *buf, ddp_dtype_t dt, size_t n, int p, ddp_op_t op,
                                 const char *what) {
  return coll_verify_at(buf, dt, n, 0, p, op, what);
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
