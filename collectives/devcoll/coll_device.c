/* Device-memory collectives: picks the transport (DDP_TRANSPORT or ddp_device_set_transport:
 * CUDA-aware MPI, staged through pinned host chunks, or NCCL), orders the collective after the
 * work already queued on the caller's stream with an event (never a device-wide sync), runs it,
 * and makes the caller's stream wait for the result. Owns the device collectives' state
 * (cs->devcoll) and the transport choice (ddp_device_set_transport, DDP_TRANSPORT). */
#include <stdlib.h>
#include <string.h>

#include "coll_device_internal.h"

static const char *const kind_names[] = {"allreduce", "broadcast", "allgather", "reduce_scatter",
                                         "barrier"};

/* ---- state --------------------------------------------------------------------------------- */
ddp_status_t ddp__devcoll_get(ddp__comm_t *c, ddp__devcoll_t **out) {
  ddp__device_t *d = c->dev;
  ddp__coll_t *cs = c->coll;
  if (cs->devcoll) {
    *out = cs->devcoll;
    return DDP_OK;
  }
  ddp__devcoll_t *dc = calloc(1, sizeof *dc);
  if (!dc) return ddp__error(DDP_ENOMEM, "device collective state: out of memory");
  dc->d = d;
  dc->c = c;
  cs->devcoll = dc; /* partially built state is freed by ddp__devcoll_free */
  DDP_TRY(d->impl->stream_create(d, &dc->s_d2h));
  DDP_TRY(d->impl->stream_create(d, &dc->s_h2d));
  DDP_TRY(d->impl->event_create(d, &dc->ev_done));
  for (int i = 0; i < DDP__STAGE_MAX; i++) {
    DDP_TRY(d->impl->event_create(d, &dc->ev_d2h[i]));
    DDP_TRY(d->impl->event_create(d, &dc->ev_h2d[i]));
  }
  *out = dc;
  return DDP_OK;
}

void ddp__devcoll_free(ddp__coll_t *cs) {
  ddp__devcoll_t *dc = cs->devcoll;
  if (!dc) return;
  ddp__device_t *d = dc->d;
  d->impl->bind(d);
  if (dc->s_d2h) d->impl->stream_sync(d, dc->s_d2h);
  if (dc->s_h2d) d->impl->stream_sync(d, dc->s_h2d);
  ddp__nccl_free(dc);
  for (int i = 0; i < DDP__STAGE_MAX; i++)
    if (dc->stage[i]) d->impl->host_free(d, dc->stage[i]);
  if (dc->hbuf) d->impl->host_free(d, dc->hbuf);
  for (int i = 0; i < DDP__SCRATCH_SLOTS; i++)
    if (dc->dscratch[i]) d->impl->dev_free(d, dc->dscratch[i]);
  for (int i = 0; i < DDP__STAGE_MAX; i++) {
    if (dc->ev_d2h[i]) d->impl->event_destroy(d, dc->ev_d2h[i]);
    if (dc->ev_h2d[i]) d->impl->event_destroy(d, dc->ev_h2d[i]);
  }
  if (dc->ev_done) d->impl->event_destroy(d, dc->ev_done);
  if (dc->s_d2h) d->impl->stream_destroy(d, dc->s_d2h);
  if (dc->s_h2d) d->impl->stream_destroy(d, dc->s_h2d);
  free(dc);
  cs->devcoll = NULL;
}

/* ---- CUDA-aware MPI transport ------------------------------------------------------------- */
static ddp_status_t mpi_run(ddp__devcoll_t *dc, const ddp__call_t *call) {
  ddp__comm_t *c = dc->c;
  size_t es = ddp_dtype_size(call->a.dtype), n = call->a.count;
  ddp__ctx_t x;
  ddp__ctx_world(&x, c, kind_names[call->kind], n * es, call->opts.tag);
  x.xp = &ddp__xport_cuda;
  x.xstate = dc;
  x.mem = DDP_MEM_CUDA;
  x.desc.algo = "cuda-aware";
  return ddp__coll_exec(&x, call);
}

/* ---- dispatch ------------------------------------------------------------------------------ */
static ddp_status_t check_buf(ddp__device_t *d, const void *p, size_t bytes, const char *arg,
                              ddp__coll_kind_t kind) {
  if (bytes == 0) return DDP_OK;
  if (!d->impl->is_dev(d, p, bytes))
    return ddp__error(DDP_EINVAL, "%s: %s %p (%zu bytes) is not device memory of this "
                                  "communicator, but opts->mem is cuda",
                      kind_names[kind], arg, p, bytes);
  return DDP_OK;
}

static ddp_status_t barrier_host(ddp__comm_t *c, const ddp__call_t *call) {
  ddp__ctx_t x;
  ddp__ctx_world(&x, c, "barrier", 0, -1);
  return ddp__coll_exec(&x, call);
}

static ddp_status_t device_run(ddp__comm_t *c, const ddp__call_t *call, ddp_transport_t t,
                               ddp_stream_t *stream) {
  ddp__device_t *d = c->dev;
  ddp__devcoll_t *dc = NULL;
  DDP_TRY(ddp__devcoll_get(c, &dc));
  /* Everything the caller queued on its stream before posting this call comes first: the
   * input event was recorded then (ddp__coll_device_post), not now. */
  ddp_event_t *ev_in = call->ev_in;
  if (!ev_in) return ddp__error(DDP_EINTERNAL, "device collective without an input event");
  if (call->kind == DDP__COLL_BARRIER) {
    DDP_TRY(ddp__devcoll_wait(dc, ev_in, "barrier: caller's stream"));
    return barrier_host(c, call);
  }
  ddp_status_t st = DDP_OK;
  if (t == DDP_TRANSPORT_NCCL) return ddp__nccl_run(dc, call, stream);
  DDP_TRY(d->impl->stream_wait(d, dc->s_d2h, ev_in));
  DDP_TRY(d->impl->stream_wait(d, dc->s_h2d, ev_in));
  if (t == DDP_TRANSPORT_STAGED) {
    st = ddp__staged_run(dc, call);
  } else {
    /* MPI reads the device buffers directly: the host waits for the caller's stream work
     * (this event only, not the whole device) before posting anything. */
    DDP_TRY(ddp__devcoll_wait(dc, ev_in, "device collective: caller's stream"));
    st = mpi_run(dc, call);
  }
  if (st != DDP_OK) {
    if (st == DDP_ETIMEDOUT) return st; /* the streams may wait forever: do not join them */
    d->impl->stream_sync(d, dc->s_d2h);
    d->impl->stream_sync(d, dc->s_h2d);
    return st;
  }
  /* Later work on the caller's stream sees the result. */
  DDP_TRY(d->impl->event_record(d, dc->ev_done, dc->s_h2d));
  DDP_TRY(d->impl->stream_wait(d, stream, dc->ev_done));
  return ddp__devcoll_wait(dc, dc->ev_done, "device collective: copies back");
}

static ddp_status_t no_device(ddp__comm_t *c, ddp__coll_kind_t kind) {
  return ddp__error(DDP_ENOTSUP, "%s with opts->mem cuda: this communicator has no device "
                                 "(%d CUDA device(s) visible%s; DDP_DEVICE_EMULATE=1 emulates one)",
                    kind_names[kind], c->gpu_count,
                    DDP_HAVE_CUDA ? "" : ", library built without CUDA");
}

ddp_status_t ddp__coll_device_post(ddp__comm_t *c, ddp__coll_kind_t kind, void *stream,
                                   void **ev_in) {
  ddp__device_t *d = c->dev;
  *ev_in = NULL;
  if ((int)kind < 0 || kind > DDP__COLL_BARRIER)
    return ddp__error(DDP_EINVAL, "device collective: kind %d is invalid", (int)kind);
  if (!d) return no_device(c, kind);
  DDP_TRY(d->impl->bind(d));
  DDP_TRY(d->impl->check_stream(d, stream, "opts->stream"));
  ddp_event_t *ev = NULL;
  DDP_TRY(ddp__device_event_get(d, &ev));
  ddp_status_t st = d->impl->event_record(d, ev, stream);
  if (st != DDP_OK) {
    ddp__device_event_put(d, ev);
    return st;
  }
  *ev_in = ev;
  return DDP_OK;
}

void ddp__coll_device_release(ddp__comm_t *c, void *ev_in) {
  if (c->dev && ev_in) ddp__device_event_put(c->dev, ev_in);
}

ddp_status_t ddp__coll_device_run(ddp__comm_t *c, struct ddp__coll *cs,
                                  const ddp__call_t *call) {
  (void)cs;
  if (!call) return ddp__error(DDP_EINVAL, "device collective: call is NULL");
  if ((int)call->kind < 0 || call->kind > DDP__COLL_BARRIER)
    return ddp__error(DDP_EINVAL, "device collective: kind %d is invalid", (int)call->kind);
  ddp__device_t *d = c->dev;
  const char *kn = kind_names[call->kind];
  if (!d) return no_device(c, call->kind);
  ddp_transport_t t = DDP_TRANSPORT_AUTO;
  DDP_TRY(ddp__coll_pick_transport(c, DDP_TRANSPORT_AUTO, &t));
  ddp_stream_t *stream = call->opts.stream;
  DDP_TRY(d->impl->check_stream(d, stream, "opts->stream"));
  size_t es = call->kind == DDP__COLL_BARRIER ? 1 : ddp_dtype_size(call->a.dtype);
  size_t n = call->a.count, size = (size_t)c->size;
  switch (call->kind) {
    case DDP__COLL_ALLREDUCE:
      DDP_TRY(check_buf(d, call->a.send, n * es, "send", call->kind));
      DDP_TRY(check_buf(d, call->a.recv, n * es, "recv", call->kind));
      break;
    case DDP__COLL_BROADCAST:
      DDP_TRY(check_buf(d, call->a.recv, n * es, "buf", call->kind));
      if (call->root < 0 || call->root >= c->size)
        return ddp__error(DDP_EINVAL, "broadcast: root %d is not a rank (0..%d)", call->root,
                          c->size - 1);
      break;
    case DDP__COLL_ALLGATHER:
      DDP_TRY(check_buf(d, call->a.send, n * es, "send", call->kind));
      DDP_TRY(check_buf(d, call->a.recv, n * es * size, "recv", call->kind));
      break;
    case DDP__COLL_REDUCE_SCATTER:
      DDP_TRY(check_buf(d, call->a.send, n * es * size, "send", call->kind));
      DDP_TRY(check_buf(d, call->a.recv, n * es, "recv", call->kind));
      break;
    case DDP__COLL_BARRIER: break;
  }
  if (call->kind != DDP__COLL_BARRIER && n == 0) return DDP_OK;
  char args[96];
  if (c->timeline) {
    snprintf(args, sizeof args, "{\"transport\":\"%s\",\"bytes\":%zu}", ddp_transport_name(t),
             n * es);
    ddp__timeline_event(c->timeline, 'B', kn, "device", args);
  }
  ddp_status_t st = device_run(c, call, t, stream);
  if (c->timeline) ddp__timeline_event(c->timeline, 'E', kn, "device", NULL);
  return st;
}

/* ---- the transport choice ------------------------------------------------------------------ */
/* `t` as it would run here (AUTO: picked from what MPI can do), or why it cannot. */
static ddp_status_t resolve_transport(ddp__comm_t *c, ddp_transport_t t, ddp_transport_t *out) {
  ddp__coll_t *cs = c->coll;
  if ((unsigned)t >= DDP_TRANSPORT_COUNT)
    return ddp__error(DDP_EINVAL, "transport %d is not a ddp_transport_t (valid: 0..%d, auto mpi "
                                  "staged nccl)", (int)t, DDP_TRANSPORT_COUNT - 1);
  ddp__device_t *d = c->dev;
  if (!d)
    return ddp__error(DDP_ENOTSUP, "no device on this communicator: device transports need a "
                                   "GPU or DDP_DEVICE_EMULATE=1");
  /* The emulation's "device memory" is host memory, so MPI can always take it. */
  int aware = c->cuda_aware || d->kind == DDP_DEVICE_EMULATED;
  switch (t) {
    case DDP_TRANSPORT_AUTO:
    case DDP_TRANSPORT_COUNT: /* refused above */
      t = c->cuda_aware ? DDP_TRANSPORT_MPI : DDP_TRANSPORT_STAGED;
      break;
    case DDP_TRANSPORT_MPI:
      if (!aware)
        return ddp__error(DDP_ENOTSUP, "transport 'mpi' needs CUDA-aware MPI, but %s (set "
                                       "DDP_CUDA_AWARE=1 to force it, or use 'staged')",
                          c->cuda_aware_reason);
      break;
    case DDP_TRANSPORT_STAGED: break;
    case DDP_TRANSPORT_NCCL:
      if (c->gpu_shared)
        return ddp__error(DDP_ENOTSUP, "transport 'nccl': %s", c->gpu_shared_reason);
      if (cs->nccl_status != DDP_OK)
        return ddp__error(DDP_ENOTSUP, "transport 'nccl' failed on this communicator before "
                                       "and is not tried again: %s", cs->nccl_reason);
      if (!DDP_HAVE_NCCL)
        return ddp__error(DDP_ENOTSUP, "transport 'nccl': this library was built without NCCL");
      if (d->kind != DDP_DEVICE_CUDA)
        return ddp__error(DDP_ENOTSUP, "transport 'nccl' needs a real CUDA device (the device "
                                       "is %s)", d->desc);
      break;
  }
  *out = t;
  return DDP_OK;
}

ddp_status_t ddp__coll_pick_transport(ddp__comm_t *c, ddp_transport_t requested,
                                      ddp_transport_t *out) {
  ddp__coll_t *cs = c->coll;
  ddp_transport_t t = requested;
  if (t == DDP_TRANSPORT_AUTO) t = cs->transport_set ? cs->transport : c->cfg.transport;
  return resolve_transport(c, t, out);
}

ddp_status_t ddp_device_transport(ddp_comm_t *comm, ddp_transport_t requested,
                                  ddp_transport_t *out) {
  ddp__comm_t *c = NULL;
  DDP_TRY(ddp__comm_get(comm, "comm", &c));
  DDP_CHECK_ARG(out != NULL, "out is NULL");
  DDP_CHECK_ARG((unsigned)requested < DDP_TRANSPORT_COUNT,
                "requested %d is not a ddp_transport_t (valid: 0..%d)", (int)requested,
                DDP_TRANSPORT_COUNT - 1);
  ddp_transport_t t = DDP_TRANSPORT_AUTO;
  DDP_TRY(ddp__coll_pick_transport(c, requested, &t));
  *out = t;
  return DDP_OK;
}

ddp_status_t ddp_device_set_transport(ddp_comm_t *comm, ddp_transport_t transport) {
  ddp__comm_t *c = NULL;
  DDP_TRY(ddp__comm_get(comm, "comm", &c));
  DDP_CHECK_ARG((unsigned)transport < DDP_TRANSPORT_COUNT,
                "transport %d is not a ddp_transport_t (valid: 0..%d)", (int)transport,
                DDP_TRANSPORT_COUNT - 1);
  ddp_transport_t t = DDP_TRANSPORT_AUTO;
  /* AUTO picks afresh, ignoring an earlier choice and DDP_TRANSPORT. */
  DDP_TRY(resolve_transport(c, transport, &t));
  c->coll->transport = t;
  c->coll->transport_set = 1;
  return DDP_OK;
}
