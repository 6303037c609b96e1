/* Typed test buffers (ddp_test_typed.h). */
#include "ddp_test_typed.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* A binary float of 1 + ebits + mbits bits (f16: 5, 10; bf16: 8, 7) nearest to v. */
static uint16_t encode(double v, int ebits, int mbits) {
  int bias = (1 << (ebits - 1)) - 1, emin = 1 - bias;
  uint16_t sign = signbit(v) ? (uint16_t)(1u << (ebits + mbits)) : 0;
  uint16_t inf = (uint16_t)(((1u << ebits) - 1) << mbits);
  if (isnan(v)) return (uint16_t)(sign | inf | (1u << (mbits - 1)));
  double a = fabs(v);
  if (isinf(a)) return sign | inf;
  if (a == 0) return sign;
  int e = 0;
  frexp(a, &e);
  int E = e - 1; /* 2^E <= a < 2^(E+1) */
  if (E < emin) /* subnormal (rounding up to 2^mbits gives the smallest normal's bits) */
    return (uint16_t)(sign | (uint16_t)rint(ldexp(a, mbits - emin)));
  double q = rint(ldexp(a, mbits - E)); /* 2^mbits <= q <= 2^(mbits+1) */
  if (q == ldexp(1.0, mbits + 1)) {
    E++;
    q = ldexp(1.0, mbits);
  }
  if (E > bias) return sign | inf;
  return (uint16_t)(sign | (uint16_t)((E + bias) << mbits) | (uint16_t)(q - ldexp(1.0, mbits)));
}

static double decode(uint16_t h, int ebits, int mbits) {
  int bias = (1 << (ebits - 1)) - 1;
  unsigned e = (h >> mbits) & ((1u << ebits) - 1), m = h & ((1u << mbits) - 1);
  double v;
  if (e == (1u << ebits) - 1) v = m ? NAN : INFINITY;
  else if (e == 0) v = ldexp((double)m, 1 - bias - mbits);
  else v = ldexp((double)(m + (1u << mbits)), (int)e - bias - mbits);
  return (h >> (ebits + mbits)) & 1 ? -v : v;
}

uint16_t ddp_tbuf_f16(double v) { return encode(v, 5, 10); }
uint16_t ddp_tbuf_bf16(double v) { return encode(v, 8, 7); }
double ddp_tbuf_f16_value(uint16_t h) { return decode(h, 5, 10); }
double ddp_tbuf_bf16_value(uint16_t h) { return decode(h, 8, 7); }

int ddp_tbuf_is_int(ddp_dtype_t dt) { return dt == DDP_I32 || dt == DDP_I64 || dt == DDP_U8; }

double ddp_tbuf_get(const void *buf, ddp_dtype_t dt, size_t i) {
  switch (dt) {
    case DDP_F32: return ((const float *)buf)[i];
    case DDP_F64: return ((const double *)buf)[i];
    case DDP_F16: return ddp_tbuf_f16_value(((const uint16_t *)buf)[i]);
    case DDP_BF16: return ddp_tbuf_bf16_value(((const uint16_t *)buf)[i]);
    case DDP_I32: return ((const int32_t *)buf)[i];
    case DDP_I64: return (double)((const int64_t *)buf)[i];
    case DDP_U8: return ((const uint8_t *)buf)[i];
    default: return NAN;
  }
}

void ddp_tbuf_set(void *buf, ddp_dtype_t dt, size_t i, double v) {
  switch (dt) {
    case DDP_F32: ((float *)buf)[i] = (float)v; break;
    case DDP_F64: ((double *)buf)[i] = v; break;
    case DDP_F16: ((uint16_t *)buf)[i] = ddp_tbuf_f16(v); break;
    case DDP_BF16: ((uint16_t *)buf)[i] = ddp_tbuf_bf16(v); break;
    default: ddp_tbuf_set_int(buf, dt, i, (int64_t)v); break;
  }
}

int64_t ddp_tbuf_get_int(const void *buf, ddp_dtype_t dt, size_t i) {
  switch (dt) {
    case DDP_I32: return ((const int32_t *)buf)[i];
    case DDP_I64: return ((const int64_t *)buf)[i];
    case DDP_U8: return ((const uint8_t *)buf)[i];
    default: return (int64_t)ddp_tbuf_get(buf, dt, i);
  }
}

void ddp_tbuf_set_int(void *buf, ddp_dtype_t dt, size_t i, int64_t v) {
  switch (dt) {
    case DDP_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case DDP_I64: ((int64_t *)buf)[i] = v; break;
    case DDP_U8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    default: ddp_tbuf_set(buf, dt, i, (double)v); break;
  }
}

void ddp_tbuf_fill(void *buf, ddp_dtype_t dt, size_t n, int rank, ddp_tbuf_value_fn value,
                   const void *ctx) {
  for (size_t i = 0; i < n; i++) ddp_tbuf_set(buf, dt, i, value(rank, i, ctx));
}

size_t ddp_tbuf_compare(const void *buf, ddp_dtype_t dt, size_t n, ddp_tbuf_value_fn want,
                        int rank, const void *ctx, double tol, const char *what) {
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    double g = ddp_tbuf_get(buf, dt, i), w = want(rank, i, ctx);
    int ok = tol == 0 ? g == w : fabs(g - w) <= tol * fmax(1.0, fabs(w));
    if (!ok && !bad++)
      fprintf(stderr, "[rank %d] %s: %s element %zu of %zu is %.9g, expected %.9g (tolerance %g)\n",
              rank, what, ddp_dtype_name(dt), i, n, g, w, tol);
  }
  return bad;
}
