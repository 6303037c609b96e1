/* The training kit's optimizer (see train_optim.h): one table of operations per update rule. */
#include "train_optim.h"

#include <stdlib.h>
#include <string.h>

typedef struct train_optim_ops {
  void (*step)(train_optim_t *opt, float *const *param, float *const *grad, float lr);
} train_optim_ops_t;

struct train_optim {
  const train_optim_ops_t *ops;
  train_optim_opts_t o;
  size_t n;
  size_t *count;
  float *block;  /* state, sum(count) floats (NULL without state) */
  float **state; /* per-tensor views into block */
};

void train_sgd_step(float *p, const float *g, float *buf, size_t count, float lr, float momentum,
                    float wd) {
  for (size_t k = 0; k < count; k++) {
    float gk = g[k] + wd * p[k];
    buf[k] = momentum * buf[k] + gk;
    p[k] -= lr * buf[k];
  }
}

static void sgd_step(train_optim_t *opt, float *const *param, float *const *grad, float lr) {
  for (size_t i = 0; i < opt->n; i++) {
    if (opt->block) {
      train_sgd_step(param[i], grad[i], opt->state[i], opt->count[i], lr, opt->o.momentum, opt->o.wd);
    } else { /* plain SGD: p -= lr * g */
      float *p = param[i];
      const float *g = grad[i];
      for (size_t k = 0; k < opt->count[i]; k++) p[k] -= lr * g[k];
    }
  }
}

static const train_optim_ops_t sgd_ops = {.step = sgd_step};

int train_optim_opts_default(train_optim_opts_t *o) {
  if (!o) return -1;
  *o = (train_optim_opts_t){.kind = TRAIN_OPTIM_SGD, .momentum = 0.9f, .wd = 0.0f};
  return 0;
}

int train_optim_create(const train_optim_opts_t *o, const size_t *counts, size_t n,
                       train_optim_t **out) {
  if (!o || !counts || n == 0 || !out || o->kind != TRAIN_OPTIM_SGD || !(o->momentum >= 0.0f) ||
      !(o->wd >= 0.0f))
    return -1;
  train_optim_t *opt = calloc(1, sizeof *opt);
  if (!opt) return -1;
  opt->ops = &sgd_ops;
  opt->o = *o;
  opt->n = n;
  opt->count = malloc(sizeof(size_t) * n);
  size_t total = 0;
  for (size_t i = 0; i < n; i++) total += counts[i];
  int stateful = o->momentum != 0.0f || o->wd != 0.0f;
  if (stateful) {
    opt->block = calloc(total ? total : 1, sizeof(float));
    opt->state = malloc(sizeof(float *) * n);
  }
  if (!opt->count || (stateful && (!opt->block || !opt->state))) {
    train_optim_destroy(&opt);
    return -1;
  }
  for (size_t i = 0, off = 0; i < n; off += counts[i], i++) {
    opt->count[i] = counts[i];
    if (stateful) opt->state[i] = opt->block + off;
  }
  *out = opt;
  return 0;
}

void train_optim_destroy(train_optim_t **opt) {
  if (!opt || !*opt) return;
  free((*opt)->count);
  free((*opt)->block);
  free((*opt)->state);
  free(*opt);
  *opt = NULL;
}

void train_optim_step(train_optim_t *opt, float *const *param, float *const *grad, float lr) {
  opt->ops->step(opt, param, grad, lr);
}

float *const *train_optim_state(train_optim_t *opt) { return opt ? opt->state : NULL; }

float *train_optim_state_block(train_optim_t *opt) { return opt ? opt->block : NULL; }
