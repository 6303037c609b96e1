/* Header-only multilayer perceptron (f32, row-major, ReLU hidden layers, softmax cross-entropy)
 * with cblas_sgemm forward/backward, for ddp_bench, ddp_train and the reducer tests.
 *
 * Layers are given as a list of sizes, e.g. {784, 2048, 2048, 10}: layer l maps sizes[l] to
 * sizes[l+1] with W_l of shape (sizes[l+1], sizes[l]) (PyTorch's nn.Linear layout) and bias b_l.
 * Parameter tensors are numbered in forward order: W0 = 0, b0 = 1, W1 = 2, b1 = 3, ...
 *
 * Gradients are written into caller-chosen buffers (mlp_set_grad), so a DDP reducer's bucket
 * views can be the destination and no copy is needed before communication. The backward pass
 * goes from the last layer back and calls `on_grad_ready(param_index, ctx)` as soon as each
 * parameter's gradient is complete (bias first, then weight, per layer), which is what lets
 * communication of late layers overlap the backward pass of early ones.
 *
 * The loss is the mean over the batch, so averaging the gradients of k ranks with batch B each
 * equals the gradient of one process with the concatenated batch k*B.
 *
 * Usage:
 *   mlp_t m;  int sizes[] = {784, 256, 10};
 *   if (mlp_init(&m, sizes, 3, 64) != 0) ...;      // allocates params, own grads, work buffers
 *   mlp_init_params(&m, 42);                       // deterministic, seeded
 *   float loss = mlp_forward(&m, x, labels, batch);
 *   mlp_backward(&m, x, labels, batch, 0, cb, ctx); // 0 = overwrite grads, 1 = accumulate
 *   mlp_sgd(&m, 0.01f);
 *   mlp_free(&m);
 *
 * The caller must include <cblas.h> (OpenBLAS) reachable on the include path; apps link
 * OpenBLAS through apps/apps.cmake. */
#ifndef MLP_H
#define MLP_H

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef void (*mlp_grad_ready_fn)(size_t param_index, void *ctx);

typedef struct mlp {
  int nlayers;       /* linear layers (= number of sizes - 1) */
  int *sizes;        /* nlayers + 1 entries */
  int max_batch;     /* work buffers are sized for this many rows */
  size_t nparams;    /* parameter tensors: 2 * nlayers */
  size_t total;      /* scalar parameters in all tensors */
  float **param;     /* param[i]: tensor i (views into one owned block) */
  size_t *count;     /* count[i]: elements of tensor i */
  float **grad;      /* grad[i]: where backward writes tensor i's gradient (settable) */
  float *param_block, *grad_block; /* owned storage */
  float **act;       /* act[l], l = 1..nlayers: output of layer l-1 (post-ReLU if hidden) */
  float *delta[2];   /* back-propagated error, ping-pong, max_batch x max width */
  float grad_scale;  /* loss multiplier (default 1): 1/world with a reducer created with
                        predivided = 1 folds the average into the loss at no cost */
  /* Optional (NULL by default): called with begin = 1 before and 0 after each GEMM phase,
   * what = "fwd", "dW" or "dX" of layer `layer`, and "sgd" (layer -1), so that a program can
   * draw the compute on a timeline (ddp_bench puts it beside the library's events). */
  void (*trace)(void *ctx, int begin, const char *what, int layer);
  void *trace_ctx;
} mlp_t;

#define MLP_TRACE(m, begin, what, layer) \
  do {                                    \
    if ((m)->trace) (m)->trace((m)->trace_ctx, begin, what, layer); \
  } while (0)

/* Deterministic generator (splitmix64): identical streams on every platform. */
static inline uint64_t mlp_rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
/* Uniform in [-1, 1). */
static inline float mlp_rng_uniform(uint64_t *s) {
  return (float)((double)(mlp_rng_next(s) >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

static inline void mlp_free(mlp_t *m) {
  if (!m) return;
  if (m->act)
    for (int l = 1; l <= m->nlayers; l++) free(m->act[l]);
  free(m->act);
  free(m->delta[0]);
  free(m->delta[1]);
  free(m->param_block);
  free(m->grad_block);
  free(m->param);
  free(m->grad);
  free(m->count);
  free(m->sizes);
  memset(m, 0, sizeof *m);
}

/* Returns 0 on success, -1 on bad sizes or out of memory (m is left freed). */
static inline int mlp_init(mlp_t *m, const int *sizes, int nsizes, int max_batch) {
  memset(m, 0, sizeof *m);
  if (!sizes || nsizes < 2 || max_batch < 1) return -1;
  for (int i = 0; i < nsizes; i++)
    if (sizes[i] < 1) return -1;
  m->nlayers = nsizes - 1;
  m->max_batch = max_batch;
  m->grad_scale = 1.0f;
  m->nparams = (size_t)2 * (size_t)m->nlayers;
  m->sizes = malloc(sizeof(int) * (size_t)nsizes);
  m->param = calloc(m->nparams, sizeof(float *));
  m->grad = calloc(m->nparams, sizeof(float *));
  m->count = calloc(m->nparams, sizeof(size_t));
  m->act = calloc((size_t)nsizes, sizeof(float *));
  if (!m->sizes || !m->param || !m->grad || !m->count || !m->act) goto fail;
  memcpy(m->sizes, sizes, sizeof(int) * (size_t)nsizes);
  int width = 0;
  for (int l = 0; l < m->nlayers; l++) {
    m->count[2 * l] = (size_t)sizes[l + 1] * (size_t)sizes[l];
    m->count[2 * l + 1] = (size_t)sizes[l + 1];
    m->total += m->count[2 * l] + m->count[2 * l + 1];
  }
  for (int i = 0; i < nsizes; i++)
    if (sizes[i] > width) width = sizes[i];
  m->param_block = malloc(sizeof(float) * m->total);
  m->grad_block = calloc(m->total, sizeof(float));
  if (!m->param_block || !m->grad_block) goto fail;
  size_t off = 0;
  for (size_t i = 0; i < m->nparams; i++) {
    m->param[i] = m->param_block + off;
    m->grad[i] = m->grad_block + off;
    off += m->count[i];
  }
  for (int l = 1; l <= m->nlayers; l++) {
    m->act[l] = malloc(sizeof(float) * (size_t)max_batch * (size_t)sizes[l]);
    if (!m->act[l]) goto fail;
  }
  m->delta[0] = malloc(sizeof(float) * (size_t)max_batch * (size_t)width);
  m->delta[1] = malloc(sizeof(float) * (size_t)max_batch * (size_t)width);
  if (!m->delta[0] || !m->delta[1]) goto fail;
  return 0;
fail:
  mlp_free(m);
  return -1;
}

/* Points tensor i's gradient at `g` (count[i] floats), e.g. a reducer bucket view. NULL
 * restores the MLP's own gradient storage. */
static inline void mlp_set_grad(mlp_t *m, size_t i, float *g) {
  if (i >= m->nparams) return;
  if (g) {
    m->grad[i] = g;
  } else {
    size_t off = 0;
    for (size_t j = 0; j < i; j++) off += m->count[j];
    m->grad[i] = m->grad_block + off;
  }
}

/* PyTorch nn.Linear's default range: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for W and b,
 * drawn from one seeded stream in parameter order. */
static inline void mlp_init_params(mlp_t *m, uint64_t seed) {
  uint64_t s = seed * 0x2545F4914F6CDD1DULL + 1;
  for (int l = 0; l < m->nlayers; l++) {
    float bound = 1.0f / sqrtf((float)m->sizes[l]);
    for (int t = 0; t < 2; t++) {
      float *p = m->param[2 * l + t];
      for (size_t k = 0; k < m->count[2 * l + t]; k++) p[k] = bound * mlp_rng_uniform(&s);
    }
  }
}

/* Forward pass on `batch` rows of x (batch x sizes[0]); returns the mean softmax
 * cross-entropy against labels (values in 0 .. sizes[nlayers]-1). Leaves the activations
 * for mlp_backward and the logits in act[nlayers]. */
static inline float mlp_forward(mlp_t *m, const float *x, const int *labels, int batch) {
  const float *h = x;
  for (int l = 0; l < m->nlayers; l++) {
    int in = m->sizes[l], out = m->sizes[l + 1];
    float *z = m->act[l + 1];
    const float *b = m->param[2 * l + 1];
    MLP_TRACE(m, 1, "fwd", l);
    for (int r = 0; r < batch; r++) memcpy(z + (size_t)r * out, b, sizeof(float) * (size_t)out);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, out, in, 1.0f, h, in,
                m->param[2 * l], in, 1.0f, z, out);
    MLP_TRACE(m, 0, "fwd", l);
    if (l + 1 < m->nlayers) {
      size_t n = (size_t)batch * (size_t)out;
      for (size_t k = 0; k < n; k++) z[k] = z[k] > 0.0f ? z[k] : 0.0f;
    }
    h = z;
  }
  int classes = m->sizes[m->nlayers];
  double loss = 0.0;
  const float *logits = m->act[m->nlayers];
  for (int r = 0; r < batch; r++) {
    const float *zr = logits + (size_t)r * classes;
    float mx = zr[0];
    for (int c = 1; c < classes; c++) mx = zr[c] > mx ? zr[c] : mx;
    double sum = 0.0;
    for (int c = 0; c < classes; c++) sum += exp((double)(zr[c] - mx));
    loss += log(sum) + (double)mx - (double)zr[labels[r]];
  }
  return (float)(loss / batch);
}

/* Backward pass after mlp_forward with the same x, labels, batch. Writes (accumulate = 0) or
 * adds (accumulate = 1, gradient accumulation) each gradient into grad[i] and calls
 * on_grad_ready(i, ctx) (if not NULL) right after tensor i is complete: b_{L-1}, W_{L-1},
 * b_{L-2}, ... b_0, W_0. */
static inline void mlp_backward(mlp_t *m, const float *x, const int *labels, int batch,
                                int accumulate, mlp_grad_ready_fn on_grad_ready, void *ctx) {
  int L = m->nlayers, classes = m->sizes[L];
  float *delta = m->delta[0], *next = m->delta[1];
  const float *logits = m->act[L];
  /* d(mean CE)/d logits = (softmax - onehot) / batch */
  for (int r = 0; r < batch; r++) {
    const float *zr = logits + (size_t)r * classes;
    float *dr = delta + (size_t)r * classes;
    float mx = zr[0];
    for (int c = 1; c < classes; c++) mx = zr[c] > mx ? zr[c] : mx;
    float sum = 0.0f;
    for (int c = 0; c < classes; c++) sum += (dr[c] = expf(zr[c] - mx));
    float inv = m->grad_scale / (sum * (float)batch);
    for (int c = 0; c < classes; c++) dr[c] *= inv;
    dr[labels[r]] -= m->grad_scale / (float)batch;
  }
  float beta = accumulate ? 1.0f : 0.0f;
  for (int l = L - 1; l >= 0; l--) {
    int in = m->sizes[l], out = m->sizes[l + 1];
    const float *h = l ? m->act[l] : x;
    /* bias: column sums of delta */
    float *db = m->grad[2 * l + 1];
    if (!accumulate) memset(db, 0, sizeof(float) * (size_t)out);
    for (int r = 0; r < batch; r++) {
      const float *dr = delta + (size_t)r * out;
      for (int c = 0; c < out; c++) db[c] += dr[c];
    }
    if (on_grad_ready) on_grad_ready((size_t)(2 * l + 1), ctx);
    /* weight: dW = delta^T h  (out x in) */
    MLP_TRACE(m, 1, "dW", l);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, batch, 1.0f, delta, out, h, in,
                beta, m->grad[2 * l], in);
    MLP_TRACE(m, 0, "dW", l);
    if (on_grad_ready) on_grad_ready((size_t)(2 * l), ctx);
    if (l == 0) break;
    /* error into layer l's input: (delta W) masked by ReLU'(act[l]) */
    MLP_TRACE(m, 1, "dX", l);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, in, out, 1.0f, delta, out,
                m->param[2 * l], in, 0.0f, next, in);
    MLP_TRACE(m, 0, "dX", l);
    size_t n = (size_t)batch * (size_t)in;
    const float *a = m->act[l];
    for (size_t k = 0; k < n; k++)
      if (a[k] <= 0.0f) next[k] = 0.0f;
    float *t = delta;
    delta = next;
    next = t;
  }
}

/* Plain SGD: param[i] -= lr * grad[i] for every tensor. */
static inline void mlp_sgd(mlp_t *m, float lr) {
  MLP_TRACE(m, 1, "sgd", -1);
  for (size_t i = 0; i < m->nparams; i++) {
    float *p = m->param[i];
    const float *g = m->grad[i];
    for (size_t k = 0; k < m->count[i]; k++) p[k] -= lr * g[k];
  }
  MLP_TRACE(m, 0, "sgd", -1);
}

/* Deterministic synthetic sample `index` of a dataset: inputs uniform in [-1, 1) and a label,
 * both a pure function of (seed, index), so any rank can produce any slice of a global batch. */
static inline void mlp_synth_sample(uint64_t seed, uint64_t index, int features, int classes,
                                    float *x, int *label) {
  uint64_t s = seed ^ (index * 0xD1B54A32D192ED03ULL + 0x632BE59BD9B4E019ULL);
  for (int f = 0; f < features; f++) x[f] = mlp_rng_uniform(&s);
  *label = (int)(mlp_rng_next(&s) % (uint64_t)classes);
}

#endif /* MLP_H */
