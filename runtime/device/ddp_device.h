/* Device layer (CUDA, or a host emulation of it): device and pinned memory, streams, events,
 * asynchronous copies and the library's reduction kernels, for applications and tests. */
#ifndef DDP_DEVICE_H
#define DDP_DEVICE_H

#include "ddp_comm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Typed opaque handles. Under CUDA a `ddp_stream_t *` is a cudaStream_t and a `ddp_event_t *`
 * a cudaEvent_t (the application may pass its own, cast); under the emulation they are the
 * library's objects. A NULL stream is the default stream. */
typedef struct ddp_stream ddp_stream_t;
typedef struct ddp_event ddp_event_t;

/* Which device the communicator uses: none (host only), a real CUDA device, or the host
 * emulation (DDP_DEVICE_EMULATE=1: "device memory" is tagged host memory, every stream is a
 * worker thread that runs its queue in order, later than the call that queued it). */
typedef enum ddp_device_kind {
  DDP_DEVICE_NONE = 0,
  DDP_DEVICE_CUDA,
  DDP_DEVICE_EMULATED
} ddp_device_kind_t;

/* DDP_DEVICE_NONE for an invalid or closed communicator. */
DDP_API ddp_device_kind_t ddp_device_kind(const ddp_comm_t *comm);
/* 1 when device buffers (DDP_MEM_CUDA) can be used on this communicator (CUDA or emulated). */
DDP_API int ddp_device_available(const ddp_comm_t *comm);
DDP_API int ddp_device_emulated(const ddp_comm_t *comm);
/* "cuda:0 (NVIDIA H200)", "emulated", or "none (reason)". */
DDP_API ddp_status_t ddp_device_describe(const ddp_comm_t *comm, char *buf, size_t bytes);

/* Device memory (cudaMalloc, never managed memory). Freeing NULL is a no-op; freeing a
 * pointer that is not a live device allocation is DDP_EINVAL. */
DDP_API ddp_status_t ddp_device_malloc(ddp_comm_t *comm, size_t bytes, void **ptr);
DDP_API ddp_status_t ddp_device_free(ddp_comm_t *comm, void *ptr);
/* Page-locked host memory (cudaMallocHost), for fast and asynchronous copies. */
DDP_API ddp_status_t ddp_host_alloc_pinned(ddp_comm_t *comm, size_t bytes, void **ptr);
DDP_API ddp_status_t ddp_host_free_pinned(ddp_comm_t *comm, void *ptr);
/* 1 when ptr points into a live device allocation of this communicator's device. */
DDP_API int ddp_device_is_device_ptr(const ddp_comm_t *comm, const void *ptr);

DDP_API ddp_status_t ddp_stream_create(ddp_comm_t *comm, ddp_stream_t **stream);
/* Destroy functions set the caller's handle to NULL; a NULL handle is a no-op. */
DDP_API ddp_status_t ddp_stream_destroy(ddp_comm_t *comm, ddp_stream_t **stream);
DDP_API ddp_status_t ddp_stream_synchronize(ddp_comm_t *comm, ddp_stream_t *stream);

DDP_API ddp_status_t ddp_event_create(ddp_comm_t *comm, ddp_event_t **event);
DDP_API ddp_status_t ddp_event_destroy(ddp_comm_t *comm, ddp_event_t **event);
/* Captures the work queued on `stream` so far. */
DDP_API ddp_status_t ddp_event_record(ddp_comm_t *comm, ddp_event_t *event, ddp_stream_t *stream);
/* Later work on `stream` waits (on the device, the host does not block) for the event. */
DDP_API ddp_status_t ddp_stream_wait_event(ddp_comm_t *comm, ddp_stream_t *stream,
                                           ddp_event_t *event);
DDP_API ddp_status_t ddp_event_synchronize(ddp_comm_t *comm, ddp_event_t *event);
/* *done = 1 when the captured work has completed (or the event was never recorded). */
DDP_API ddp_status_t ddp_event_query(ddp_comm_t *comm, ddp_event_t *event, int *done);

/* Asynchronous copy on `stream`; the direction follows from the pointers (device or host). */
DDP_API ddp_status_t ddp_memcpy_async(ddp_comm_t *comm, void *dst, const void *src, size_t bytes,
                                      ddp_stream_t *stream);
/* Sets `bytes` bytes of device memory to `value` on `stream`. */
DDP_API ddp_status_t ddp_memset_async(ddp_comm_t *comm, void *dst, int value, size_t bytes,
                                      ddp_stream_t *stream);
/* Runs fn(arg) on the host once the work queued before it on `stream` is done; later work on
 * the stream waits for it. fn must not call the device layer. */
DDP_API ddp_status_t ddp_launch_host_func(ddp_comm_t *comm, ddp_stream_t *stream,
                                          void (*fn)(void *arg), void *arg);

/* Kernels on device buffers, asynchronous on `stream`.
 * reduce: dst[i] = dst[i] op src[i] (op sum, min, max or prod; avg is a collective op).
 * scale:  buf[i] *= factor (floating dtypes).
 * convert: dst[i] = (dst_dtype)src[i] between f32, f16 and bf16 (the compression hooks);
 *          round to nearest even, overflow to inf as in IEEE conversions.
 * nonfinite: *flag (device memory, one int) is set to 1 when buf holds an inf or a nan, and
 *          left as it is otherwise (clear it first), for dynamic loss scaling. */
DDP_API ddp_status_t ddp_device_reduce_async(ddp_comm_t *comm, void *dst, const void *src,
                                             size_t count, ddp_dtype_t dtype, ddp_op_t op,
                                             ddp_stream_t *stream);
DDP_API ddp_status_t ddp_device_scale_async(ddp_comm_t *comm, void *buf, size_t count,
                                            ddp_dtype_t dtype, double factor,
                                            ddp_stream_t *stream);
DDP_API ddp_status_t ddp_device_convert_async(ddp_comm_t *comm, void *dst, ddp_dtype_t dst_dtype,
                                              const void *src, ddp_dtype_t src_dtype,
                                              size_t count, ddp_stream_t *stream);
DDP_API ddp_status_t ddp_device_nonfinite_async(ddp_comm_t *comm, const void *buf, size_t count,
                                                ddp_dtype_t dtype, int *flag,
                                                ddp_stream_t *stream);

/* Which transport device-memory collectives use on this communicator: "mpi" (CUDA-aware
 * MPI), "staged" (pinned host chunks) or "nccl"; `requested` NULL means DDP_TRANSPORT. */
DDP_API ddp_status_t ddp_device_transport(ddp_comm_t *comm, const char *requested,
                                          const char **name);
/* Makes `name` ("auto", "mpi", "staged", "nccl") the transport of this communicator's later
 * device collectives, overriding DDP_TRANSPORT (for side-by-side comparisons in one run).
 * Every rank must make the same call at the same point, with no device collective in flight.
 * DDP_ENOTSUP when that transport cannot run here (the message says why). */
DDP_API ddp_status_t ddp_device_set_transport(ddp_comm_t *comm, const char *name);

#ifdef __cplusplus
}
#endif
#endif /* DDP_DEVICE_H */
