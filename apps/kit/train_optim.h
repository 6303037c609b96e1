/* The training kit's optimizer behind a small interface, so the update rules (SGD with
 * momentum, AdamW) share their callers: create one over the tensor sizes, call step with the
 * parameters and their (averaged) gradients, read or restore its state (checkpoints, a GPU
 * copy) buffer by buffer. Definitions in train_optim.c.
 *
 *   train_optim_opts_t oo;
 *   train_optim_opts_default(&oo);               // SGD, momentum 0.9, weight decay 0
 *   oo.momentum = 0.9f; oo.wd = 5e-4f;           // or train_optim_opts_adamw(&oo)
 *   train_optim_t *opt = NULL;
 *   if (train_optim_create(&oo, m.count, m.nparams, &opt) != 0) ...;
 *   train_optim_step(opt, m.param, m.grad, lr);  // every tensor
 *   train_optim_destroy(&opt);
 *
 * On a shard (ZeRO-1: each rank updates, and keeps state for, elements [begin[i],
 * begin[i] + count[i]) of tensor i only): create it over the shard's counts and step with
 *   train_optim_step_at(opt, m.param, m.grad, begin, lr);
 * Every update rule is elementwise, so the shards of all ranks together compute bitwise what
 * one optimizer over the whole tensors computes. */
#ifndef TRAIN_OPTIM_H
#define TRAIN_OPTIM_H

#include <stddef.h>
#include <stdint.h>

typedef enum train_optim_kind {
  TRAIN_OPTIM_SGD = 0,   /* torch.optim.SGD: momentum, weight decay, dampening 0, no nesterov */
  TRAIN_OPTIM_ADAMW = 1, /* torch.optim.AdamW (amsgrad off): decoupled weight decay */
} train_optim_kind_t;

typedef struct train_optim_opts {
  train_optim_kind_t kind;
  float momentum; /* SGD momentum (0: plain SGD, no state kept unless wd != 0) */
  float wd;       /* weight decay: SGD adds wd * p to the gradient; AdamW p -= lr * wd * p */
  float beta1, beta2, eps; /* AdamW (0.9, 0.999, 1e-8) */
} train_optim_opts_t;

typedef struct train_optim train_optim_t;

/* kind SGD, momentum 0.9, wd 0 (AdamW fields at their defaults). Returns 0, -1 for NULL o. */
int train_optim_opts_default(train_optim_opts_t *o);
/* torch.optim.AdamW's defaults: betas (0.9, 0.999), eps 1e-8, weight decay 0.01. */
int train_optim_opts_adamw(train_optim_opts_t *o);
/* "sgd" / "adamw" (NULL for an unknown kind) and back (-1 for an unknown name). */
const char *train_optim_name(train_optim_kind_t kind);
int train_optim_parse(const char *name, train_optim_kind_t *kind);
/* An optimizer for n tensors of counts[i] elements (0 allowed: an empty shard); state starts
 * at zero. Returns 0, or -1 on bad arguments or out of memory (*out untouched). */
int train_optim_create(const train_optim_opts_t *o, const size_t *counts, size_t n,
                       train_optim_t **out);
/* Frees it and sets *opt = NULL; NULL and *opt == NULL are accepted. */
void train_optim_destroy(train_optim_t **opt);
/* One update of every tensor: param[i] from grad[i] with learning rate lr. */
void train_optim_step(train_optim_t *opt, float *const *param, float *const *grad, float lr);
/* The same on a shard: tensor i's elements begin[i] .. begin[i] + counts[i] - 1 (counts as
 * given to create); begin NULL = all zero. */
void train_optim_step_at(train_optim_t *opt, float *const *param, float *const *grad,
                         const size_t *begin, float lr);
/* State buffers per tensor: SGD 1 (momentum; 0 for plain SGD), AdamW 2 (exp_avg, exp_avg_sq). */
size_t train_optim_nstate(const train_optim_t *opt);
/* Buffer k (< nstate) of every tensor: n pointers of counts[i] floats; NULL when k is out of
 * range. Writable: a checkpoint restores into them. */
float *const *train_optim_state_buf(train_optim_t *opt, size_t k);
/* Buffer 0 (SGD: the momentum buffers), NULL when the rule keeps none. */
float *const *train_optim_state(train_optim_t *opt);
/* All state as one block of nstate * sum(counts) floats, buffer by buffer, each in tensor
 * order (NULL without state). */
float *train_optim_state_block(train_optim_t *opt);
/* Bytes of state this optimizer holds (nstate * sum(counts) * 4). */
size_t train_optim_state_bytes(const train_optim_t *opt);
/* AdamW's step count (the bias correction's t; SGD counts too, unused). */
uint64_t train_optim_steps(const train_optim_t *opt);
void train_optim_set_steps(train_optim_t *opt, uint64_t steps);

/* torch.optim.SGD on one tensor (dampening 0, nesterov off): g += wd * p;
 * buf = momentum * buf + g; p -= lr * buf. buf starts at zero, which equals PyTorch's buf = g
 * on the first step. */
void train_sgd_step(float *p, const float *g, float *buf, size_t count, float lr, float momentum,
                    float wd);
/* torch.optim.AdamW (1.13's single-tensor path) on one tensor at step t (1 on the first):
 * p *= 1 - lr * wd; m = b1 * m + (1 - b1) g; v = b2 * v + (1 - b2) g^2;
 * p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps). */
void train_adamw_step(float *p, const float *g, float *m, float *v, size_t count, float lr,
                      float beta1, float beta2, float eps, float wd, uint64_t t);

#endif /* TRAIN_OPTIM_H */
