/* CUDA implementation of the device layer: cudaMalloc / cudaMallocHost (never managed memory),
 * non-blocking streams, timing-free events, and the reduction kernels (the kernels layer's
 * collectives/kernels/device_kernels.cu).
 * The device layer binds the device on every thread that calls in (each public call, the
 * progress engine when it starts, a collective run on the caller's thread), so CUDA-aware MPI
 * and NCCL find it current too; each entry here binds again as well (cheap when current), for
 * applications that switch devices on their own threads between calls.
 *
 * The runtime keeps a per-thread "last error" that a failed call sets and cudaGetLastError()
 * returns (and clears); the kernel launchers read it to learn whether their launch failed.
 * So every error this file handles is also cleared here, including cudaEventQuery's
 * cudaErrorNotReady, which is not a failure at all: left behind, it made the next kernel launch
 * on the thread report "device not ready" (PyTorch's CUDAEvent::query clears it the same way).
 * Sticky errors (a faulted context) cannot be cleared and are reported by every later call.
 * tests/cuda_fake.c checks these paths against the fake runtime of tests/fake_cuda. */
#include "device_internal.h"

#if DDP__CUDA_BACKEND
#include <cuda_runtime_api.h>

/* A failed runtime call: its error is reported (and so consumed) here, never left as the
 * thread's last error for an unrelated later launch to pick up. */
static ddp_status_t cu_fail(ddp_status_t st, cudaError_t e, const char *what) {
  (void)cudaGetLastError();
  return ddp__error(st, "%s failed: %s", what, cudaGetErrorString(e));
}

#define CU(call)                                                              \
  do {                                                                        \
    cudaError_t ddp__ce_ = (call);                                            \
    if (ddp__ce_ != cudaSuccess) return cu_fail(DDP_ECUDA, ddp__ce_, #call);  \
  } while (0)

/* The launchers return their launch's cudaGetLastError() (already cleared by that call), or the
 * status of a cudaMemcpyAsync (f32 -> f32 convert), which cu_fail clears. */
#define KERNEL(call, what)                                                                   \
  do {                                                                                       \
    int ddp__ke_ = (call);                                                                   \
    if (ddp__ke_ != 0) return cu_fail(DDP_ECUDA, (cudaError_t)ddp__ke_, what " kernel launch"); \
  } while (0)

static ddp_status_t bind(ddp__device_t *d) {
  CU(cudaSetDevice(d->c->device));
  return DDP_OK;
}

static ddp_status_t cu_init(ddp__device_t *d) {
  DDP_TRY(bind(d));
  struct cudaDeviceProp prop;
  CU(cudaGetDeviceProperties(&prop, d->c->device));
  char name[64];
  snprintf(name, sizeof name, "%.63s", prop.name);
  snprintf(d->desc, sizeof d->desc, "cuda:%d (%s, %d.%d, %.1f GiB)", d->c->device, name,
           prop.major, prop.minor, (double)prop.totalGlobalMem / (1024.0 * 1024 * 1024));
  d->state = NULL;
  return DDP_OK;
}

static void cu_fini(ddp__device_t *d) { (void)d; }

static ddp_status_t cu_dev_alloc(ddp__device_t *d, size_t bytes, void **ptr) {
  DDP_TRY(bind(d));
  void *p = NULL;
  cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    char what[64];
    snprintf(what, sizeof what, "cudaMalloc(%zu bytes)", bytes);
    return cu_fail(e == cudaErrorMemoryAllocation ? DDP_ENOMEM : DDP_ECUDA, e, what);
  }
  *ptr = p;
  return DDP_OK;
}

static int mem_type(const void *ptr, int *device) {
  struct cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, ptr) != cudaSuccess) {
    (void)cudaGetLastError(); /* an unknown pointer is an answer, not an error to keep */
    return cudaMemoryTypeUnregistered;
  }
  if (device) *device = a.device;
  return (int)a.type;
}

static int cu_is_dev(ddp__device_t *d, const void *ptr, size_t bytes) {
  int dev = -1;
  if (mem_type(ptr, &dev) != cudaMemoryTypeDevice || dev != d->c->device) return 0;
  if (bytes > 1 && mem_type((const char *)ptr + bytes - 1, NULL) != cudaMemoryTypeDevice) return 0;
  return 1;
}

static ddp_status_t cu_dev_free(ddp__device_t *d, void *ptr) {
  DDP_TRY(bind(d));
  if (!cu_is_dev(d, ptr, 0))
    return ddp__error(DDP_EINVAL, "ptr %p is not a live device allocation of cuda:%d", ptr, d->c->device);
  CU(cudaFree(ptr));
  return DDP_OK;
}

static ddp_status_t cu_host_alloc(ddp__device_t *d, size_t bytes, void **ptr) {
  DDP_TRY(bind(d));
  void *p = NULL;
  cudaError_t e = cudaMallocHost(&p, bytes);
  if (e != cudaSuccess) {
    char what[64];
    snprintf(what, sizeof what, "cudaMallocHost(%zu bytes)", bytes);
    return cu_fail(e == cudaErrorMemoryAllocation ? DDP_ENOMEM : DDP_ECUDA, e, what);
  }
  *ptr = p;
  return DDP_OK;
}

static ddp_status_t cu_host_free(ddp__device_t *d, void *ptr) {
  DDP_TRY(bind(d));
  if (mem_type(ptr, NULL) != cudaMemoryTypeHost)
    return ddp__error(DDP_EINVAL, "ptr %p is not a live pinned host allocation (ddp_host_alloc_pinned)", ptr);
  CU(cudaFreeHost(ptr));
  return DDP_OK;
}

/* CUDA handles cannot be validated without risking a crash; the application may pass its own. */
/* Any cudaStream_t / cudaEvent_t the application holds is valid here: nothing to look up. */
static ddp_status_t cu_check_stream(ddp__device_t *d, ddp_stream_t *h, const char *arg) {
  (void)d;
  (void)h;
  (void)arg;
  return DDP_OK;
}

static ddp_status_t cu_check_event(ddp__device_t *d, ddp_event_t *h, const char *arg) {
  (void)d;
  (void)h;
  (void)arg;
  return DDP_OK;
}

static ddp_status_t cu_stream_create(ddp__device_t *d, ddp_stream_t **out) {
  DDP_TRY(bind(d));
  cudaStream_t s;
  CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  *out = (ddp_stream_t *)s;
  return DDP_OK;
}

static ddp_status_t cu_stream_destroy(ddp__device_t *d, ddp_stream_t *s) {
  DDP_TRY(bind(d));
  CU(cudaStreamDestroy((cudaStream_t)s));
  return DDP_OK;
}

static ddp_status_t cu_stream_sync(ddp__device_t *d, ddp_stream_t *s) {
  DDP_TRY(bind(d));
  CU(cudaStreamSynchronize((cudaStream_t)s));
  return DDP_OK;
}

static ddp_status_t cu_event_create(ddp__device_t *d, ddp_event_t **out) {
  DDP_TRY(bind(d));
  cudaEvent_t e;
  CU(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  *out = (ddp_event_t *)e;
  return DDP_OK;
}

static ddp_status_t cu_event_destroy(ddp__device_t *d, ddp_event_t *e) {
  DDP_TRY(bind(d));
  CU(cudaEventDestroy((cudaEvent_t)e));
  return DDP_OK;
}

static ddp_status_t cu_event_record(ddp__device_t *d, ddp_event_t *e, ddp_stream_t *s) {
  DDP_TRY(bind(d));
  CU(cudaEventRecord((cudaEvent_t)e, (cudaStream_t)s));
  return DDP_OK;
}

static ddp_status_t cu_stream_wait(ddp__device_t *d, ddp_stream_t *s, ddp_event_t *e) {
  DDP_TRY(bind(d));
  CU(cudaStreamWaitEvent((cudaStream_t)s, (cudaEvent_t)e, 0));
  return DDP_OK;
}

static ddp_status_t cu_event_sync(ddp__device_t *d, ddp_event_t *e) {
  DDP_TRY(bind(d));
  CU(cudaEventSynchronize((cudaEvent_t)e));
  return DDP_OK;
}

static ddp_status_t cu_event_query(ddp__device_t *d, ddp_event_t *e, int *done) {
  DDP_TRY(bind(d));
  cudaError_t r = cudaEventQuery((cudaEvent_t)e);
  if (r == cudaErrorNotReady) {
    /* "Not yet" is recorded as the thread's last error: clear it, or the next kernel launch
     * on this thread (the launchers read cudaGetLastError) fails with "device not ready". */
    (void)cudaGetLastError();
    *done = 0;
    return DDP_OK;
  }
  if (r != cudaSuccess) return cu_fail(DDP_ECUDA, r, "cudaEventQuery");
  *done = 1;
  return DDP_OK;
}

static ddp_status_t cu_memcpy(ddp__device_t *d, void *dst, const void *src, size_t bytes,
                              ddp_stream_t *s) {
  DDP_TRY(bind(d));
  CU(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)s));
  return DDP_OK;
}

static ddp_status_t cu_memset(ddp__device_t *d, void *dst, int value, size_t bytes,
                              ddp_stream_t *s) {
  DDP_TRY(bind(d));
  CU(cudaMemsetAsync(dst, value, bytes, (cudaStream_t)s));
  return DDP_OK;
}

static ddp_status_t cu_host_func(ddp__device_t *d, ddp_stream_t *s, void (*fn)(void *), void *arg) {
  DDP_TRY(bind(d));
  CU(cudaLaunchHostFunc((cudaStream_t)s, fn, arg));
  return DDP_OK;
}

static ddp_status_t cu_reduce(ddp__device_t *d, void *dst, const void *src, size_t count,
                              ddp_dtype_t dtype, ddp_op_t op, ddp_stream_t *s) {
  DDP_TRY(bind(d));
  KERNEL(ddp__cuda_reduce(dst, src, count, (int)dtype, (int)op, s), "reduce");
  return DDP_OK;
}

static ddp_status_t cu_scale(ddp__device_t *d, void *buf, size_t count, ddp_dtype_t dtype,
                             double factor, int divide, ddp_stream_t *s) {
  DDP_TRY(bind(d));
  KERNEL(ddp__cuda_scale(buf, count, (int)dtype, factor, divide, s), "scale");
  return DDP_OK;
}

static ddp_status_t cu_convert(ddp__device_t *d, void *dst, ddp_dtype_t dst_dtype, const void *src,
                               ddp_dtype_t src_dtype, size_t count, ddp_stream_t *s) {
  DDP_TRY(bind(d));
  KERNEL(ddp__cuda_convert(dst, (int)dst_dtype, src, (int)src_dtype, count, s), "convert");
  return DDP_OK;
}

static ddp_status_t cu_nonfinite(ddp__device_t *d, const void *buf, size_t count, ddp_dtype_t dtype,
                                 int *flag, ddp_stream_t *s) {
  DDP_TRY(bind(d));
  KERNEL(ddp__cuda_nonfinite(buf, count, (int)dtype, flag, s), "nonfinite");
  return DDP_OK;
}

const ddp__devimpl_t ddp__devimpl_cuda = {
    .name = "cuda",
    .init = cu_init,
    .fini = cu_fini,
    .bind = bind,
    .dev_alloc = cu_dev_alloc,
    .dev_free = cu_dev_free,
    .host_alloc = cu_host_alloc,
    .host_free = cu_host_free,
    .is_dev = cu_is_dev,
    .check_stream = cu_check_stream,
    .check_event = cu_check_event,
    .stream_create = cu_stream_create,
    .stream_destroy = cu_stream_destroy,
    .stream_sync = cu_stream_sync,
    .event_create = cu_event_create,
    .event_destroy = cu_event_destroy,
    .event_record = cu_event_record,
    .stream_wait = cu_stream_wait,
    .event_sync = cu_event_sync,
    .event_query = cu_event_query,
    .memcpy_async = cu_memcpy,
    .memset_async = cu_memset,
    .host_func = cu_host_func,
    .reduce = cu_reduce,
    .scale = cu_scale,
    .convert = cu_convert,
    .nonfinite = cu_nonfinite,
};

#else
/* Host-only build: the CUDA implementation is not compiled (ISO C wants a declaration). */
typedef int ddp__device_cuda_unused_t;
#endif
