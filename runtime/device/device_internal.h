/* Internal interface of the device layer: one table of operations with two implementations
 * (CUDA in device_cuda.c, the host emulation in device_emu.c), the per-communicator device
 * state, and the hooks the device-memory collectives (collectives/coll_device.c) use. */
#ifndef DDP_DEVICE_INTERNAL_H
#define DDP_DEVICE_INTERNAL_H

#include "ddp_device.h"
#include "ddp_internal.h"
#include "kernels_internal.h"

typedef struct ddp__device ddp__device_t;

/* The device layer's hooks on the communicator (ddp__comm_layer_t): the probe binds this rank
 * to a GPU (device_probe.c: c->device, gpu_count, cuda_aware, shared-GPU facts), init picks
 * the implementation and creates c->dev, fini frees it. */
DDP_HIDDEN ddp_status_t ddp__device_probe(ddp__comm_t *c);
DDP_HIDDEN ddp_status_t ddp__device_comm_init(ddp__comm_t *c);
DDP_HIDDEN void ddp__device_comm_fini(ddp__comm_t *c);
/* Makes the communicator's device current on the calling thread (no-op without a device). */
DDP_HIDDEN ddp_status_t ddp__device_bind_thread(ddp__comm_t *c);

/* The CUDA backend (device_cuda.c, device_probe.c's binding) and the NCCL transport
 * (collectives/transports/coll_nccl.c) are compiled in CUDA builds, and against the fake CUDA
 * runtime and NCCL of tests/fake_cuda (DDP_CUDA_FAKE) by the unit tests of their error
 * handling, which run without a GPU. */
#ifdef DDP_CUDA_FAKE
#define DDP__CUDA_BACKEND 1
#define DDP__NCCL_BACKEND 1
#else
#define DDP__CUDA_BACKEND DDP_HAVE_CUDA
#define DDP__NCCL_BACKEND (DDP_HAVE_CUDA && DDP_HAVE_NCCL)
#endif

/* Every entry gets arguments already checked by device.c (live handles where the
 * implementation can tell, non-NULL pointers, valid dtypes/ops). Asynchronous entries queue
 * work on `stream` (NULL = the implementation's default stream). */
typedef struct ddp__devimpl {
  const char *name;
  ddp_status_t (*init)(ddp__device_t *d);
  void (*fini)(ddp__device_t *d);
  /* Makes the device current on the calling thread (cudaSetDevice). Every thread that works
   * on the device does this first: the public calls on the caller's thread, the progress
   * engine when it starts, a blocking collective on the caller's thread. CUDA-aware MPI and
   * NCCL then find the right device current too. */
  ddp_status_t (*bind)(ddp__device_t *d);
  ddp_status_t (*dev_alloc)(ddp__device_t *d, size_t bytes, void **ptr);
  ddp_status_t (*dev_free)(ddp__device_t *d, void *ptr);
  ddp_status_t (*host_alloc)(ddp__device_t *d, size_t bytes, void **ptr);
  ddp_status_t (*host_free)(ddp__device_t *d, void *ptr);
  /* 1 when [ptr, ptr+bytes) lies in device memory (bytes 0: just ptr). */
  int (*is_dev)(ddp__device_t *d, const void *ptr, size_t bytes);
  /* Handle checks: DDP_OK or DDP_EINVAL naming `arg` (CUDA cannot check; it accepts). */
  ddp_status_t (*check_stream)(ddp__device_t *d, ddp_stream_t *s, const char *arg);
  ddp_status_t (*check_event)(ddp__device_t *d, ddp_event_t *e, const char *arg);
  ddp_status_t (*stream_create)(ddp__device_t *d, ddp_stream_t **s);
  ddp_status_t (*stream_destroy)(ddp__device_t *d, ddp_stream_t *s);
  ddp_status_t (*stream_sync)(ddp__device_t *d, ddp_stream_t *s);
  ddp_status_t (*event_create)(ddp__device_t *d, ddp_event_t **e);
  ddp_status_t (*event_destroy)(ddp__device_t *d, ddp_event_t *e);
  ddp_status_t (*event_record)(ddp__device_t *d, ddp_event_t *e, ddp_stream_t *s);
  ddp_status_t (*stream_wait)(ddp__device_t *d, ddp_stream_t *s, ddp_event_t *e);
  ddp_status_t (*event_sync)(ddp__device_t *d, ddp_event_t *e);
  ddp_status_t (*event_query)(ddp__device_t *d, ddp_event_t *e, int *done);
  ddp_status_t (*memcpy_async)(ddp__device_t *d, void *dst, const void *src, size_t bytes,
                               ddp_stream_t *s);
  ddp_status_t (*memset_async)(ddp__device_t *d, void *dst, int value, size_t bytes,
                               ddp_stream_t *s);
  ddp_status_t (*host_func)(ddp__device_t *d, ddp_stream_t *s, void (*fn)(void *), void *arg);
  /* dst[i] = dst[i] op src[i]; op != DDP_AVG. */
  ddp_status_t (*reduce)(ddp__device_t *d, void *dst, const void *src, size_t count,
                         ddp_dtype_t dtype, ddp_op_t op, ddp_stream_t *s);
  /* divide == 0: buf[i] *= factor (floating dtypes); divide == 1: buf[i] /= factor exactly as
   * ddp__scale_host does (all dtypes, integers truncated), for avg. */
  ddp_status_t (*scale)(ddp__device_t *d, void *buf, size_t count, ddp_dtype_t dtype,
                        double factor, int divide, ddp_stream_t *s);
  ddp_status_t (*convert)(ddp__device_t *d, void *dst, ddp_dtype_t dst_dtype, const void *src,
                          ddp_dtype_t src_dtype, size_t count, ddp_stream_t *s);
  ddp_status_t (*nonfinite)(ddp__device_t *d, const void *buf, size_t count, ddp_dtype_t dtype,
                            int *flag, ddp_stream_t *s);
} ddp__devimpl_t;

DDP_HIDDEN extern const ddp__devimpl_t ddp__devimpl_emu;
#if DDP__CUDA_BACKEND
DDP_HIDDEN extern const ddp__devimpl_t ddp__devimpl_cuda;
#endif

/* The device collectives' state (collectives/coll_device.c: streams, staging buffers, NCCL),
 * created on the first device collective and freed by the collectives' fini hook, which runs
 * before the device's: the device layer never looks inside. */
struct ddp__devcoll;

struct ddp__device {
  ddp__comm_t *c;
  ddp_device_kind_t kind;
  const ddp__devimpl_t *impl;
  void *state;               /* the implementation's */
  char desc[128];
  int transport_set;            /* ddp_device_set_transport was called */
  ddp__transport_t transport;   /* then: its choice, else DDP_TRANSPORT */
  struct ddp__devcoll *coll; /* created on the first device collective */
  /* Input events of posted device collectives: recorded on the caller's stream when the
   * collective is posted (ddp__device_event_get), returned when it has run. */
  pthread_mutex_t pool_mu;
  ddp_event_t *pool[16];
  int npool;
  /* NCCL's state is sticky: once creating or running the NCCL communicator failed, every
   * later nccl collective fails at once with this reason instead of trying again. */
  ddp_status_t nccl_status;
  char nccl_reason[256];
};

/* An event from the pool (created when the pool is empty) and back. */
DDP_HIDDEN ddp_status_t ddp__device_event_get(ddp__device_t *d, ddp_event_t **ev);
DDP_HIDDEN void ddp__device_event_put(ddp__device_t *d, ddp_event_t *ev);

/* Resolves DDP_TRANSPORT (or `requested`, "auto|mpi|staged|nccl") for this device: DDP_OK with
 * *t set, or DDP_ENOTSUP/DDP_EINVAL explaining why that transport cannot run here. */
DDP_HIDDEN ddp_status_t ddp__device_pick_transport(ddp__comm_t *c, const char *requested,
                                                   ddp__transport_t *t);
DDP_HIDDEN const char *ddp__transport_name(ddp__transport_t t);

#endif /* DDP_DEVICE_INTERNAL_H */
