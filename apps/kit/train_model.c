/* The training kit's model (see train_model.h). */
#include "train_model.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cnn.h"

#define TM_TRACE(m, begin, what, layer) \
  do {                                    \
    if ((m)->trace) (m)->trace((m)->trace_ctx, begin, what, layer); \
  } while (0)

uint64_t train_rng_seed(uint64_t seed) { return seed * 0x2545F4914F6CDD1DULL + 1; }

void tm_free(train_model_t *m) {
  if (!m) return;
  for (int l = 0; l < m->nlayers; l++) {
    tm_layer_t *L = &m->layer[l];
    if (!m->checkpoint || L->boundary) free(L->out);
    if (!m->checkpoint) {
      free(L->col);
      free(L->arg);
    }
  }
  free(m->arena);
  free(m->delta[0]);
  free(m->delta[1]);
  free(m->dcol);
  free(m->param_block);
  free(m->grad_block);
  free(m->wlow_block);
  free(m->xlow);
  memset(m, 0, sizeof *m);
}

/* Bytes a layer keeps for backward: output, im2col columns, pooling argmax. */
static size_t tm__layer_bytes(const tm_layer_t *L, size_t batch, int with_out) {
  size_t b = 0;
  if (with_out) b += L->out_elems * sizeof(float);
  b += L->col_elems * sizeof(float);
  if (L->kind == TM_POOL) b += L->out_elems * sizeof(int32_t);
  return b * batch;
}

static tm_layer_t tm__dense(int in, int out, int relu, int block) {
  return (tm_layer_t){.kind = TM_DENSE, .relu = relu, .c = in, .h = 1, .w = 1, .oc = out,
                      .oh = 1, .ow = 1, .block = block};
}

static tm_layer_t tm__conv(int ci, int hw, int co, int k, int block) {
  return (tm_layer_t){.kind = TM_CONV, .relu = 1, .c = ci, .h = hw, .w = hw, .oc = co,
                      .oh = hw - k + 1, .ow = hw - k + 1, .k = k, .block = block};
}

static tm_layer_t tm__pool(int ci, int hw, int block) {
  return (tm_layer_t){.kind = TM_POOL, .c = ci, .h = hw, .w = hw, .oc = ci, .oh = hw / 2,
                      .ow = hw / 2, .block = block};
}

/* Shapes, parameters, activation memory and buffers of the layers m->layer[0 .. nl-1] (kind,
 * shapes and blocks set by the caller). */
static int tm__build(train_model_t *m, int nl, int max_batch, int checkpoint, char *err,
                     size_t errlen) {
  tm_layer_t *L = m->layer;
  m->nlayers = nl;
  m->max_batch = max_batch;
  m->loss_scale = 1.0f;
  m->checkpoint = checkpoint;
  size_t maxw = 0, maxcol = 0;
  for (int l = 0; l < nl; l++) {
    tm_layer_t *y = &L[l];
    y->in_elems = (size_t)y->c * (size_t)y->h * (size_t)y->w;
    y->out_elems = (size_t)y->oc * (size_t)y->oh * (size_t)y->ow;
    y->col_elems = y->kind == TM_CONV ? (size_t)y->c * (size_t)y->k * (size_t)y->k * (size_t)y->oh * (size_t)y->ow : 0;
    y->boundary = l == nl - 1 || L[l + 1].block != y->block;
    if (y->in_elems > maxw) maxw = y->in_elems;
    if (y->out_elems > maxw) maxw = y->out_elems;
    if (y->col_elems > maxcol) maxcol = y->col_elems;
    y->wi = -1;
    if (y->kind != TM_POOL) {
      y->wi = (int)m->nparams;
      size_t fan_in = y->kind == TM_DENSE ? (size_t)y->c : (size_t)y->c * (size_t)y->k * (size_t)y->k;
      m->count[m->nparams] = (size_t)y->oc * fan_in;
      snprintf(m->pname[m->nparams], sizeof m->pname[0], "%s%d.weight", y->kind == TM_DENSE ? "fc" : "conv", l);
      m->count[m->nparams + 1] = (size_t)y->oc;
      snprintf(m->pname[m->nparams + 1], sizeof m->pname[0], "%s%d.bias", y->kind == TM_DENSE ? "fc" : "conv", l);
      m->nparams += 2;
    }
  }
  m->in_elems = L[0].in_elems;
  m->classes = (int)L[nl - 1].out_elems;
  /* Activation memory of both modes, from the shapes; the mode in use is also allocated. */
  size_t B = (size_t)max_batch, arena = 0, blk_bytes = 0;
  for (int l = 0; l < nl; l++) {
    m->act_bytes_full += tm__layer_bytes(&L[l], B, 1);
    m->act_bytes_ckpt += L[l].boundary ? L[l].out_elems * sizeof(float) * B : 0;
    blk_bytes += tm__layer_bytes(&L[l], B, !L[l].boundary);
    if (L[l].boundary) {
      if (blk_bytes > arena) arena = blk_bytes;
      blk_bytes = 0;
    }
  }
  m->act_bytes_ckpt += arena;
  m->act_bytes = checkpoint ? m->act_bytes_ckpt : m->act_bytes_full;

  for (size_t i = 0; i < m->nparams; i++) m->total += m->count[i];
  m->param_block = malloc(sizeof(float) * m->total);
  m->grad_block = calloc(m->total, sizeof(float));
  m->delta[0] = malloc(sizeof(float) * B * maxw);
  m->delta[1] = malloc(sizeof(float) * B * maxw);
  m->dcol = malloc(sizeof(float) * (maxcol ? maxcol : 1));
  int bad = !m->param_block || !m->grad_block || !m->delta[0] || !m->delta[1] || !m->dcol;
  size_t off = 0;
  for (size_t i = 0; i < m->nparams; i++) {
    m->param[i] = m->param_block ? m->param_block + off : NULL;
    m->grad[i] = m->grad_block ? m->grad_block + off : NULL;
    off += m->count[i];
  }
  if (checkpoint && !bad) {
    m->arena = malloc(arena ? arena : 1);
    bad = !m->arena;
  }
  /* In checkpoint mode every non-boundary buffer of a block lives in the shared arena (one
   * block's worth), so recomputing block j overwrites block j+1's scratch, never a kept
   * boundary output. */
  char *cursor = (char *)m->arena;
  for (int l = 0; l < nl && !bad; l++) {
    tm_layer_t *y = &L[l];
    if (!checkpoint) {
      y->out = malloc(sizeof(float) * B * y->out_elems);
      if (y->col_elems) y->col = malloc(sizeof(float) * B * y->col_elems);
      if (y->kind == TM_POOL) y->arg = malloc(sizeof(int32_t) * B * y->out_elems);
      bad = !y->out || (y->col_elems && !y->col) || (y->kind == TM_POOL && !y->arg);
      continue;
    }
    if (y->boundary) {
      y->out = malloc(sizeof(float) * B * y->out_elems);
      bad = !y->out;
    } else {
      y->out = (float *)cursor;
      cursor += sizeof(float) * B * y->out_elems;
    }
    if (y->col_elems) {
      y->col = (float *)cursor;
      cursor += sizeof(float) * B * y->col_elems;
    }
    if (y->kind == TM_POOL) {
      y->arg = (int32_t *)cursor;
      cursor += sizeof(int32_t) * B * y->out_elems;
    }
    if (y->boundary) cursor = (char *)m->arena;
  }
  if (bad) {
    tm_free(m);
    snprintf(err, errlen, "out of memory building the model for batch %d", max_batch);
    return -1;
  }
  return 0;
}

int tm_create_mlp(train_model_t *m, const int *sizes, int nsizes, const int *blocks, int max_batch,
                  int checkpoint, char *err, size_t errlen) {
  memset(m, 0, sizeof *m);
  if (!sizes || nsizes < 2 || nsizes > TM_MAX_LAYERS + 1 || max_batch < 1) {
    snprintf(err, errlen, "bad MLP arguments: %d sizes (2 .. %d), max_batch %d", nsizes,
             TM_MAX_LAYERS + 1, max_batch);
    return -1;
  }
  snprintf(m->name, sizeof m->name, "mlp");
  int len = snprintf(m->desc, sizeof m->desc, "MLP");
  for (int i = 0; i < nsizes; i++) {
    if (sizes[i] < 1) {
      snprintf(err, errlen, "bad MLP layer size %d (sizes[%d])", sizes[i], i);
      return -1;
    }
    if (len >= 0 && (size_t)len < sizeof m->desc)
      len += snprintf(m->desc + len, sizeof m->desc - (size_t)len, "%c%d", i ? '-' : ' ', sizes[i]);
  }
  for (int l = 0; l + 1 < nsizes; l++)
    m->layer[l] = tm__dense(sizes[l], sizes[l + 1], l + 2 < nsizes, blocks ? blocks[l] : l);
  return tm__build(m, nsizes - 1, max_batch, checkpoint, err, errlen);
}

int tm_create(train_model_t *m, const char *kind, int max_batch, int classes, int checkpoint,
              char *err, size_t errlen) {
  memset(m, 0, sizeof *m);
  if (max_batch < 1 || classes < 2) {
    snprintf(err, errlen, "bad model arguments: max_batch %d, classes %d", max_batch, classes);
    return -1;
  }
  if (strcmp(kind, "mlp") == 0) {
    const int sizes[] = {784, 512, 256, classes}, blocks[] = {0, 0, 1};
    return tm_create_mlp(m, sizes, 4, blocks, max_batch, checkpoint, err, errlen);
  }
  if (strcmp(kind, "cnn") != 0) {
    snprintf(err, errlen, "unknown model '%s' (expected mlp or cnn)", kind);
    return -1;
  }
  tm_layer_t *L = m->layer;
  L[0] = tm__conv(1, 28, 16, 5, 0);
  L[1] = tm__pool(16, 24, 0);
  L[2] = tm__conv(16, 12, 32, 5, 1);
  L[3] = tm__pool(32, 8, 1);
  L[4] = tm__dense(32 * 4 * 4, classes, 0, 2);
  snprintf(m->name, sizeof m->name, "cnn");
  snprintf(m->desc, sizeof m->desc, "CNN conv5x5(16)-pool-conv5x5(32)-pool-fc%d", classes);
  return tm__build(m, 5, max_batch, checkpoint, err, errlen);
}

int tm_set_amp(train_model_t *m, train_amp_t amp) {
  m->amp = amp;
  if (amp == TRAIN_AMP_NONE || m->wlow_block) return 0;
  m->wlow_block = malloc(sizeof(float) * m->total);
  m->xlow = malloc(sizeof(float) * (size_t)m->max_batch * m->in_elems);
  if (!m->wlow_block || !m->xlow) {
    m->amp = TRAIN_AMP_NONE;
    return -1;
  }
  for (size_t i = 0, off = 0; i < m->nparams; off += m->count[i], i++) m->wlow[i] = m->wlow_block + off;
  return 0;
}

void tm_set_grad(train_model_t *m, size_t i, float *g) {
  if (i >= m->nparams) return;
  if (g) {
    m->grad[i] = g;
    return;
  }
  size_t off = 0;
  for (size_t j = 0; j < i; j++) off += m->count[j];
  m->grad[i] = m->grad_block + off;
}

void tm_set_grads(train_model_t *m, void *const *g) {
  for (size_t i = 0; i < m->nparams; i++) tm_set_grad(m, i, g ? (float *)g[i] : NULL);
}

void tm_init_params(train_model_t *m, uint64_t *rng) {
  uint64_t s = *rng;
  for (int l = 0; l < m->nlayers; l++) {
    const tm_layer_t *y = &m->layer[l];
    if (y->wi < 0) continue;
    float bound = 1.0f / sqrtf((float)(m->count[y->wi] / (size_t)y->oc));
    for (int t = 0; t < 2; t++) {
      float *p = m->param[y->wi + t];
      for (size_t k = 0; k < m->count[y->wi + t]; k++) p[k] = bound * train_rng_uniform(&s);
    }
  }
  *rng = s;
}

static void tm__relu(float *z, size_t n) {
  for (size_t k = 0; k < n; k++) z[k] = z[k] > 0.0f ? z[k] : 0.0f;
}

/* The weights the GEMMs use: the master copy, or its rounded image under mixed precision. */
static const float *tm__w(const train_model_t *m, int i) {
  return m->amp ? m->wlow[i] : m->param[i];
}

static void tm__layer_forward(train_model_t *m, tm_layer_t *y, int l, const float *in, int batch) {
  size_t B = (size_t)batch;
  if (y->kind == TM_DENSE) {
    const float *W = tm__w(m, y->wi), *b = tm__w(m, y->wi + 1);
    TM_TRACE(m, 1, "fwd", l);
    for (size_t r = 0; r < B; r++) memcpy(y->out + r * (size_t)y->oc, b, sizeof(float) * (size_t)y->oc);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, y->oc, y->c, 1.0f, in, y->c, W,
                y->c, 1.0f, y->out, y->oc);
    TM_TRACE(m, 0, "fwd", l);
  } else if (y->kind == TM_CONV) {
    const float *W = tm__w(m, y->wi), *b = tm__w(m, y->wi + 1);
    int K = y->c * y->k * y->k, P = y->oh * y->ow;
    for (size_t n = 0; n < B; n++) {
      float *col = y->col + n * y->col_elems, *out = y->out + n * y->out_elems;
      cnn_im2col(in + n * y->in_elems, y->c, y->h, y->w, y->k, col);
      for (int co = 0; co < y->oc; co++)
        for (int p = 0; p < P; p++) out[(size_t)co * (size_t)P + (size_t)p] = b[co];
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, y->oc, P, K, 1.0f, W, K, col, P,
                  1.0f, out, P);
    }
  } else {
    for (size_t n = 0; n < B; n++)
      cnn_maxpool2(in + n * y->in_elems, y->c, y->h, y->w, y->out + n * y->out_elems,
                   y->arg + n * y->out_elems);
  }
  if (y->relu) tm__relu(y->out, B * y->out_elems);
  if (m->amp && y->kind != TM_POOL) train_round(y->out, B * y->out_elems, m->amp);
}

/* Layer l's input; layer 0 reads the batch (its rounded copy under mixed precision). */
static const float *tm__input(const train_model_t *m, int l, const float *x) {
  return l ? m->layer[l - 1].out : m->amp ? m->xlow : x;
}

double tm_forward(train_model_t *m, const float *x, const int32_t *labels, int batch) {
  if (m->amp) {
    memcpy(m->wlow_block, m->param_block, sizeof(float) * m->total);
    train_round(m->wlow_block, m->total, m->amp);
    memcpy(m->xlow, x, sizeof(float) * (size_t)batch * m->in_elems);
    train_round(m->xlow, (size_t)batch * m->in_elems, m->amp);
  }
  for (int l = 0; l < m->nlayers; l++) tm__layer_forward(m, &m->layer[l], l, tm__input(m, l, x), batch);
  if (!labels) return 0.0;
  const float *logits = m->layer[m->nlayers - 1].out;
  int C = m->classes;
  double loss = 0.0;
  for (int r = 0; r < batch; r++) {
    const float *z = logits + (size_t)r * (size_t)C;
    float mx = z[0];
    for (int c = 1; c < C; c++) mx = z[c] > mx ? z[c] : mx;
    double sum = 0.0;
    for (int c = 0; c < C; c++) sum += exp((double)(z[c] - mx));
    loss += log(sum) + (double)mx - (double)z[labels[r]];
  }
  return loss / batch;
}

const float *tm_logits(const train_model_t *m) { return m->layer[m->nlayers - 1].out; }

/* Backward of one layer: dout (batch x out_elems, modified in place by the ReLU mask) ->
 * parameter gradients (+ callbacks) and, unless din is NULL, din (batch x in_elems). */
static void tm__layer_backward(train_model_t *m, tm_layer_t *y, int l, const float *in, float *dout,
                               float *din, int batch, int accumulate, tm_grad_ready_fn ready,
                               void *ctx) {
  size_t B = (size_t)batch;
  if (y->relu) {
    size_t n = B * y->out_elems;
    for (size_t k = 0; k < n; k++)
      if (y->out[k] <= 0.0f) dout[k] = 0.0f;
  }
  if (y->kind == TM_POOL) {
    if (din)
      for (size_t n = 0; n < B; n++)
        cnn_maxpool2_backward(dout + n * y->out_elems, y->arg + n * y->out_elems, y->out_elems,
                              y->in_elems, din + n * y->in_elems);
    return;
  }
  float *dW = m->grad[y->wi], *db = m->grad[y->wi + 1];
  const float *W = tm__w(m, y->wi);
  if (!accumulate) memset(db, 0, sizeof(float) * (size_t)y->oc);
  if (y->kind == TM_DENSE) {
    for (size_t r = 0; r < B; r++) {
      const float *d = dout + r * (size_t)y->oc;
      for (int c = 0; c < y->oc; c++) db[c] += d[c];
    }
    if (ready) ready((size_t)y->wi + 1, ctx);
    TM_TRACE(m, 1, "dW", l);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, y->oc, y->c, batch, 1.0f, dout, y->oc, in,
                y->c, accumulate ? 1.0f : 0.0f, dW, y->c);
    TM_TRACE(m, 0, "dW", l);
    if (ready) ready((size_t)y->wi, ctx);
    if (din) {
      TM_TRACE(m, 1, "dX", l);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, y->c, y->oc, 1.0f, dout, y->oc,
                  W, y->c, 0.0f, din, y->c);
      TM_TRACE(m, 0, "dX", l);
      if (m->amp) train_round(din, B * y->in_elems, m->amp);
    }
    return;
  }
  int K = y->c * y->k * y->k, P = y->oh * y->ow;
  for (size_t n = 0; n < B; n++) {
    const float *d = dout + n * y->out_elems;
    for (int co = 0; co < y->oc; co++) {
      float s = 0.0f;
      for (int p = 0; p < P; p++) s += d[(size_t)co * (size_t)P + (size_t)p];
      db[co] += s;
    }
  }
  if (ready) ready((size_t)y->wi + 1, ctx);
  for (size_t n = 0; n < B; n++)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, y->oc, K, P, 1.0f, dout + n * y->out_elems,
                P, y->col + n * y->col_elems, P, n || accumulate ? 1.0f : 0.0f, dW, K);
  if (ready) ready((size_t)y->wi, ctx);
  if (din)
    for (size_t n = 0; n < B; n++) {
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, P, y->oc, 1.0f, W, K,
                  dout + n * y->out_elems, P, 0.0f, m->dcol, P);
      cnn_col2im(m->dcol, y->c, y->h, y->w, y->k, din + n * y->in_elems);
      if (m->amp) train_round(din + n * y->in_elems, y->in_elems, m->amp);
    }
}

void tm_backward(train_model_t *m, const float *x, const int32_t *labels, int batch, int accumulate,
                 tm_grad_ready_fn ready, void *ctx) {
  int C = m->classes, nl = m->nlayers;
  float *delta = m->delta[0], *next = m->delta[1];
  const float *logits = tm_logits(m);
  /* d(mean CE)/d logits = (softmax - onehot) / batch, times the loss scale */
  for (int r = 0; r < batch; r++) {
    const float *z = logits + (size_t)r * (size_t)C;
    float *d = delta + (size_t)r * (size_t)C;
    float mx = z[0];
    for (int c = 1; c < C; c++) mx = z[c] > mx ? z[c] : mx;
    float sum = 0.0f;
    for (int c = 0; c < C; c++) sum += (d[c] = expf(z[c] - mx));
    float inv = 1.0f / (sum * (float)batch);
    for (int c = 0; c < C; c++) d[c] *= inv;
    d[labels[r]] -= 1.0f / (float)batch;
    if (m->loss_scale != 1.0f)
      for (int c = 0; c < C; c++) d[c] *= m->loss_scale;
    if (m->amp) train_round(d, (size_t)C, m->amp);
  }
  int l = nl - 1;
  while (l >= 0) {
    int first = l;
    while (first > 0 && m->layer[first - 1].block == m->layer[l].block) first--;
    if (m->checkpoint)
      for (int j = first; j <= l; j++) tm__layer_forward(m, &m->layer[j], j, tm__input(m, j, x), batch);
    for (int j = l; j >= first; j--) {
      tm__layer_backward(m, &m->layer[j], j, tm__input(m, j, x), delta, j ? next : NULL, batch,
                         accumulate, ready, ctx);
      float *t = delta;
      delta = next;
      next = t;
    }
    l = first - 1;
  }
}

size_t tm_count_correct(train_model_t *m, const float *x, const int32_t *labels, int batch) {
  tm_forward(m, x, NULL, batch);
  const float *logits = tm_logits(m);
  size_t correct = 0;
  for (int r = 0; r < batch; r++) {
    const float *z = logits + (size_t)r * (size_t)m->classes;
    int best = 0;
    for (int c = 1; c < m->classes; c++)
      if (z[c] > z[best]) best = c;
    correct += best == labels[r];
  }
  return correct;
}
