/* The training kit's optimizer behind a small interface, so another update rule (AdamW) can
 * join without touching its callers: create one over the model's tensor sizes, call step with
 * the parameters and their (averaged) gradients, read or restore its state (checkpoints, a
 * GPU copy) tensor by tensor. Definitions in train_optim.c.
 *
 *   train_optim_opts_t oo;
 *   train_optim_opts_default(&oo);               // SGD, momentum 0.9, weight decay 0
 *   oo.momentum = 0.9f; oo.wd = 5e-4f;
 *   train_optim_t *opt = NULL;
 *   if (train_optim_create(&oo, m.count, m.nparams, &opt) != 0) ...;
 *   train_optim_step(opt, m.param, m.grad, lr);  // every tensor
 *   train_optim_destroy(&opt);
 */
#ifndef TRAIN_OPTIM_H
#define TRAIN_OPTIM_H

#include <stddef.h>

typedef enum train_optim_kind {
  TRAIN_OPTIM_SGD = 0, /* torch.optim.SGD: momentum, weight decay, dampening 0, no nesterov */
} train_optim_kind_t;

typedef struct train_optim_opts {
  train_optim_kind_t kind;
  float momentum; /* SGD momentum (0: plain SGD, no state kept) */
  float wd;       /* weight decay, added to the gradient (PyTorch's SGD) */
} train_optim_opts_t;

typedef struct train_optim train_optim_t;

/* kind SGD, momentum 0.9, wd 0. Returns 0, -1 for a NULL o. */
int train_optim_opts_default(train_optim_opts_t *o);
/* An optimizer for n tensors of counts[i] elements; state (momentum buffers) starts at zero.
 * Returns 0, or -1 on bad arguments or out of memory (*out untouched). */
int train_optim_create(const train_optim_opts_t *o, const size_t *counts, size_t n,
                       train_optim_t **out);
/* Frees it and sets *opt = NULL; NULL and *opt == NULL are accepted. */
void train_optim_destroy(train_optim_t **opt);
/* One update of every tensor: param[i] from grad[i] with learning rate lr. */
void train_optim_step(train_optim_t *opt, float *const *param, float *const *grad, float lr);
/* The per-tensor state buffers (SGD: the momentum buffers, count[i] floats each), NULL when the
 * rule keeps none (momentum 0 and wd 0: plain SGD). Writable: a checkpoint restores into them. */
float *const *train_optim_state(train_optim_t *opt);
/* The same state as one block of sum(counts) floats in tensor order (NULL without state). */
float *train_optim_state_block(train_optim_t *opt);

/* torch.optim.SGD on one tensor (dampening 0, nesterov off): g += wd * p;
 * buf = momentum * buf + g; p -= lr * buf. buf starts at zero, which equals PyTorch's buf = g
 * on the first step. */
void train_sgd_step(float *p, const float *g, float *buf, size_t count, float lr, float momentum,
                    float wd);

#endif /* TRAIN_OPTIM_H */
