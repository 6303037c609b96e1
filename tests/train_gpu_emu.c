/* Host stand-in for apps/kit/train_gpu.cu (the tg_* API) so that ddp_train's GPU wiring
 * (gradients written into the reducer's device bucket views, grad_ready per parameter, the fp16
 * unscale + ddp_device_nonfinite_async check, SGD on the "device", downloads for evaluation and
 * checkpoints, momentum upload on resume) runs under the emulated device, where "device"
 * memory is host memory (tests/train_gpu.cmake builds ddp_train_gpuemu with it).
 *
 * It mirrors the CUDA file operation for operation: the same row-major -> column-major GEMM
 * mapping (cblas ColMajor standing in for cuBLAS), f16/bf16 operand images as rounded f32,
 * and the kernels as loops. Every call finishes its work before returning, so the emulated
 * stream only ever sees finished data (the reducer queues its reads after grad_ready). */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_gpu.h"
#include "train_optim.h"
#include "train_util.h"

struct tg_model {
  int nlayers, max_batch, amp, maxw, batch;
  int sizes[TG_MAX_LAYERS + 1], relu[TG_MAX_LAYERS];
  size_t nparams, count[2 * TG_MAX_LAYERS];
  float *param[2 * TG_MAX_LAYERS], *mom[2 * TG_MAX_LAYERS];
  float *x, *act[TG_MAX_LAYERS], *delta[2], *wlow[TG_MAX_LAYERS];
  double *rowloss;
};

static int fail(char *err, size_t errlen, const char *msg) {
  if (err && errlen) snprintf(err, errlen, "%s", msg);
  return -1;
}

static float rnd(float v, int amp) {
  return amp == 1 ? train_round_fp16(v) : amp == 2 ? train_round_bf16(v) : v;
}

static void gemm(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B,
                 int ldb, float beta, float *C, int ldc) {
  cblas_sgemm(CblasColMajor, tb ? CblasTrans : CblasNoTrans, ta ? CblasTrans : CblasNoTrans, N, M,
              K, 1.0f, B, ldb, A, lda, beta, C, ldc);
}

void tg_destroy(tg_model_t *g) {
  if (!g) return;
  for (size_t i = 0; i < g->nparams; i++) free(g->mom[i]);
  for (int l = 0; l < g->nlayers; l++) free(g->act[l]), free(g->wlow[l]);
  free(g->x), free(g->delta[0]), free(g->delta[1]), free(g->rowloss);
  free(g);
}

const char *tg_describe(const tg_model_t *g) {
  return g && g->amp ? "host stand-in of the GPU model (rounded operands)"
                     : "host stand-in of the GPU model (f32)";
}

int tg_create(tg_model_t **out, int nlayers, const int *sizes, const int *relu, int max_batch,
              int amp, void *stream, void *const *dev_param, char *err, size_t errlen) {
  (void)stream;
  if (!out || nlayers < 1 || nlayers > TG_MAX_LAYERS || !sizes || !relu || !dev_param ||
      max_batch < 1 || amp < 0 || amp > 2)
    return fail(err, errlen, "tg_create: bad arguments");
  tg_model_t *g = calloc(1, sizeof *g);
  if (!g) return fail(err, errlen, "tg_create: out of memory");
  g->nlayers = nlayers, g->max_batch = max_batch, g->amp = amp;
  g->nparams = (size_t)2 * (size_t)nlayers;
  for (int l = 0; l <= nlayers; l++) {
    g->sizes[l] = sizes[l];
    if (sizes[l] > g->maxw) g->maxw = sizes[l];
  }
  size_t B = (size_t)max_batch;
  int bad = 0;
  for (int l = 0; l < nlayers; l++) {
    g->relu[l] = relu[l] != 0;
    g->count[2 * l] = (size_t)sizes[l + 1] * (size_t)sizes[l];
    g->count[2 * l + 1] = (size_t)sizes[l + 1];
    for (int t = 0; t < 2; t++) {
      g->param[2 * l + t] = dev_param[2 * l + t];
      g->mom[2 * l + t] = calloc(g->count[2 * l + t], sizeof(float));
      bad |= !g->mom[2 * l + t];
    }
    g->act[l] = malloc(sizeof(float) * B * (size_t)sizes[l + 1]);
    g->wlow[l] = malloc(sizeof(float) * g->count[2 * l]);
    bad |= !g->act[l] || !g->wlow[l];
  }
  g->x = malloc(sizeof(float) * B * (size_t)sizes[0]);
  g->delta[0] = malloc(sizeof(float) * B * (size_t)g->maxw);
  g->delta[1] = malloc(sizeof(float) * B * (size_t)g->maxw);
  g->rowloss = malloc(sizeof(double) * B);
  if (bad || !g->x || !g->delta[0] || !g->delta[1] || !g->rowloss) {
    tg_destroy(g);
    return fail(err, errlen, "tg_create: out of memory");
  }
  *out = g;
  return 0;
}

int tg_upload(tg_model_t *g, const float *const *param, const float *const *mom, char *err,
              size_t errlen) {
  if (!g) return fail(err, errlen, "tg_upload: NULL");
  for (size_t i = 0; i < g->nparams; i++) {
    if (param) memcpy(g->param[i], param[i], sizeof(float) * g->count[i]);
    if (mom) memcpy(g->mom[i], mom[i], sizeof(float) * g->count[i]);
  }
  return 0;
}

int tg_download(tg_model_t *g, float *const *param, float *const *mom, char *err, size_t errlen) {
  if (!g) return fail(err, errlen, "tg_download: NULL");
  for (size_t i = 0; i < g->nparams; i++) {
    if (param) memcpy(param[i], g->param[i], sizeof(float) * g->count[i]);
    if (mom) memcpy(mom[i], g->mom[i], sizeof(float) * g->count[i]);
  }
  return 0;
}

int tg_forward_backward(tg_model_t *g, const float *x, const int32_t *y, int batch,
                        float loss_scale, void *const *grad, tg_grad_ready_fn ready, void *ctx,
                        char *err, size_t errlen) {
  if (!g || !x || !y || !grad || batch < 1 || batch > g->max_batch)
    return fail(err, errlen, "tg_forward_backward: bad arguments");
  const int L = g->nlayers, amp = g->amp;
  const size_t B = (size_t)batch;
  g->batch = batch;
  size_t nx = B * (size_t)g->sizes[0];
  for (size_t k = 0; k < nx; k++) g->x[k] = rnd(x[k], amp);
  for (int l = 0; l < L; l++) {
    const float *W = g->param[2 * l];
    for (size_t k = 0; k < g->count[2 * l]; k++) g->wlow[l][k] = rnd(W[k], amp);
  }
  for (int l = 0; l < L; l++) {
    int in = g->sizes[l], out = g->sizes[l + 1];
    const float *h = l ? g->act[l - 1] : g->x, *b = g->param[2 * l + 1];
    float *z = g->act[l];
    for (size_t k = 0; k < B * (size_t)out; k++) z[k] = rnd(b[k % (size_t)out], amp);
    gemm(0, 1, batch, out, in, h, in, g->wlow[l], in, 1.0f, z, out);
    for (size_t k = 0; k < B * (size_t)out; k++) {
      float v = z[k];
      if (g->relu[l]) v = v > 0.0f ? v : 0.0f;
      z[k] = rnd(v, amp);
    }
  }
  int C = g->sizes[L], cur = 0;
  for (int r = 0; r < batch; r++) {
    const float *z = g->act[L - 1] + (size_t)r * (size_t)C;
    float *d = g->delta[0] + (size_t)r * (size_t)C;
    int lab = y[r];
    float mx = z[0];
    for (int c = 1; c < C; c++) mx = z[c] > mx ? z[c] : mx;
    double sum64 = 0.0;
    for (int c = 0; c < C; c++) sum64 += exp((double)(z[c] - mx));
    g->rowloss[r] = (lab >= 0 && lab < C) ? log(sum64) + (double)mx - (double)z[lab] : NAN;
    float sum = 0.0f;
    for (int c = 0; c < C; c++) sum += (d[c] = expf(z[c] - mx));
    float inv = 1.0f / (sum * (float)batch);
    for (int c = 0; c < C; c++) d[c] *= inv;
    if (lab >= 0 && lab < C) d[lab] -= 1.0f / (float)batch;
    for (int c = 0; c < C; c++) {
      float v = d[c];
      if (loss_scale != 1.0f) v *= loss_scale;
      d[c] = rnd(v, amp);
    }
  }
  for (int l = L - 1; l >= 0; l--) {
    int in = g->sizes[l], out = g->sizes[l + 1];
    const float *dout = g->delta[cur], *h = l ? g->act[l - 1] : g->x;
    float *db = grad[2 * l + 1];
    for (int c = 0; c < out; c++) {
      float s = 0.0f;
      for (int r = 0; r < batch; r++) s += dout[(size_t)r * (size_t)out + (size_t)c];
      db[c] = s;
    }
    if (ready) ready((size_t)(2 * l + 1), ctx);
    gemm(1, 0, out, in, batch, dout, out, h, in, 0.0f, grad[2 * l], in);
    if (ready) ready((size_t)(2 * l), ctx);
    if (l == 0) break;
    int nxt = cur ^ 1;
    gemm(0, 0, batch, in, out, dout, out, g->wlow[l], in, 0.0f, g->delta[nxt], in);
    const float *a = g->act[l - 1];
    float *din = g->delta[nxt];
    for (size_t k = 0; k < B * (size_t)in; k++) {
      float v = rnd(din[k], amp);
      if (g->relu[l - 1] && a[k] <= 0.0f) v = 0.0f;
      din[k] = v;
    }
    cur = nxt;
  }
  return 0;
}

int tg_unscale(tg_model_t *g, void *const *grad, float inv, char *err, size_t errlen) {
  if (!g || !grad) return fail(err, errlen, "tg_unscale: NULL");
  for (size_t i = 0; i < g->nparams; i++) {
    float *p = grad[i];
    for (size_t k = 0; k < g->count[i]; k++) p[k] *= inv;
  }
  return 0;
}

int tg_finish_step(tg_model_t *g, void *const *grad, int take_step, float lr, float momentum,
                   float wd, double *loss, char *err, size_t errlen) {
  if (!g || !grad || !loss) return fail(err, errlen, "tg_finish_step: NULL");
  if (take_step)
    for (size_t i = 0; i < g->nparams; i++)
      train_sgd_step(g->param[i], grad[i], g->mom[i], g->count[i], lr, momentum, wd);
  double sum = 0.0;
  for (int r = 0; r < g->batch; r++) sum += g->rowloss[r];
  *loss = g->batch ? sum / g->batch : 0.0;
  return 0;
}
