/* ddp_train's MLP on a CUDA device (apps/kit/train_gpu.cu, built only with CUDA): the same
 * arithmetic as train_model.h's dense layers (ReLU hidden layers, mean softmax cross-entropy,
 * torch.optim.SGD with momentum and weight decay) with cuBLAS GEMMs and small CUDA kernels,
 * every operation queued on one stream (the reducer's, ddp_reducer_opts.stream).
 *
 * Mixed precision (amp 1 = f16, 2 = bf16) follows train_model.h's emulation: the GEMM operands
 * (weights, the input batch, activations, back-propagated errors) are f16/bf16 tensors and the
 * GEMMs run as cublasGemmEx with f32 accumulation into f32 outputs; biases are rounded like the
 * weights; master weights, momentum and gradients are f32.
 *
 * Gradients are written straight into caller-given device pointers (the reducer's bucket
 * views) and `ready(i, ctx)` is called right after the kernel producing gradient i is queued:
 * b_{L-1}, W_{L-1}, ..., b_0, W_0 (the host model's order). Parameters use train_model.h's
 * numbering (W_l = 2l, b_l = 2l + 1) and PyTorch's layouts (W_l is out x in, row-major).
 *
 * All functions return 0, or -1 with a message in err (CUDA or cuBLAS error text). */
#ifndef TRAIN_GPU_H
#define TRAIN_GPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TG_MAX_LAYERS 8

typedef struct tg_model tg_model_t;
typedef void (*tg_grad_ready_fn)(size_t param_index, void *ctx);

/* A dense chain sizes[0] -> ... -> sizes[nlayers]; relu[l] != 0: ReLU on layer l's output.
 * dev_param[2l], dev_param[2l+1]: device memory holding W_l and b_l (kept by the caller; the
 * model updates them in place). stream: a cudaStream_t (NULL = the default stream). */
int tg_create(tg_model_t **out, int nlayers, const int *sizes, const int *relu, int max_batch,
              int amp, void *stream, void *const *dev_param, char *err, size_t errlen);
void tg_destroy(tg_model_t *g);
/* "cuBLAS SGEMM (f32)" or "cuBLAS GemmEx (f16 operands, f32 compute)". */
const char *tg_describe(const tg_model_t *g);

/* Copies host parameters and momentum (either list may be NULL) to the device; synchronous. */
int tg_upload(tg_model_t *g, const float *const *param, const float *const *mom, char *err,
              size_t errlen);
/* Copies the device parameters and momentum (either may be NULL) to the host; synchronous. */
int tg_download(tg_model_t *g, float *const *param, float *const *mom, char *err, size_t errlen);

/* Queues forward and backward of `batch` samples (host x: batch x sizes[0] f32, y: labels):
 * gradients (multiplied by loss_scale) into grad[i], ready() after each. The loss becomes
 * available from tg_finish_step. */
int tg_forward_backward(tg_model_t *g, const float *x, const int32_t *y, int batch,
                        float loss_scale, void *const *grad, tg_grad_ready_fn ready, void *ctx,
                        char *err, size_t errlen);
/* fp16 loss scaling, after the gradients in grad[] are averaged: queues grad[i] *= inv (the
 * caller then checks them with ddp_device_nonfinite_async on the same stream). */
int tg_unscale(tg_model_t *g, void *const *grad, float inv, char *err, size_t errlen);
/* With take_step, queues the SGD step on the averaged gradients (torch.optim.SGD:
 * g += wd p; buf = momentum buf + g; p -= lr buf); then waits for the stream and returns in
 * *loss the batch's mean cross-entropy, computed as train_model.h does (f64 per row, summed
 * in row order, divided by the batch). */
int tg_finish_step(tg_model_t *g, void *const *grad, int take_step, float lr, float momentum,
                   float wd, double *loss, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* TRAIN_GPU_H */
