/* ddp_train's optimiser and schedule: SGD with momentum and weight decay (PyTorch's update
 * rule), linear warmup then cosine decay of the learning rate, and a wall clock. Header-only. */
#ifndef TRAIN_UTIL_H
#define TRAIN_UTIL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* Learning rate of 0-based step `step` out of `total` steps: linear warmup over `warmup`
 * steps to lr0, then half a cosine down to 0 at `total` (what the PyTorch peer does:
 * lr0 * (s+1)/warm during warmup, lr0 * 0.5 * (1 + cos(pi * (s - warm) / (total - warm)))). */
static inline double train_lr(double lr0, uint64_t step, uint64_t warmup, uint64_t total) {
  if (step < warmup) return lr0 * (double)(step + 1) / (double)warmup;
  if (total <= warmup) return lr0;
  double t = (double)(step - warmup) / (double)(total - warmup);
  if (t > 1.0) t = 1.0;
  return lr0 * 0.5 * (1.0 + cos(3.14159265358979323846 * t));
}

/* Default warmup: min(200, total / 10) steps, as in the PyTorch peer. */
static inline uint64_t train_default_warmup(uint64_t total) {
  uint64_t w = total / 10;
  return w < 200 ? w : 200;
}

/* torch.optim.SGD (dampening 0, nesterov off): g += wd * p; buf = momentum * buf + g;
 * p -= lr * buf. buf starts at zero, which equals PyTorch's buf = g on the first step. */
static inline void train_sgd_step(float *p, const float *g, float *buf, size_t count, float lr,
                                  float momentum, float wd) {
  for (size_t k = 0; k < count; k++) {
    float gk = g[k] + wd * p[k];
    buf[k] = momentum * buf[k] + gk;
    p[k] -= lr * buf[k];
  }
}

/* Deterministic generator (splitmix64, the same stream as mlp.h's): identical everywhere. */
static inline uint64_t train_rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
/* Uniform in [-1, 1). */
static inline float train_rng_uniform(uint64_t *s) {
  return (float)((double)(train_rng_next(s) >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

/* Mixed precision on the CPU: values rounded (round to nearest even) to what an f16 or bf16
 * tensor can hold, kept in f32 storage. f16: 10-bit mantissa, subnormals below 2^-14 (steps
 * of 2^-24), overflow to inf from 65520 up; bf16: f32's range with an 8-bit mantissa. */
typedef enum train_amp { TRAIN_AMP_NONE = 0, TRAIN_AMP_FP16, TRAIN_AMP_BF16 } train_amp_t;

static inline float train_round_fp16(float x) {
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

static inline float train_round_bf16(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return x;     /* nan */
  u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  memcpy(&x, &u, 4);
  return x;
}

static inline void train_round(float *v, size_t n, train_amp_t amp) {
  if (amp == TRAIN_AMP_FP16)
    for (size_t k = 0; k < n; k++) v[k] = train_round_fp16(v[k]);
  else if (amp == TRAIN_AMP_BF16)
    for (size_t k = 0; k < n; k++) v[k] = train_round_bf16(v[k]);
}

/* Dynamic loss scaling as torch.cuda.amp.GradScaler does it: start at 2^16; a step whose
 * gradients hold an inf or nan is skipped and the scale halved; after `interval` clean steps
 * in a row the scale doubles. */
typedef struct train_scaler {
  float scale;
  uint32_t clean, interval;
  uint64_t skipped;
} train_scaler_t;

/* Unscales g in place and returns 1 when every value is finite (take the step). */
static inline int train_unscale_check(float *g, size_t n, float scale) {
  float inv = 1.0f / scale;
  int finite = 1;
  for (size_t k = 0; k < n; k++) {
    g[k] *= inv;
    if (!isfinite(g[k])) finite = 0;
  }
  return finite;
}

static inline void train_scaler_update(train_scaler_t *s, int finite) {
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

static inline double train_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif /* TRAIN_UTIL_H */
