/* The training kit's small pieces (see train_util.h). */
#include "train_util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

uint64_t train_rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

float train_rng_uniform(uint64_t *s) {
  return (float)((double)(train_rng_next(s) >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

void train_synth_sample(uint64_t seed, uint64_t index, int features, int classes, float *x,
                        int *label) {
  uint64_t s = seed ^ (index * 0xD1B54A32D192ED03ULL + 0x632BE59BD9B4E019ULL);
  for (int f = 0; f < features; f++) x[f] = train_rng_uniform(&s);
  *label = (int)(train_rng_next(&s) % (uint64_t)classes);
}

double train_lr(double lr0, uint64_t step, uint64_t warmup, uint64_t total) {
  if (step < warmup) return lr0 * (double)(step + 1) / (double)warmup;
  if (total <= warmup) return lr0;
  double t = (double)(step - warmup) / (double)(total - warmup);
  if (t > 1.0) t = 1.0;
  return lr0 * 0.5 * (1.0 + cos(3.14159265358979323846 * t));
}

uint64_t train_default_warmup(uint64_t total) {
  uint64_t w = total / 10;
  return w < 200 ? w : 200;
}

float train_round_fp16(float x) {
  uint32_t u, a, sign;
  memcpy(&u, &x, 4);
  sign = u & 0x80000000u;
  a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return x;                    /* inf, nan */
  if (a >= 0x477ff000u) a = 0x7f800000u;             /* >= 65520: inf */
  else if (a < 0x38800000u) {                        /* f16 subnormal: multiples of 2^-24 */
    float q = nearbyintf(fabsf(x) * 16777216.0f) * (1.0f / 16777216.0f);
    memcpy(&a, &q, 4);
  } else {
    a += 0xfffu + ((a >> 13) & 1u);                  /* 23 -> 10 mantissa bits, ties to even */
    a &= ~0x1fffu;
  }
  u = sign | a;
  memcpy(&x, &u, 4);
  return x;
}

float train_round_bf16(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return x;     /* nan */
  u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  memcpy(&x, &u, 4);
  return x;
}

void train_round(float *v, size_t n, train_amp_t amp) {
  if (amp == TRAIN_AMP_FP16)
    for (size_t k = 0; k < n; k++) v[k] = train_round_fp16(v[k]);
  else if (amp == TRAIN_AMP_BF16)
    for (size_t k = 0; k < n; k++) v[k] = train_round_bf16(v[k]);
}

int train_unscale_check(float *g, size_t n, float scale) {
  float inv = 1.0f / scale;
  int finite = 1;
  for (size_t k = 0; k < n; k++) {
    g[k] *= inv;
    if (!isfinite(g[k])) finite = 0;
  }
  return finite;
}

void train_scaler_update(train_scaler_t *s, int finite) {
  if (!finite) {
    s->skipped++;
    s->clean = 0;
    s->scale *= 0.5f;
    if (s->scale < 1.0f) s->scale = 1.0f;
  } else if (++s->clean >= s->interval) {
    s->clean = 0;
    if (s->scale < 1.0e30f) s->scale *= 2.0f;
  }
}

double train_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int train_fail(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (err && errlen) vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  return -1;
}
