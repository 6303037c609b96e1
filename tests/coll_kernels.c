/* Host reduction kernels (collectives/kernels/coll_reduce.c, compiled into this program): f16/bf16
 * conversions against the compiler's _Float16 and against the round-to-nearest-even rule,
 * the array (F16C / vectorised) forms against the scalar ones, every dtype x op against a
 * plain reference, in-place and three-operand forms, and the avg scaling. No MPI needed. */
#include <math.h>
#include <stdlib.h>

#include "coll_internal.h"
#include "ddp_test.h"
#include "ddp_test_typed.h"

static uint32_t fbits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static float bitsf(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static uint16_t h_of(_Float16 h) {
  uint16_t u;
  memcpy(&u, &h, 2);
  return u;
}

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng >> 11);
}

static void test_f16(void) {
  /* Every half value widens exactly like the compiler's conversion. */
  int bad = 0;
  for (uint32_t h = 0; h < 65536; h++) {
    _Float16 x;
    uint16_t hh = (uint16_t)h;
    memcpy(&x, &hh, 2);
    float want = (float)x, got = ddp__f16_to_f32(hh);
    if (isnan(want) ? !isnan(got) : fbits(want) != fbits(got)) bad++;
  }
  CHECK(bad == 0, "f16->f32: %d of 65536 values differ from _Float16", bad);
  /* Narrowing: random bit patterns plus edge cases, scalar and array forms. */
  enum { N = 200000 };
  float *f = malloc(N * sizeof *f);
  uint16_t *arr = malloc(N * sizeof *arr);
  float *back = malloc(N * sizeof *back);
  uint16_t *src = malloc(N * sizeof *src);
  for (int i = 0; i < N; i++) {
    uint32_t u = rnd();
    /* Mostly values in the half range (exponent 100..150), some anywhere. */
    if (i % 4) u = (u & 0x807fffffu) | ((100u + (u >> 8) % 50u) << 23);
    f[i] = bitsf(u);
    src[i] = (uint16_t)rnd();
  }
  const float edges[] = {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, 1e-8f, 5.960464e-8f,
                         2.980232e-8f, 2.9802326e-8f, 6.097555e-5f, 1.0009765625f, INFINITY,
                         -INFINITY, NAN};
  for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) f[i] = edges[i];
  ddp__f32_to_f16_n(arr, f, N);
  ddp__f16_to_f32_n(back, src, N);
  int bs = 0, ba = 0, bw = 0;
  for (int i = 0; i < N; i++) {
    uint16_t want = h_of((_Float16)f[i]), got = ddp__f32_to_f16(f[i]);
    if (isnan(f[i])) {
      bs += (got & 0x7c00) != 0x7c00 || !(got & 0x3ff);
      ba += (arr[i] & 0x7c00) != 0x7c00 || !(arr[i] & 0x3ff);
    } else {
      bs += got != want;
      ba += arr[i] != want;
    }
    float w = ddp__f16_to_f32(src[i]);
    bw += isnan(w) ? !isnan(back[i]) : fbits(w) != fbits(back[i]);
  }
  CHECK(bs == 0, "f32->f16 scalar: %d of %d differ from _Float16 (round to nearest even)", bs, N);
  CHECK(ba == 0, "f32->f16 array form: %d of %d differ", ba, N);
  CHECK(bw == 0, "f16->f32 array form: %d of %d differ from the scalar one", bw, N);
  free(f), free(arr), free(back), free(src);
}

static void test_bf16(void) {
  enum { N = 200000 };
  float *f = malloc(N * sizeof *f);
  uint16_t *arr = malloc(N * sizeof *arr);
  for (int i = 0; i < N; i++) {
    uint32_t u = rnd();
    if (i % 3 == 0) u &= 0xffff8000u | (rnd() & 1u ? 0x8000u : 0u); /* exact ties */
    f[i] = bitsf(u);
  }
  f[0] = NAN;
  f[1] = INFINITY;
  f[2] = 3.3895314e38f; /* rounds to inf */
  ddp__f32_to_bf16_n(arr, f, N);
  int bad = 0, badarr = 0;
  for (int i = 0; i < N; i++) {
    uint16_t got = ddp__f32_to_bf16(f[i]);
    badarr += got != arr[i];
    if (isnan(f[i])) {
      bad += !isnan(ddp__bf16_to_f32(got));
      continue;
    }
    /* The nearer of the two neighbours, the even one on a tie. */
    uint32_t u = fbits(f[i]);
    uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
    double x = f[i], dl = fabs(x - (double)ddp__bf16_to_f32(lo));
    /* Past the largest finite bf16 the upper neighbour is inf, at 2^128 for rounding. */
    double dh = isinf(ddp__bf16_to_f32(hi)) ? fabs(x - copysign(ldexp(1.0, 128), x))
                                            : fabs(x - (double)ddp__bf16_to_f32(hi));
    uint16_t want = (u & 0xffffu) == 0 ? lo : dl < dh ? lo : dh < dl ? hi : ((lo & 1) ? hi : lo);
    bad += got != want;
  }
  CHECK(bad == 0, "f32->bf16: %d of %d not rounded to nearest even", bad, N);
  CHECK(badarr == 0, "f32->bf16 array form: %d of %d differ from the scalar one", badarr, N);
  free(f), free(arr);
}

/* dst op src against a reference, every dtype and op, in place and 3-operand. */
static void test_reduce(void) {
  enum { N = 1037 };
  const ddp_dtype_t dts[] = {DDP_F32, DDP_F64, DDP_F16, DDP_BF16, DDP_I32, DDP_I64, DDP_U8};
  const ddp_op_t ops[] = {DDP_SUM, DDP_MIN, DDP_MAX, DDP_PROD};
  unsigned char a[N * 8], b[N * 8], d[N * 8], want[N * 8];
  for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++)
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
      ddp_dtype_t dt = dts[t];
      ddp_op_t op = ops[o];
      size_t es = ddp_dtype_size(dt);
      for (size_t i = 0; i < N; i++) {
        double x = (double)((int)(rnd() % 41) - 20) / (dt == DDP_F32 || dt == DDP_F64 ? 4.0 : 1.0);
        double y = (double)((int)(rnd() % 41) - 20);
        if (dt == DDP_U8) x = fabs(x), y = fabs(y);
        ddp_tbuf_set(a, dt, i, x);
        ddp_tbuf_set(b, dt, i, y);
      }
      /* Reference, element by element, rounded to the dtype by the typed buffers (nearest even,
       * independent of the library's converters). */
      for (size_t i = 0; i < N; i++) {
        double x = ddp_tbuf_get(a, dt, i), y = ddp_tbuf_get(b, dt, i);
        double r = op == DDP_SUM ? x + y : op == DDP_PROD ? x * y : op == DDP_MIN ? fmin(x, y) : fmax(x, y);
        ddp_tbuf_set(want, dt, i, r);
      }
      memcpy(d, a, N * es);
      ddp__reduce_host(d, b, N, dt, op);
      CHECK(!memcmp(d, want, N * es), "reduce %s %s (in place) differs from the reference",
            ddp_dtype_name(dt), ddp_op_name(op));
      memset(d, 0, N * es);
      ddp__reduce3_host(d, a, b, N, dt, op);
      CHECK(!memcmp(d, want, N * es), "reduce3 %s %s differs from the reference",
            ddp_dtype_name(dt), ddp_op_name(op));
      memcpy(d, b, N * es);
      ddp__reduce3_host(d, a, d, N, dt, op); /* dst aliases the second operand */
      CHECK(!memcmp(d, want, N * es), "reduce3 %s %s (dst == b) differs", ddp_dtype_name(dt),
            ddp_op_name(op));
    }
  /* Signed integer sums wrap instead of overflowing. */
  int32_t x = INT32_MAX, y = 1;
  ddp__reduce_host(&x, &y, 1, DDP_I32, DDP_SUM);
  CHECK(x == INT32_MIN, "i32 sum wraps: %d", (int)x);
}

static void test_scale(void) {
  int32_t i[4] = {7, -7, 9, 0};
  ddp__scale_host(i, 4, DDP_I32, 2.0);
  CHECK(i[0] == 3 && i[1] == -3 && i[2] == 4 && i[3] == 0, "i32 avg truncates toward zero: %d %d %d",
        (int)i[0], (int)i[1], (int)i[2]);
  float f[3] = {1.0f, 3.0f, -6.0f};
  ddp__scale_host(f, 3, DDP_F32, 3.0);
  CHECK(f[0] == 1.0f / 3.0f && f[1] == 1.0f && f[2] == -2.0f, "f32 scale %g %g %g", f[0], f[1], f[2]);
  uint16_t h[2] = {h_of((_Float16)3.0f), h_of((_Float16)1.0f)};
  ddp__scale_host(h, 2, DDP_F16, 3.0);
  CHECK(h[0] == h_of((_Float16)1.0f) && h[1] == h_of((_Float16)(1.0f / 3.0f)), "f16 scale %04x %04x",
        h[0], h[1]);
  uint8_t u[2] = {255, 5};
  ddp__scale_host(u, 2, DDP_U8, 4.0);
  CHECK(u[0] == 63 && u[1] == 1, "u8 scale %u %u", u[0], u[1]);
}

static double typed_seed(int rank, size_t i, const void *ctx) {
  (void)ctx;
  return (double)((int)(i * 7 + (size_t)rank * 3) % 11) + 2.0; /* 2..12: exact in bf16 */
}

/* The tests' own typed buffers (tests/common/ddp_test_typed.c), which the reference above and
 * the other tests rely on: every f16 value decodes as the compiler's _Float16 and encodes back
 * to itself; random floats encode as _Float16 rounds them; bf16 rounds to nearest even. */
static void test_typed(void) {
  int bad = 0;
  for (uint32_t h = 0; h < 65536; h++) {
    _Float16 x;
    uint16_t hh = (uint16_t)h;
    memcpy(&x, &hh, 2);
    double v = ddp_tbuf_f16_value(hh);
    if (isnan((double)x) ? !isnan(v) : (v != (double)x || ddp_tbuf_f16(v) != hh)) bad++;
  }
  CHECK(bad == 0, "typed buffers: %d of 65536 f16 values decode or encode wrongly", bad);
  int bf = 0, bb = 0;
  for (int i = 0; i < 1000000; i++) {
    float f = bitsf(rnd() ^ (rnd() << 21));
    if (isnan(f)) continue;
    bf += ddp_tbuf_f16(f) != h_of((_Float16)f);
    uint32_t u = fbits(f);
    uint16_t want = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    bb += ddp_tbuf_bf16(f) != want || ddp_tbuf_bf16_value(want) != (double)bitsf((uint32_t)want << 16);
  }
  CHECK(bf == 0, "typed buffers: %d random floats encode to f16 unlike _Float16", bf);
  CHECK(bb == 0, "typed buffers: %d random floats round to bf16 wrongly", bb);
  uint16_t hb[100];
  ddp_tbuf_fill(hb, DDP_BF16, 100, 3, typed_seed, NULL);
  CHECK(ddp_tbuf_compare(hb, DDP_BF16, 100, typed_seed, 3, NULL, 0, "bf16 fill") == 0, "fill/compare");
  hb[7] = ddp_tbuf_bf16(ddp_tbuf_bf16_value(hb[7]) + 1.0);
  CHECK(ddp_tbuf_compare(hb, DDP_BF16, 100, typed_seed, 3, NULL, 0, "planted difference (expected)") == 1,
        "compare missed a planted difference");
  CHECK(ddp_tbuf_compare(hb, DDP_BF16, 100, typed_seed, 3, NULL, 0.5, "within tolerance") == 0,
        "tolerance 0.5 refused a difference of 1 at |value| >= 2");
  unsigned char buf[8];
  ddp_tbuf_set_int(buf, DDP_I64, 0, INT64_MAX - 5);
  CHECK(ddp_tbuf_get_int(buf, DDP_I64, 0) == INT64_MAX - 5, "i64 not exact");
  ddp_tbuf_set(buf, DDP_U8, 0, 300);
  CHECK(ddp_tbuf_get(buf, DDP_U8, 0) == 44, "u8 300 stored as %g", ddp_tbuf_get(buf, DDP_U8, 0));
}

#define KERNELS_CASE(name)                                                                  \
  static int run_##name(ddp_test_t *t) {                                                    \
    (void)t;                                                                                \
    test_##name();                                                                          \
    return 0;                                                                               \
  }
KERNELS_CASE(f16)
KERNELS_CASE(bf16)
KERNELS_CASE(reduce)
KERNELS_CASE(scale)
KERNELS_CASE(typed)

DDP_TEST_PROGRAM("coll_kernels", DDP_TEST_CASE_AS("f16", run_f16, DDP_TEST_NO_MPI), DDP_TEST_CASE_AS("bf16", run_bf16, DDP_TEST_NO_MPI),
                 DDP_TEST_CASE_AS("reduce", run_reduce, DDP_TEST_NO_MPI), DDP_TEST_CASE_AS("scale", run_scale, DDP_TEST_NO_MPI),
                 DDP_TEST_CASE_AS("typed", run_typed, DDP_TEST_NO_MPI));
