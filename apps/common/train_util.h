/* ddp_train's optimiser and schedule: SGD with momentum and weight decay (PyTorch's update
 * rule), linear warmup then cosine decay of the learning rate, and a wall clock. Header-only. */
#ifndef TRAIN_UTIL_H
#define TRAIN_UTIL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
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

static inline double train_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif /* TRAIN_UTIL_H */
