/* The training kit's small pieces: the one random generator (splitmix64) and the synthetic
 * samples drawn from it, the learning-rate schedule (linear warmup, cosine decay), mixed
 * precision on the CPU (f16/bf16 rounding, dynamic loss scaling) and a wall clock.
 * Definitions in train_util.c. */
#ifndef TRAIN_UTIL_H
#define TRAIN_UTIL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Deterministic generator (splitmix64): identical streams on every platform. */
uint64_t train_rng_next(uint64_t *s);
/* Uniform in [-1, 1). */
float train_rng_uniform(uint64_t *s);

/* Deterministic synthetic sample `index` of a dataset: inputs uniform in [-1, 1) and a label,
 * both a pure function of (seed, index), so any rank can produce any slice of a global batch. */
void train_synth_sample(uint64_t seed, uint64_t index, int features, int classes, float *x,
                        int *label);

/* Learning rate of 0-based step `step` out of `total` steps: linear warmup over `warmup`
 * steps to lr0, then half a cosine down to 0 at `total` (what the PyTorch peer does:
 * lr0 * (s+1)/warm during warmup, lr0 * 0.5 * (1 + cos(pi * (s - warm) / (total - warm)))). */
double train_lr(double lr0, uint64_t step, uint64_t warmup, uint64_t total);
/* Default warmup: min(200, total / 10) steps, as in the PyTorch peer. */
uint64_t train_default_warmup(uint64_t total);

/* Mixed precision on the CPU: values rounded (round to nearest even) to what an f16 or bf16
 * tensor can hold, kept in f32 storage. f16: 10-bit mantissa, subnormals below 2^-14 (steps
 * of 2^-24), overflow to inf from 65520 up; bf16: f32's range with an 8-bit mantissa. */
typedef enum train_amp { TRAIN_AMP_NONE = 0, TRAIN_AMP_FP16, TRAIN_AMP_BF16 } train_amp_t;

float train_round_fp16(float x);
float train_round_bf16(float x);
/* Rounds v[0 .. n-1] in place (TRAIN_AMP_NONE: unchanged). */
void train_round(float *v, size_t n, train_amp_t amp);

/* Dynamic loss scaling as torch.cuda.amp.GradScaler does it: start at 2^16; a step whose
 * gradients hold an inf or nan is skipped and the scale halved; after `interval` clean steps
 * in a row the scale doubles. */
typedef struct train_scaler {
  float scale;
  uint32_t clean, interval;
  uint64_t skipped;
} train_scaler_t;

/* Unscales g in place and returns 1 when every value is finite (take the step). */
int train_unscale_check(float *g, size_t n, float scale);
void train_scaler_update(train_scaler_t *s, int finite);

/* Seconds on the monotonic clock. */
double train_now(void);

/* The kit's "return -1 with a message" for functions that take (char *err, size_t errlen):
 * formats into err (when err and errlen) and returns -1. */
int train_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#ifdef __cplusplus
}
#endif
#endif /* TRAIN_UTIL_H */
