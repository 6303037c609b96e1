/* Host reduction kernels: plain loops over restrict pointers that -O3 vectorises, with
 * f16/bf16 widened to f32 in small blocks and rounded back to nearest-even. */
#include <string.h>

#include "kernels_internal.h"

typedef union { uint32_t u; float f; } ddp__fbits_t;

float ddp__f16_to_f32(uint16_t h) {
  /* Bit manipulation (F. Giesen's half_to_float): no F16C assumed. */
  const ddp__fbits_t magic = {.u = 113u << 23};
  const uint32_t shifted_exp = 0x7c00u << 13;
  ddp__fbits_t o;
  o.u = (uint32_t)(h & 0x7fffu) << 13;
  uint32_t exp = shifted_exp & o.u;
  o.u += (uint32_t)(127 - 15) << 23;
  if (exp == shifted_exp) {
    o.u += (uint32_t)(128 - 16) << 23; /* inf/nan */
  } else if (exp == 0) {
    o.u += 1u << 23; /* subnormal: renormalise through the FPU */
    o.f -= magic.f;
  }
  o.u |= (uint32_t)(h & 0x8000u) << 16;
  return o.f;
}

uint16_t ddp__f32_to_f16(float fl) {
  const ddp__fbits_t f32infty = {.u = 255u << 23};
  const ddp__fbits_t f16max = {.u = (127u + 16u) << 23};
  const ddp__fbits_t denorm_magic = {.u = ((127u - 15u) + (23u - 10u) + 1u) << 23};
  ddp__fbits_t f = {.f = fl};
  uint32_t sign = f.u & 0x80000000u;
  uint16_t o;
  f.u ^= sign;
  if (f.u >= f16max.u) {
    o = (f.u > f32infty.u) ? 0x7e00 : 0x7c00;
  } else if (f.u < (113u << 23)) {
    /* Subnormal or zero: the FPU's own round-to-nearest-even does the rounding. */
    f.f += denorm_magic.f;
    o = (uint16_t)(f.u - denorm_magic.u);
  } else {
    uint32_t mant_odd = (f.u >> 13) & 1u;
    f.u += ((uint32_t)(15 - 127) << 23) + 0xfffu;
    f.u += mant_odd;
    o = (uint16_t)(f.u >> 13);
  }
  return (uint16_t)(o | (sign >> 16));
}

float ddp__bf16_to_f32(uint16_t h) {
  ddp__fbits_t o = {.u = (uint32_t)h << 16};
  return o.f;
}

uint16_t ddp__f32_to_bf16(float fl) {
  ddp__fbits_t f = {.f = fl};
  if ((f.u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((f.u >> 16) | 0x40u); /* quiet NaN */
  f.u += 0x7fffu + ((f.u >> 16) & 1u);
  return (uint16_t)(f.u >> 16);
}

/* ---- array conversions -------------------------------------------------------------------
 * bf16: branch-free forms the compiler vectorises. f16: F16C instructions when the CPU has
 * them (checked at run time; the default build assumes nothing beyond x86-64), else the
 * scalar bit manipulation above. Both round to nearest-even. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define DDP__HAVE_F16C_PATH 1
/* Asked on every conversion, so it must be cheap: GCC's __builtin_cpu_supports reads the
 * CPU model libgcc detected once (1.6 ns here), while executing cpuid traps to the hypervisor
 * in a virtual machine (7 us per call measured on the build machine). clang 14 does not know
 * the "f16c" feature string, so a clang build (the fuzz targets) asks cpuid leaf 1 (ECX bit
 * 29 F16C, 28 AVX, 27 OSXSAVE) and XGETBV (the OS saves YMM state) directly. */
static int have_f16c(void) {
#if defined(__clang__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
  if (!((c >> 29) & 1u) || !((c >> 28) & 1u) || !((c >> 27) & 1u)) return 0;
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  (void)hi;
  return (lo & 6u) == 6u;
#else
  __builtin_cpu_init();
  return __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
#endif
}
__attribute__((target("avx,f16c"))) static void f16_to_f32_f16c(float *dst, const uint16_t *src,
                                                                size_t count) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
  for (; i < count; i++) dst[i] = ddp__f16_to_f32(src[i]);
}
__attribute__((target("avx,f16c"))) static void f32_to_f16_f16c(uint16_t *dst, const float *src,
                                                                size_t count, float scale) {
  size_t i = 0;
  if (scale == 1.0f) {
    for (; i + 8 <= count; i += 8)
      _mm_storeu_si128((__m128i *)(dst + i),
                       _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  } else {
    __m256 s = _mm256_set1_ps(scale);
    for (; i + 8 <= count; i += 8)
      _mm_storeu_si128((__m128i *)(dst + i),
                       _mm256_cvtps_ph(_mm256_mul_ps(_mm256_loadu_ps(src + i), s),
                                       _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < count; i++) dst[i] = ddp__f32_to_f16(src[i] * scale);
}
#endif

void ddp__f16_to_f32_n(float *restrict dst, const uint16_t *restrict src, size_t count) {
#ifdef DDP__HAVE_F16C_PATH
  if (have_f16c()) {
    f16_to_f32_f16c(dst, src, count);
    return;
  }
#endif
  for (size_t i = 0; i < count; i++) dst[i] = ddp__f16_to_f32(src[i]);
}
void ddp__f32_to_f16_n(uint16_t *restrict dst, const float *restrict src, size_t count) {
  ddp__f32_to_f16_scaled_n(dst, src, count, 1.0f);
}
void ddp__f32_to_f16_scaled_n(uint16_t *restrict dst, const float *restrict src, size_t count,
                              float scale) {
#ifdef DDP__HAVE_F16C_PATH
  if (have_f16c()) {
    f32_to_f16_f16c(dst, src, count, scale);
    return;
  }
#endif
  if (scale == 1.0f)
    for (size_t i = 0; i < count; i++) dst[i] = ddp__f32_to_f16(src[i]);
  else
    for (size_t i = 0; i < count; i++) dst[i] = ddp__f32_to_f16(src[i] * scale);
}
void ddp__bf16_to_f32_n(float *restrict dst, const uint16_t *restrict src, size_t count) {
  for (size_t i = 0; i < count; i++) {
    uint32_t v = (uint32_t)src[i] << 16;
    memcpy(&dst[i], &v, 4);
  }
}
void ddp__f32_to_bf16_n(uint16_t *restrict dst, const float *restrict src, size_t count) {
  ddp__f32_to_bf16_scaled_n(dst, src, count, 1.0f);
}
void ddp__f32_to_bf16_scaled_n(uint16_t *restrict dst, const float *restrict src, size_t count,
                               float scale) {
  for (size_t i = 0; i < count; i++) {
    float f = src[i] * scale; /* exact when scale == 1 */
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    uint32_t nan = (x & 0x7fffffffu) > 0x7f800000u;
    dst[i] = (uint16_t)(nan ? ((x >> 16) | 0x40u) : rounded);
  }
}

/* ---- element-wise ops ------------------------------------------------------------------- */
#define OP_SUM(a, b) ((a) + (b))
#define OP_PROD(a, b) ((a) * (b))
#define OP_MIN(a, b) ((b) < (a) ? (b) : (a))
#define OP_MAX(a, b) ((b) > (a) ? (b) : (a))
/* Signed integers are summed and multiplied in unsigned arithmetic: they wrap like two's
 * complement instead of overflowing (undefined in C). */

/* Both forms take void pointers (one table type for all dtypes) and convert to restrict
 * pointers inside, so the loops vectorise. */
#define DEF3R(NAME, T, EXPR)                                                                \
  static void NAME##_r(void *dv, const void *av, const void *bv, size_t n) {                \
    T *restrict dst = dv;                                                                   \
    const T *restrict a_ = av;                                                              \
    const T *restrict b_ = bv;                                                              \
    for (size_t i = 0; i < n; i++) {                                                        \
      T a = a_[i], b = b_[i];                                                               \
      dst[i] = (EXPR);                                                                      \
    }                                                                                       \
  }                                                                                         \
  static void NAME##_ip(void *dv, const void *bv, size_t n) {                               \
    T *restrict dst = dv;                                                                   \
    const T *restrict b_ = bv;                                                              \
    for (size_t i = 0; i < n; i++) {                                                        \
      T a = dst[i], b = b_[i];                                                              \
      dst[i] = (EXPR);                                                                      \
    }                                                                                       \
  }

#define DEF_TYPE(SUF, T, SUMX, PRODX)      \
  DEF3R(sum_##SUF, T, SUMX)               \
  DEF3R(prod_##SUF, T, PRODX)             \
  DEF3R(min_##SUF, T, OP_MIN(a, b))       \
  DEF3R(max_##SUF, T, OP_MAX(a, b))

DEF_TYPE(f32, float, OP_SUM(a, b), OP_PROD(a, b))
DEF_TYPE(f64, double, OP_SUM(a, b), OP_PROD(a, b))
DEF_TYPE(i32, int32_t, (int32_t)((uint32_t)a + (uint32_t)b), (int32_t)((uint32_t)a * (uint32_t)b))
DEF_TYPE(i64, int64_t, (int64_t)((uint64_t)a + (uint64_t)b), (int64_t)((uint64_t)a * (uint64_t)b))
DEF_TYPE(u8, uint8_t, (uint8_t)(a + b), (uint8_t)(a * b))
#undef DEF3R
#undef DEF_TYPE

typedef void (*red3_fn)(void *, const void *, const void *, size_t);
typedef void (*red2_fn)(void *, const void *, size_t);

#define FN3(OP, SUF) OP##_##SUF##_r
#define FN2(OP, SUF) OP##_##SUF##_ip
#define ROW3(SUF) {FN3(sum, SUF), NULL, FN3(min, SUF), FN3(max, SUF), FN3(prod, SUF)}
#define ROW2(SUF) {FN2(sum, SUF), NULL, FN2(min, SUF), FN2(max, SUF), FN2(prod, SUF)}

/* Indexed [dtype][op]; f16/bf16 rows are NULL (handled by the widening path). */
static red3_fn const tab3[DDP_DTYPE_COUNT][DDP_OP_COUNT] = {
    [DDP_F32] = ROW3(f32), [DDP_F64] = ROW3(f64), [DDP_I32] = ROW3(i32),
    [DDP_I64] = ROW3(i64), [DDP_U8] = ROW3(u8)};
static red2_fn const tab2[DDP_DTYPE_COUNT][DDP_OP_COUNT] = {
    [DDP_F32] = ROW2(f32), [DDP_F64] = ROW2(f64), [DDP_I32] = ROW2(i32),
    [DDP_I64] = ROW2(i64), [DDP_U8] = ROW2(u8)};

/* f16/bf16: widen a block of each input, combine in f32, round once per element. */
static void reduce_half(uint16_t *dst, const uint16_t *a, const uint16_t *b, size_t count,
                        int bf16, ddp_op_t op) {
  enum { BLK = 512 };
  float fa[BLK], fb[BLK];
  red2_fn f = tab2[DDP_F32][op];
  for (size_t i = 0; i < count; i += BLK) {
    size_t n = count - i < BLK ? count - i : BLK;
    if (bf16) {
      ddp__bf16_to_f32_n(fa, a + i, n);
      ddp__bf16_to_f32_n(fb, b + i, n);
    } else {
      ddp__f16_to_f32_n(fa, a + i, n);
      ddp__f16_to_f32_n(fb, b + i, n);
    }
    f(fa, fb, n);
    if (bf16) ddp__f32_to_bf16_n(dst + i, fa, n);
    else ddp__f32_to_f16_n(dst + i, fa, n);
  }
}

void ddp__reduce3_host(void *dst, const void *a, const void *b, size_t count, ddp_dtype_t dtype,
                       ddp_op_t op) {
  if (count == 0) return;
  if (op == DDP_AVG) op = DDP_SUM;
  if (dtype == DDP_F16 || dtype == DDP_BF16) {
    reduce_half(dst, a, b, count, dtype == DDP_BF16, op);
    return;
  }
  if (dst == a) tab2[dtype][op](dst, b, count);
  else if (dst == b) tab2[dtype][op](dst, a, count); /* every op here is commutative */
  else tab3[dtype][op](dst, a, b, count);
}

void ddp__reduce_host(void *dst, const void *src, size_t count, ddp_dtype_t dtype, ddp_op_t op) {
  ddp__reduce3_host(dst, dst, src, count, dtype, op);
}

void ddp__scale_host(void *buf, size_t count, ddp_dtype_t dtype, double divisor) {
  size_t i;
  switch (dtype) {
    case DDP_F32: {
      float *p = buf, d = (float)divisor;
      for (i = 0; i < count; i++) p[i] /= d;
      break;
    }
    case DDP_F64: {
      double *p = buf;
      for (i = 0; i < count; i++) p[i] /= divisor;
      break;
    }
    case DDP_F16:
    case DDP_BF16: {
      uint16_t *p = buf;
      float d = (float)divisor;
      for (i = 0; i < count; i++) {
        if (dtype == DDP_F16) p[i] = ddp__f32_to_f16(ddp__f16_to_f32(p[i]) / d);
        else p[i] = ddp__f32_to_bf16(ddp__bf16_to_f32(p[i]) / d);
      }
      break;
    }
    case DDP_I32: {
      int32_t *p = buf, d = (int32_t)divisor;
      for (i = 0; i < count; i++) p[i] /= d;
      break;
    }
    case DDP_I64: {
      int64_t *p = buf, d = (int64_t)divisor;
      for (i = 0; i < count; i++) p[i] /= d;
      break;
    }
    case DDP_U8: {
      uint8_t *p = buf;
      unsigned d = (unsigned)divisor;
      for (i = 0; i < count; i++) p[i] = (uint8_t)(p[i] / d);
      break;
    }
    default: break;
  }
}

void ddp__copy_host(void *dst, const void *src, size_t bytes) {
  if (dst != src && bytes) memcpy(dst, src, bytes);
}
