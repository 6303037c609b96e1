/* ddp_train's MLP on a CUDA device: cuBLAS GEMMs and small kernels on one stream. See
 * train_gpu.h for the contract; the arithmetic mirrors train_model.h (dense layers) step for
 * step so that a GPU run follows the host run within f32 rounding. */
#include "train_gpu.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tg_model {
  int device;                      /* the CUDA device current at creation (the communicator's) */
  int nlayers, max_batch, amp, maxw;
  int sizes[TG_MAX_LAYERS + 1];
  int relu[TG_MAX_LAYERS];
  size_t nparams, count[2 * TG_MAX_LAYERS];
  cudaStream_t stream;
  cublasHandle_t blas;
  float *param[2 * TG_MAX_LAYERS]; /* the caller's device parameters */
  float *mom[2 * TG_MAX_LAYERS];   /* momentum, owned */
  float *x;                        /* input batch, f32 */
  int32_t *y;                      /* labels */
  float *act[TG_MAX_LAYERS];       /* layer outputs (post-ReLU, rounded under amp) */
  float *delta[2];                 /* back-propagated errors, ping-pong */
  double *rowloss;                 /* per-row cross-entropy */
  double *rowloss_host;            /* pinned */
  /* amp: f16/bf16 images of the GEMM operands */
  void *wlow[TG_MAX_LAYERS], *xlow, *actlow[TG_MAX_LAYERS], *deltalow[2];
  int batch;                       /* rows of the step in flight */
};

static int tg__fail(char *err, size_t errlen, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return -1;
}

#define TG_CUDA(call)                                                                        \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess)                                                                   \
      return tg__fail(err, errlen, "%s: %s (%s:%d)", #call, cudaGetErrorString(e_), __FILE__, \
                      __LINE__);                                                             \
  } while (0)
#define TG_BLAS(call)                                                                        \
  do {                                                                                       \
    cublasStatus_t s_ = (call);                                                              \
    if (s_ != CUBLAS_STATUS_SUCCESS)                                                         \
      return tg__fail(err, errlen, "%s: cuBLAS status %d (%s:%d)", #call, (int)s_, __FILE__,  \
                      __LINE__);                                                             \
  } while (0)
#define TG_LAUNCHED() TG_CUDA(cudaGetLastError())

static const int TG_THREADS = 256;
static unsigned tg__blocks(size_t n) {
  size_t b = (n + TG_THREADS - 1) / TG_THREADS;
  if (b < 1) b = 1;
  return b > 65535u * 16u ? 65535u * 16u : (unsigned)b;
}

/* ---- kernels --------------------------------------------------------------------------- */

/* Rounding to what an f16 / bf16 tensor holds (round to nearest even), in f32. */
__device__ __forceinline__ float tg_round(float v, int amp) {
  if (amp == 1) return __half2float(__float2half_rn(v));
  if (amp == 2) return __bfloat162float(__float2bfloat16_rn(v));
  return v;
}
__device__ __forceinline__ void tg_store_low(void *low, size_t k, float v, int amp) {
  if (amp == 1) ((__half *)low)[k] = __float2half_rn(v);
  else if (amp == 2) ((__nv_bfloat16 *)low)[k] = __float2bfloat16_rn(v);
}

/* out[r][c] = round(b[c]) (the GEMM then accumulates onto it, as the host model does). */
__global__ void tg_k_fill_bias(float *out, const float *b, int rows, int cols, int amp) {
  size_t n = (size_t)rows * (size_t)cols;
  for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n;
       k += (size_t)gridDim.x * blockDim.x)
    out[k] = tg_round(b[k % (size_t)cols], amp);
}

/* ReLU (z > 0 ? z : 0, as the host) and rounding in place; the f16/bf16 image beside it. */
__global__ void tg_k_activate(float *out, void *low, size_t n, int relu, int amp) {
  for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n;
       k += (size_t)gridDim.x * blockDim.x) {
    float v = out[k];
    if (relu) v = v > 0.0f ? v : 0.0f;
    v = tg_round(v, amp);
    out[k] = v;
    if (low) tg_store_low(low, k, v, amp);
  }
}

__global__ void tg_k_to_low(const float *src, void *low, size_t n, int amp) {
  for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n;
       k += (size_t)gridDim.x * blockDim.x)
    tg_store_low(low, k, src[k], amp);
}

/* One thread per row: the cross-entropy in f64 (as tm_forward) and the error at the logits
 * (softmax - onehot) / batch * loss_scale in f32 (as tm_backward), rounded under amp. */
__global__ void tg_k_softmax_ce(const float *logits, const int32_t *labels, int rows, int C,
                                float loss_scale, int amp, double *rowloss, float *delta,
                                void *low) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float *z = logits + (size_t)r * (size_t)C;
  float *d = delta + (size_t)r * (size_t)C;
  int lab = labels[r];
  float mx = z[0];
  for (int c = 1; c < C; c++) mx = z[c] > mx ? z[c] : mx;
  double sum64 = 0.0;
  for (int c = 0; c < C; c++) sum64 += exp((double)(z[c] - mx));
  rowloss[r] = (lab >= 0 && lab < C) ? log(sum64) + (double)mx - (double)z[lab] : nan("");
  float sum = 0.0f;
  for (int c = 0; c < C; c++) sum = __fadd_rn(sum, (d[c] = expf(z[c] - mx)));
  float inv = 1.0f / __fmul_rn(sum, (float)rows);
  for (int c = 0; c < C; c++) d[c] = __fmul_rn(d[c], inv);
  if (lab >= 0 && lab < C) d[lab] -= 1.0f / (float)rows;
  for (int c = 0; c < C; c++) {
    float v = d[c];
    if (loss_scale != 1.0f) v = __fmul_rn(v, loss_scale);
    v = tg_round(v, amp);
    d[c] = v;
    if (low) tg_store_low(low, (size_t)r * (size_t)C + (size_t)c, v, amp);
  }
}

/* db[c] = sum over rows of delta[r][c], one thread per column, rows in order (as the host). */
__global__ void tg_k_colsum(const float *delta, int rows, int cols, float *db) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float s = 0.0f;
  for (int r = 0; r < rows; r++) s = __fadd_rn(s, delta[(size_t)r * (size_t)cols + (size_t)c]);
  db[c] = s;
}

/* The error into a hidden layer's output: rounded (amp) and masked by ReLU'(act). */
__global__ void tg_k_relu_backward(float *din, const float *act, void *low, size_t n, int relu,
                                   int amp) {
  for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n;
       k += (size_t)gridDim.x * blockDim.x) {
    float v = tg_round(din[k], amp);
    if (relu && act[k] <= 0.0f) v = 0.0f;
    din[k] = v;
    if (low) tg_store_low(low, k, v, amp);
  }
}

__global__ void tg_k_scale(float *g, size_t n, float inv) {
  for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n;
       k += (size_t)gridDim.x * blockDim.x)
    g[k] = __fmul_rn(g[k], inv);
}

/* train_sgd_step with every product and sum rounded on its own (no fused multiply-add). */
__global__ void tg_k_sgd(float *p, const float *g, float *buf, size_t n, float lr, float momentum,
                         float wd) {
  for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n;
       k += (size_t)gridDim.x * blockDim.x) {
    float gk = __fadd_rn(g[k], __fmul_rn(wd, p[k]));
    float b = __fadd_rn(__fmul_rn(momentum, buf[k]), gk);
    buf[k] = b;
    p[k] = __fsub_rn(p[k], __fmul_rn(lr, b));
  }
}

/* ---- host side --------------------------------------------------------------------------- */

static size_t tg__low_bytes(const tg_model_t *g) { return g->amp ? 2 : 4; }

/* Row-major C (M x N) = op(A) op(B) + beta C through column-major cuBLAS: C^T = op(B)^T op(A)^T.
 * A, B are f32 (SGEMM) or the f16/bf16 images (GemmEx, f32 compute); C is f32. */
static int tg__gemm(tg_model_t *g, bool ta, bool tb, int M, int N, int K, const void *A, int lda,
                    const void *B, int ldb, float beta, float *C, int ldc, char *err,
                    size_t errlen) {
  const float one = 1.0f;
  cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (!g->amp) {
    TG_BLAS(cublasSgemm(g->blas, ob, oa, N, M, K, &one, (const float *)B, ldb, (const float *)A,
                        lda, &beta, C, ldc));
  } else {
    cudaDataType_t t = g->amp == 1 ? CUDA_R_16F : CUDA_R_16BF;
    TG_BLAS(cublasGemmEx(g->blas, ob, oa, N, M, K, &one, B, t, ldb, A, t, lda, &beta, C,
                         CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
  return 0;
}

extern "C" void tg_destroy(tg_model_t *g) {
  if (!g) return;
  cudaSetDevice(g->device);
  for (size_t i = 0; i < g->nparams; i++) cudaFree(g->mom[i]);
  for (int l = 0; l < g->nlayers; l++) {
    cudaFree(g->act[l]);
    cudaFree(g->actlow[l]);
    cudaFree(g->wlow[l]);
  }
  cudaFree(g->x);
  cudaFree(g->xlow);
  cudaFree(g->y);
  for (int t = 0; t < 2; t++) {
    cudaFree(g->delta[t]);
    cudaFree(g->deltalow[t]);
  }
  cudaFree(g->rowloss);
  if (g->rowloss_host) cudaFreeHost(g->rowloss_host);
  if (g->blas) cublasDestroy(g->blas);
  free(g);
}

extern "C" const char *tg_describe(const tg_model_t *g) {
  if (!g) return "none";
  return g->amp == 1   ? "cuBLAS GemmEx (f16 operands, f32 compute)"
         : g->amp == 2 ? "cuBLAS GemmEx (bf16 operands, f32 compute)"
                       : "cuBLAS SGEMM (f32)";
}

static int tg__create(tg_model_t *g, int nlayers, const int *sizes, const int *relu,
                      int max_batch, int amp, void *stream, void *const *dev_param, char *err,
                      size_t errlen) {
  if (nlayers < 1 || nlayers > TG_MAX_LAYERS || !sizes || !relu || !dev_param)
    return tg__fail(err, errlen, "tg_create: bad model (nlayers %d)", nlayers);
  if (max_batch < 1) return tg__fail(err, errlen, "tg_create: max_batch %d < 1", max_batch);
  if (amp < 0 || amp > 2) return tg__fail(err, errlen, "tg_create: amp %d not 0, 1 or 2", amp);
  /* The device layer binds the communicator's device on the calling thread (it just allocated
   * dev_param here); every entry below re-binds it, as the device layer does. */
  TG_CUDA(cudaGetDevice(&g->device));
  g->nlayers = nlayers;
  g->max_batch = max_batch;
  g->amp = amp;
  g->stream = (cudaStream_t)stream;
  g->nparams = (size_t)2 * (size_t)nlayers;
  for (int l = 0; l <= nlayers; l++) {
    if (sizes[l] < 1) return tg__fail(err, errlen, "tg_create: sizes[%d] = %d", l, sizes[l]);
    g->sizes[l] = sizes[l];
    if (sizes[l] > g->maxw) g->maxw = sizes[l];
  }
  size_t B = (size_t)max_batch, lb = tg__low_bytes(g);
  for (int l = 0; l < nlayers; l++) {
    g->relu[l] = relu[l] != 0;
    g->count[2 * l] = (size_t)sizes[l + 1] * (size_t)sizes[l];
    g->count[2 * l + 1] = (size_t)sizes[l + 1];
    for (int t = 0; t < 2; t++) {
      size_t i = (size_t)(2 * l + t);
      if (!dev_param[i]) return tg__fail(err, errlen, "tg_create: dev_param[%zu] is NULL", i);
      g->param[i] = (float *)dev_param[i];
      TG_CUDA(cudaMalloc((void **)&g->mom[i], sizeof(float) * g->count[i]));
      TG_CUDA(cudaMemset(g->mom[i], 0, sizeof(float) * g->count[i]));
    }
    TG_CUDA(cudaMalloc((void **)&g->act[l], sizeof(float) * B * (size_t)sizes[l + 1]));
    if (amp) {
      TG_CUDA(cudaMalloc(&g->actlow[l], lb * B * (size_t)sizes[l + 1]));
      TG_CUDA(cudaMalloc(&g->wlow[l], lb * g->count[2 * l]));
    }
  }
  TG_CUDA(cudaMalloc((void **)&g->x, sizeof(float) * B * (size_t)sizes[0]));
  if (amp) TG_CUDA(cudaMalloc(&g->xlow, lb * B * (size_t)sizes[0]));
  TG_CUDA(cudaMalloc((void **)&g->y, sizeof(int32_t) * B));
  for (int t = 0; t < 2; t++) {
    TG_CUDA(cudaMalloc((void **)&g->delta[t], sizeof(float) * B * (size_t)g->maxw));
    if (amp) TG_CUDA(cudaMalloc(&g->deltalow[t], lb * B * (size_t)g->maxw));
  }
  TG_CUDA(cudaMalloc((void **)&g->rowloss, sizeof(double) * B));
  TG_CUDA(cudaMallocHost((void **)&g->rowloss_host, sizeof(double) * B));
  TG_BLAS(cublasCreate(&g->blas));
  TG_BLAS(cublasSetStream(g->blas, g->stream));
  /* Plain f32 SGEMM: no TF32 (the host model computes in f32). */
  TG_BLAS(cublasSetMathMode(g->blas, CUBLAS_DEFAULT_MATH));
  TG_CUDA(cudaDeviceSynchronize());
  return 0;
}

extern "C" int tg_create(tg_model_t **out, int nlayers, const int *sizes, const int *relu,
                         int max_batch, int amp, void *stream, void *const *dev_param, char *err,
                         size_t errlen) {
  if (!out) return tg__fail(err, errlen, "tg_create: out is NULL");
  *out = NULL;
  tg_model_t *g = (tg_model_t *)calloc(1, sizeof *g);
  if (!g) return tg__fail(err, errlen, "tg_create: out of memory");
  if (tg__create(g, nlayers, sizes, relu, max_batch, amp, stream, dev_param, err, errlen) != 0) {
    tg_destroy(g);
    return -1;
  }
  *out = g;
  return 0;
}

extern "C" int tg_upload(tg_model_t *g, const float *const *param, const float *const *mom,
                         char *err, size_t errlen) {
  if (!g) return tg__fail(err, errlen, "tg_upload: model is NULL");
  TG_CUDA(cudaSetDevice(g->device));
  for (size_t i = 0; i < g->nparams; i++) {
    if (param)
      TG_CUDA(cudaMemcpyAsync(g->param[i], param[i], sizeof(float) * g->count[i],
                              cudaMemcpyHostToDevice, g->stream));
    if (mom)
      TG_CUDA(cudaMemcpyAsync(g->mom[i], mom[i], sizeof(float) * g->count[i],
                              cudaMemcpyHostToDevice, g->stream));
  }
  TG_CUDA(cudaStreamSynchronize(g->stream));
  return 0;
}

extern "C" int tg_download(tg_model_t *g, float *const *param, float *const *mom, char *err,
                           size_t errlen) {
  if (!g) return tg__fail(err, errlen, "tg_download: model is NULL");
  TG_CUDA(cudaSetDevice(g->device));
  for (size_t i = 0; i < g->nparams; i++) {
    if (param)
      TG_CUDA(cudaMemcpyAsync(param[i], g->param[i], sizeof(float) * g->count[i],
                              cudaMemcpyDeviceToHost, g->stream));
    if (mom)
      TG_CUDA(cudaMemcpyAsync(mom[i], g->mom[i], sizeof(float) * g->count[i],
                              cudaMemcpyDeviceToHost, g->stream));
  }
  TG_CUDA(cudaStreamSynchronize(g->stream));
  return 0;
}

extern "C" int tg_forward_backward(tg_model_t *g, const float *x, const int32_t *y, int batch,
                                   float loss_scale, void *const *grad, tg_grad_ready_fn ready,
                                   void *ctx, char *err, size_t errlen) {
  if (!g || !x || !y || !grad)
    return tg__fail(err, errlen, "tg_forward_backward: NULL argument");
  if (batch < 1 || batch > g->max_batch)
    return tg__fail(err, errlen, "tg_forward_backward: batch %d not in [1, %d]", batch,
                    g->max_batch);
  for (size_t i = 0; i < g->nparams; i++)
    if (!grad[i]) return tg__fail(err, errlen, "tg_forward_backward: grad[%zu] is NULL", i);
  TG_CUDA(cudaSetDevice(g->device));
  cudaStream_t s = g->stream;
  const int L = g->nlayers, amp = g->amp, T = TG_THREADS;
  const size_t B = (size_t)batch;
  g->batch = batch;
  TG_CUDA(cudaMemcpyAsync(g->x, x, sizeof(float) * B * (size_t)g->sizes[0],
                          cudaMemcpyHostToDevice, s));
  TG_CUDA(cudaMemcpyAsync(g->y, y, sizeof(int32_t) * B, cudaMemcpyHostToDevice, s));
  if (amp) {
    size_t n = B * (size_t)g->sizes[0];
    tg_k_to_low<<<tg__blocks(n), T, 0, s>>>(g->x, g->xlow, n, amp);
    TG_LAUNCHED();
    for (int l = 0; l < L; l++) {
      tg_k_to_low<<<tg__blocks(g->count[2 * l]), T, 0, s>>>(g->param[2 * l], g->wlow[l],
                                                            g->count[2 * l], amp);
      TG_LAUNCHED();
    }
  }
  /* forward: z = round(b) + h W^T, then ReLU and rounding */
  for (int l = 0; l < L; l++) {
    int in = g->sizes[l], out = g->sizes[l + 1];
    const void *h = l ? (amp ? g->actlow[l - 1] : (const void *)g->act[l - 1])
                      : (amp ? g->xlow : (const void *)g->x);
    const void *W = amp ? g->wlow[l] : (const void *)g->param[2 * l];
    size_t n = B * (size_t)out;
    tg_k_fill_bias<<<tg__blocks(n), T, 0, s>>>(g->act[l], g->param[2 * l + 1], batch, out, amp);
    TG_LAUNCHED();
    if (tg__gemm(g, false, true, batch, out, in, h, in, W, in, 1.0f, g->act[l], out, err,
                 errlen))
      return -1;
    tg_k_activate<<<tg__blocks(n), T, 0, s>>>(g->act[l], g->actlow[l], n, g->relu[l], amp);
    TG_LAUNCHED();
  }
  /* loss and the error at the logits */
  int C = g->sizes[L], cur = 0;
  tg_k_softmax_ce<<<(batch + 127) / 128, 128, 0, s>>>(g->act[L - 1], g->y, batch, C, loss_scale,
                                                      amp, g->rowloss, g->delta[0],
                                                      g->deltalow[0]);
  TG_LAUNCHED();
  TG_CUDA(cudaMemcpyAsync(g->rowloss_host, g->rowloss, sizeof(double) * B,
                          cudaMemcpyDeviceToHost, s));
  /* backward, last layer first: db, dW (straight into grad[]), then the error into the input */
  for (int l = L - 1; l >= 0; l--) {
    int in = g->sizes[l], out = g->sizes[l + 1];
    const float *dout = g->delta[cur];
    const void *dout_op = amp ? g->deltalow[cur] : (const void *)dout;
    const void *h = l ? (amp ? g->actlow[l - 1] : (const void *)g->act[l - 1])
                      : (amp ? g->xlow : (const void *)g->x);
    tg_k_colsum<<<(out + T - 1) / T, T, 0, s>>>(dout, batch, out, (float *)grad[2 * l + 1]);
    TG_LAUNCHED();
    if (ready) ready((size_t)(2 * l + 1), ctx);
    /* dW (out x in) = dout^T (out x B) h (B x in) */
    if (tg__gemm(g, true, false, out, in, batch, dout_op, out, h, in, 0.0f, (float *)grad[2 * l],
                 in, err, errlen))
      return -1;
    if (ready) ready((size_t)(2 * l), ctx);
    if (l == 0) break;
    /* din (B x in) = dout (B x out) W (out x in), rounded and masked by the ReLU of layer l-1 */
    const void *W = amp ? g->wlow[l] : (const void *)g->param[2 * l];
    int nxt = cur ^ 1;
    if (tg__gemm(g, false, false, batch, in, out, dout_op, out, W, in, 0.0f, g->delta[nxt], in,
                 err, errlen))
      return -1;
    size_t n = B * (size_t)in;
    tg_k_relu_backward<<<tg__blocks(n), T, 0, s>>>(g->delta[nxt], g->act[l - 1],
                                                   g->deltalow[nxt], n, g->relu[l - 1], amp);
    TG_LAUNCHED();
    cur = nxt;
  }
  return 0;
}

extern "C" int tg_unscale(tg_model_t *g, void *const *grad, float inv, char *err, size_t errlen) {
  if (!g || !grad) return tg__fail(err, errlen, "tg_unscale: NULL argument");
  TG_CUDA(cudaSetDevice(g->device));
  for (size_t i = 0; i < g->nparams; i++) {
    tg_k_scale<<<tg__blocks(g->count[i]), TG_THREADS, 0, g->stream>>>((float *)grad[i],
                                                                      g->count[i], inv);
    TG_LAUNCHED();
  }
  return 0;
}

extern "C" int tg_finish_step(tg_model_t *g, void *const *grad, int take_step, float lr,
                              float momentum, float wd, double *loss, char *err, size_t errlen) {
  if (!g || !grad || !loss) return tg__fail(err, errlen, "tg_finish_step: NULL argument");
  TG_CUDA(cudaSetDevice(g->device));
  if (take_step)
    for (size_t i = 0; i < g->nparams; i++) {
      tg_k_sgd<<<tg__blocks(g->count[i]), TG_THREADS, 0, g->stream>>>(
          g->param[i], (const float *)grad[i], g->mom[i], g->count[i], lr, momentum, wd);
      TG_LAUNCHED();
    }
  TG_CUDA(cudaStreamSynchronize(g->stream));
  double sum = 0.0;
  for (int r = 0; r < g->batch; r++) sum += g->rowloss_host[r];
  *loss = g->batch ? sum / g->batch : 0.0;
  return 0;
}
