/* The training kit's optimizer (see train_optim.h): one table of operations per update rule. */
#include "train_optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct train_optim_ops {
  const char *name;
  /* State buffers per tensor for options o. */
  size_t (*nstate)(const train_optim_opts_t *o);
  /* Tensor i's update: p, g and its state buffers st[0 .. nstate-1], count elements. */
  void (*step)(const train_optim_t *opt, float *p, const float *g, float *const *st, size_t count,
               float lr);
} train_optim_ops_t;

struct train_optim {
  const train_optim_ops_t *ops;
  train_optim_opts_t o;
  size_t n, nstate, total;
  size_t *count;
  uint64_t steps;
  float *block;  /* state, nstate * total floats (NULL without state) */
  float **state; /* nstate * n views into block: state[k * n + i] */
};

void train_sgd_step(float *p, const float *g, float *buf, size_t count, float lr, float momentum,
                    float wd) {
  for (size_t k = 0; k < count; k++) {
    float gk = g[k] + wd * p[k];
    buf[k] = momentum * buf[k] + gk;
    p[k] -= lr * buf[k];
  }
}

void train_adamw_step(float *p, const float *g, float *m, float *v, size_t count, float lr,
                      float beta1, float beta2, float eps, float wd, uint64_t t) {
  /* PyTorch computes the scalars in double (Python floats) and applies them as f32. */
  const float decay = (float)(1.0 - (double)lr * (double)wd);
  const float b1 = beta1, c1 = (float)(1.0 - (double)beta1);
  const float b2 = beta2, c2 = (float)(1.0 - (double)beta2);
  const double bc1 = 1.0 - pow((double)beta1, (double)t), bc2 = 1.0 - pow((double)beta2, (double)t);
  const float step = (float)(-(double)lr / bc1), bc2s = (float)sqrt(bc2), e = eps;
  for (size_t k = 0; k < count; k++) {
    float pk = p[k] * decay, gk = g[k];
    m[k] = m[k] * b1 + gk * c1;
    v[k] = v[k] * b2 + gk * gk * c2;
    float denom = sqrtf(v[k]) / bc2s + e;
    p[k] = pk + step * m[k] / denom; /* (step * m) / denom, as torch's addcdiv kernel */
  }
}

static size_t sgd_nstate(const train_optim_opts_t *o) {
  return o->momentum != 0.0f || o->wd != 0.0f;
}

static void sgd_step(const train_optim_t *opt, float *p, const float *g, float *const *st,
                     size_t count, float lr) {
  if (opt->nstate) {
    train_sgd_step(p, g, st[0], count, lr, opt->o.momentum, opt->o.wd);
  } else { /* plain SGD: p -= lr * g */
    for (size_t k = 0; k < count; k++) p[k] -= lr * g[k];
  }
}

static size_t adamw_nstate(const train_optim_opts_t *o) {
  (void)o;
  return 2;
}

static void adamw_step(const train_optim_t *opt, float *p, const float *g, float *const *st,
                       size_t count, float lr) {
  train_adamw_step(p, g, st[0], st[1], count, lr, opt->o.beta1, opt->o.beta2, opt->o.eps,
                   opt->o.wd, opt->steps);
}

static const train_optim_ops_t optim_ops[] = {
    [TRAIN_OPTIM_SGD] = {.name = "sgd", .nstate = sgd_nstate, .step = sgd_step},
    [TRAIN_OPTIM_ADAMW] = {.name = "adamw", .nstate = adamw_nstate, .step = adamw_step},
};
#define NKINDS (sizeof optim_ops / sizeof optim_ops[0])

int train_optim_opts_default(train_optim_opts_t *o) {
  if (!o) return -1;
  *o = (train_optim_opts_t){.kind = TRAIN_OPTIM_SGD, .momentum = 0.9f, .wd = 0.0f,
                            .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
  return 0;
}

int train_optim_opts_adamw(train_optim_opts_t *o) {
  if (train_optim_opts_default(o) != 0) return -1;
  o->kind = TRAIN_OPTIM_ADAMW;
  o->momentum = 0.0f;
  o->wd = 0.01f;
  return 0;
}

const char *train_optim_name(train_optim_kind_t kind) {
  return (size_t)kind < NKINDS ? optim_ops[kind].name : NULL;
}

int train_optim_parse(const char *name, train_optim_kind_t *kind) {
  for (size_t k = 0; name && k < NKINDS; k++)
    if (strcmp(name, optim_ops[k].name) == 0) {
      *kind = (train_optim_kind_t)k;
      return 0;
    }
  return -1;
}

int train_optim_create(const train_optim_opts_t *o, const size_t *counts, size_t n,
                       train_optim_t **out) {
  if (!o || !counts || n == 0 || !out || (size_t)o->kind >= NKINDS || !(o->momentum >= 0.0f) ||
      !(o->wd >= 0.0f))
    return -1;
  if (o->kind == TRAIN_OPTIM_ADAMW && !(o->beta1 >= 0.0f && o->beta1 < 1.0f && o->beta2 >= 0.0f &&
                                        o->beta2 < 1.0f && o->eps > 0.0f))
    return -1;
  train_optim_t *opt = calloc(1, sizeof *opt);
  if (!opt) return -1;
  opt->ops = &optim_ops[o->kind];
  opt->o = *o;
  opt->n = n;
  opt->nstate = opt->ops->nstate(o);
  opt->count = malloc(sizeof(size_t) * n);
  size_t total = 0;
  for (size_t i = 0; i < n; i++) total += counts[i];
  opt->total = total;
  if (opt->nstate) {
    opt->block = calloc(opt->nstate * total > 0 ? opt->nstate * total : 1, sizeof(float));
    opt->state = malloc(sizeof(float *) * n * opt->nstate);
  }
  if (!opt->count || (opt->nstate && (!opt->block || !opt->state))) {
    train_optim_destroy(&opt);
    return -1;
  }
  for (size_t i = 0, off = 0; i < n; off += counts[i], i++) {
    opt->count[i] = counts[i];
    for (size_t k = 0; k < opt->nstate; k++) opt->state[k * n + i] = opt->block + k * total + off;
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

void train_optim_step_at(train_optim_t *opt, float *const *param, float *const *grad,
                         const size_t *begin, float lr) {
  float *st[2] = {NULL, NULL};
  opt->steps++;
  for (size_t i = 0; i < opt->n; i++) {
    size_t b = begin ? begin[i] : 0;
    if (!opt->count[i]) continue;
    for (size_t k = 0; k < opt->nstate; k++) st[k] = opt->state[k * opt->n + i];
    opt->ops->step(opt, param[i] + b, grad[i] + b, st, opt->count[i], lr);
  }
}

void train_optim_step(train_optim_t *opt, float *const *param, float *const *grad, float lr) {
  train_optim_step_at(opt, param, grad, NULL, lr);
}

size_t train_optim_nstate(const train_optim_t *opt) { return opt ? opt->nstate : 0; }

float *const *train_optim_state_buf(train_optim_t *opt, size_t k) {
  return opt && k < opt->nstate ? opt->state + k * opt->n : NULL;
}

float *const *train_optim_state(train_optim_t *opt) { return train_optim_state_buf(opt, 0); }

float *train_optim_state_block(train_optim_t *opt) { return opt ? opt->block : NULL; }

size_t train_optim_state_bytes(const train_optim_t *opt) {
  return opt ? opt->nstate * opt->total * sizeof(float) : 0;
}

uint64_t train_optim_steps(const train_optim_t *opt) { return opt ? opt->steps : 0; }

void train_optim_set_steps(train_optim_t *opt, uint64_t steps) {
  if (opt) opt->steps = steps;
}
