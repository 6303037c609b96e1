/* Internal interface of the reduction kernels layer: the element-wise reduce, scale, copy and
 * f16/bf16 conversion loops on host memory (coll_reduce.c) and the CUDA kernels' host-side
 * launchers (device_kernels.cu). Pure computation over the buffers they are given: they know
 * no communicator, device state or transport, so the device layer (its host emulation and its
 * CUDA backend), the collectives and the reducer's compression all build on them. */
#ifndef DDP_KERNELS_INTERNAL_H
#define DDP_KERNELS_INTERNAL_H

#include <stdint.h>

#include "ddp_internal.h"

/* ---- host kernels (coll_reduce.c) ------------------------------------------------------- */
/* dst[i] = dst[i] op src[i]; op != DDP_AVG. */
DDP_HIDDEN void ddp__reduce_host(void *dst, const void *src, size_t count, ddp_dtype_t dtype,
                                 ddp_op_t op);
/* dst[i] = a[i] op b[i] (dst may alias a or b). */
DDP_HIDDEN void ddp__reduce3_host(void *dst, const void *a, const void *b, size_t count,
                                  ddp_dtype_t dtype, ddp_op_t op);
/* buf[i] /= divisor (f16/bf16 in f32, rounded; integers truncated toward zero). */
DDP_HIDDEN void ddp__scale_host(void *buf, size_t count, ddp_dtype_t dtype, double divisor);
/* Conversions, round to nearest-even; NaN stays NaN. */
DDP_HIDDEN float ddp__f16_to_f32(uint16_t h);
DDP_HIDDEN uint16_t ddp__f32_to_f16(float f);
DDP_HIDDEN float ddp__bf16_to_f32(uint16_t h);
DDP_HIDDEN uint16_t ddp__f32_to_bf16(float f);
DDP_HIDDEN void ddp__f16_to_f32_n(float *dst, const uint16_t *src, size_t count);
DDP_HIDDEN void ddp__f32_to_f16_n(uint16_t *dst, const float *src, size_t count);
DDP_HIDDEN void ddp__bf16_to_f32_n(float *dst, const uint16_t *src, size_t count);
DDP_HIDDEN void ddp__f32_to_bf16_n(uint16_t *dst, const float *src, size_t count);
/* dst[i] = half(src[i] * scale): the reducer's compression hooks fold the 1/world division into
 * the conversion (one pass over the bucket). */
DDP_HIDDEN void ddp__f32_to_f16_scaled_n(uint16_t *dst, const float *src, size_t count,
                                         float scale);
DDP_HIDDEN void ddp__f32_to_bf16_scaled_n(uint16_t *dst, const float *src, size_t count,
                                          float scale);
/* Large copies (memcpy, split so the watchdog-free loop stays cache friendly). */
DDP_HIDDEN void ddp__copy_host(void *dst, const void *src, size_t bytes);

/* ---- CUDA kernel launchers (device_kernels.cu, CUDA builds only) --------------------------
 * Each returns 0 or a cudaError_t value (the launch's own: the device layer never leaves an
 * error of its own behind as the thread's last error). `stream` is a cudaStream_t. */
int ddp__cuda_reduce(void *dst, const void *src, size_t count, int dtype, int op, void *stream);
int ddp__cuda_scale(void *buf, size_t count, int dtype, double factor, int divide, void *stream);
int ddp__cuda_convert(void *dst, int dst_dtype, const void *src, int src_dtype, size_t count,
                      void *stream);
int ddp__cuda_nonfinite(const void *buf, size_t count, int dtype, int *flag, void *stream);

#endif /* DDP_KERNELS_INTERNAL_H */
