/* Internal interface of the device-memory collectives: the per-communicator state (streams,
 * events, pinned staging ring, device scratch, NCCL communicator) shared by the runners in
 * devcoll/ (coll_device.c: dispatch and ordering; coll_staged.c: the pinned-chunk pipeline;
 * coll_nccl.c) and, below them, the transports (transports/coll_xport_cuda.c: CUDA-aware MPI;
 * transports/coll_devbufs.c: buffers and waits both use). */
#ifndef DDP_COLL_DEVICE_INTERNAL_H
#define DDP_COLL_DEVICE_INTERNAL_H

#include "coll_state.h"
#include "device_internal.h"

#define DDP__STAGE_MAX 4 /* DDP_STAGING_DEPTH is 2..4 */

typedef struct ddp__devcoll {
  ddp__device_t *d;
  ddp__comm_t *c;
  /* Two streams so the copy to the host of chunk k+1 and the copy back of chunk k can run at
   * the same time (separate copy engines); s_h2d is also the CUDA-aware transport's stream. */
  ddp_stream_t *s_d2h, *s_h2d;
  ddp_event_t *ev_done; /* recorded after our last write: the caller's stream waits on it */
  ddp_event_t *ev_d2h[DDP__STAGE_MAX], *ev_h2d[DDP__STAGE_MAX];
  void *stage[DDP__STAGE_MAX]; /* pinned, stage_bytes each */
  size_t stage_bytes;
  void *hbuf; /* pinned, for the non-pipelined staged allgather */
  size_t hbuf_bytes;
  void *dscratch[DDP__SCRATCH_SLOTS]; /* device memory for the CUDA-aware transport */
  size_t dscratch_bytes[DDP__SCRATCH_SLOTS];
  void *nccl; /* ncclComm_t, created on first use (failures: cs->nccl_status, sticky) */
} ddp__devcoll_t;

/* The CUDA-aware MPI transport: device pointers straight to MPI_Isend/Irecv, reductions by
 * the device kernels on dc->s_h2d (x->xstate is the ddp__devcoll_t). */
DDP_HIDDEN extern const ddp__xport_t ddp__xport_cuda;

/* ---- transports/coll_devbufs.c ---- */
/* Waits on the host for `ev` under the DDP_TIMEOUT_S watchdog (answering stall probes while it
 * waits), instead of blocking in cudaEventSynchronize where a stuck caller's stream would hang
 * the job silently. `what` names the wait in a timeout report. */
DDP_HIDDEN ddp_status_t ddp__devcoll_wait(ddp__devcoll_t *dc, ddp_event_t *ev, const char *what);
/* The loop behind it: calls test(arg, &done) until done (or an error from test), yielding and
 * then sleeping 20 us between calls, under the same watchdog; `algo` names it in a report. */
DDP_HIDDEN ddp_status_t ddp__devcoll_spin(ddp__devcoll_t *dc, const char *what, const char *algo,
                                          ddp_status_t (*test)(void *arg, int *done), void *arg);
/* The communicator's device-collective state, created on first use (streams, events;
 * devcoll/coll_device.c). */
DDP_HIDDEN ddp_status_t ddp__devcoll_get(ddp__comm_t *c, ddp__devcoll_t **out);

/* Pinned host memory that grows (freed and re-allocated when too small). */
DDP_HIDDEN ddp_status_t ddp__devcoll_pinned(ddp__devcoll_t *dc, void **buf, size_t *have,
                                            size_t want);
/* Device memory that grows, likewise. */
DDP_HIDDEN ddp_status_t ddp__devcoll_devbuf(ddp__devcoll_t *dc, void **buf, size_t *have,
                                            size_t want);

/* Work done on the host on one staged chunk: `buf` holds elements [off, off+count) of the
 * collective's buffer in pinned memory. */
typedef ddp_status_t (*ddp__stage_fn)(void *arg, void *buf, size_t off, size_t count);

/* The staging pipeline over `count` elements of `es` bytes, in chunks of DDP_STAGING_CHUNK
 * bytes, DDP_STAGING_DEPTH deep: copies chunk k of `src` (device; NULL: nothing to copy in)
 * to a pinned slot, runs fn on it, and copies the part of it that falls in elements
 * [lo, hi) back to dst + (element - lo) (dst NULL: nothing copied back). The copy in of chunk
 * k+1.. overlaps fn on chunk k and the copy back of chunk k-1. The streams already wait for
 * the call's input event; on return every copy has finished. */
DDP_HIDDEN ddp_status_t ddp__staged_pipeline(ddp__devcoll_t *dc, const void *src, void *dst,
                                             size_t count, size_t es, size_t lo, size_t hi,
                                             ddp__stage_fn fn, void *arg);

/* The runners coll_device.c calls: staged (devcoll/coll_staged.c) and NCCL (devcoll/coll_nccl.c). */
DDP_HIDDEN ddp_status_t ddp__staged_run(ddp__devcoll_t *dc, const ddp__call_t *call);
/* NCCL runs on dc->s_h2d after call->ev_in, and the caller's `stream` waits for it; returns
 * when it has finished (watched for NCCL's asynchronous errors and by the watchdog). */
DDP_HIDDEN ddp_status_t ddp__nccl_run(ddp__devcoll_t *dc, const ddp__call_t *call,
                                      ddp_stream_t *stream);
DDP_HIDDEN void ddp__nccl_free(ddp__devcoll_t *dc);

#endif /* DDP_COLL_DEVICE_INTERNAL_H */
