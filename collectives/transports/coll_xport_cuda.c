/* The CUDA-aware MPI transport: device pointers go straight to MPI_Isend/MPI_Irecv (never to
 * non-blocking MPI collectives, which Open MPI does not accept device memory for), and the
 * combining steps run as device kernels on the communicator's transport stream. Each step
 * waits for its stream before returning, because the algorithm's next send reads its result. */
#include "coll_device_internal.h"

static ddp_status_t xc_isend(ddp__ctx_t *x, const void *buf, size_t bytes, int peer, int tag,
                             ddp__xreq_t *req) {
  return ddp__xport_host.isend(x, buf, bytes, peer, tag, req);
}

static ddp_status_t xc_irecv(ddp__ctx_t *x, void *buf, size_t bytes, int peer, int tag,
                             ddp__xreq_t *req) {
  return ddp__xport_host.irecv(x, buf, bytes, peer, tag, req);
}

static ddp_status_t xc_wait(ddp__ctx_t *x, int n, ddp__xreq_t *reqs) {
  return ddp__xport_host.wait(x, n, reqs);
}

static ddp_status_t xc_reduce(ddp__ctx_t *x, void *dst, const void *src, size_t count,
                              ddp_dtype_t dtype, ddp_op_t op) {
  ddp__devcoll_t *dc = x->xstate;
  ddp__device_t *d = dc->d;
  if (count == 0) return DDP_OK;
  DDP_TRY(d->impl->reduce(d, dst, src, count, dtype, op, dc->s_h2d));
  return d->impl->stream_sync(d, dc->s_h2d);
}

static ddp_status_t xc_copy(ddp__ctx_t *x, void *dst, const void *src, size_t bytes) {
  ddp__devcoll_t *dc = x->xstate;
  ddp__device_t *d = dc->d;
  if (dst == src || bytes == 0) return DDP_OK;
  DDP_TRY(d->impl->memcpy_async(d, dst, src, bytes, dc->s_h2d));
  return d->impl->stream_sync(d, dc->s_h2d);
}

static ddp_status_t xc_scale(ddp__ctx_t *x, void *buf, size_t count, ddp_dtype_t dtype,
                             double divisor) {
  ddp__devcoll_t *dc = x->xstate;
  ddp__device_t *d = dc->d;
  if (count == 0) return DDP_OK;
  DDP_TRY(d->impl->scale(d, buf, count, dtype, divisor, 1, dc->s_h2d));
  return d->impl->stream_sync(d, dc->s_h2d);
}

static ddp_status_t xc_scratch(ddp__ctx_t *x, int slot, size_t bytes, void **ptr) {
  ddp__devcoll_t *dc = x->xstate;
  if (slot < 0 || slot >= DDP__SCRATCH_SLOTS)
    return ddp__error(DDP_EINTERNAL, "scratch slot %d out of range", slot);
  DDP_TRY(ddp__devcoll_devbuf(dc, &dc->dscratch[slot], &dc->dscratch_bytes[slot], bytes));
  *ptr = dc->dscratch[slot];
  return DDP_OK;
}

const ddp__xport_t ddp__xport_cuda = {
    .name = "cuda-aware",
    .isend = xc_isend,
    .irecv = xc_irecv,
    .wait = xc_wait,
    .reduce = xc_reduce,
    .copy = xc_copy,
    .scale = xc_scale,
    .scratch = xc_scratch,
};
