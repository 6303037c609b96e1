/* Device-memory collectives: picks the transport (DDP_TRANSPORT or ddp_device_set_transport:
 * CUDA-aware MPI, staged through pinned host chunks, or NCCL), orders the collective after the
 * work already queued on the caller's stream with an event (never a device-wide sync), runs it,
 * and makes the caller's stream wait for the result. Also the transport-neutral broadcast and
 * allgather used by both MPI paths. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll_device_internal.h"

static const char *const kind_names[] = {"allreduce", "broadcast", "allgather", "reduce_scatter",
                                         "barrier"};

/* ---- state --------------------------------------------------------------------------------- */
ddp_status_t ddp__devcoll_get(ddp__comm_t *c, ddp__devcoll_t **out) {
  ddp__device_t *d = c->dev;
  if (d->coll) {
    *out = d->coll;
    return DDP_OK;
  }
  ddp__devcoll_t *dc = calloc(1, sizeof *dc);
  if (!dc) return ddp__error(DDP_ENOMEM, "device collective state: out of memory");
  dc->d = d;
  dc->c = c;
  d->coll = dc; /* partially built state is freed by ddp__devcoll_free */
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

void ddp__devcoll_free(ddp__comm_t *c) {
  ddp__device_t *d = c->dev;
  ddp__devcoll_t *dc = d ? d->coll : NULL;
  if (!dc) return;
  d->impl->bind(d);
  if (dc->s_d2h) d->impl->stream_sync(d, dc->s_d2h);
  if (dc->s_h2d) d->impl->stream_sync(d, dc->s_h2d);
  ddp__nccl_free(dc);
  for (int i = 0; i < DDP__STAGE_MAX; i++)
    if (dc->stage[i]) d->impl->host_free(d, dc->stage[i]);
  if (dc->hbuf) d->impl->host_free(d, dc->hbuf);
  for (int i = 0; i < DDP__SCRATCH_SLOTS; i++)
    if (dc->dscratch[i]) d->impl->dev_free(d, dc->dscratch[i]);
  if (dc->dtmp) d->impl->dev_free(d, dc->dtmp);
  for (int i = 0; i < DDP__STAGE_MAX; i++) {
    if (dc->ev_d2h[i]) d->impl->event_destroy(d, dc->ev_d2h[i]);
    if (dc->ev_h2d[i]) d->impl->event_destroy(d, dc->ev_h2d[i]);
  }
  if (dc->ev_done) d->impl->event_destroy(d, dc->ev_done);
  if (dc->s_d2h) d->impl->stream_destroy(d, dc->s_d2h);
  if (dc->s_h2d) d->impl->stream_destroy(d, dc->s_h2d);
  free(dc);
  d->coll = NULL;
}

ddp_status_t ddp__devcoll_spin(ddp__devcoll_t *dc, const char *what, const char *algo,
                               ddp_status_t (*test)(void *arg, int *done), void *arg) {
  int done = 0;
  DDP_TRY(test(arg, &done));
  if (done) return DDP_OK;
  ddp__wait_desc_t desc = {dc->c->coll ? dc->c->coll->seq : 0, what, algo, 0, -1, NULL};
  double t0 = ddp__now();
  for (unsigned spins = 1;; spins++) {
    DDP_TRY(test(arg, &done));
    if (done) return DDP_OK;
    if ((spins & 63) == 0) DDP_TRY(ddp__deadline_check(dc->c, t0, &desc));
    if (spins < 256) {
      sched_yield();
    } else {
      struct timespec ts = {0, 20000}; /* 20 us: a copy or kernel, not a busy core */
      nanosleep(&ts, NULL);
    }
  }
}

typedef struct {
  ddp__device_t *d;
  ddp_event_t *ev;
} event_arg_t;

static ddp_status_t event_done(void *arg, int *done) {
  event_arg_t *a = arg;
  return a->d->impl->event_query(a->d, a->ev, done);
}

ddp_status_t ddp__devcoll_wait(ddp__devcoll_t *dc, ddp_event_t *ev, const char *what) {
  event_arg_t a = {dc->d, ev};
  return ddp__devcoll_spin(dc, what, "device-event", event_done, &a);
}

ddp_status_t ddp__devcoll_pinned(ddp__devcoll_t *dc, void **buf, size_t *have, size_t want) {
  if (*buf && *have >= want) return DDP_OK;
  ddp__device_t *d = dc->d;
  if (*buf) {
    DDP_TRY(d->impl->host_free(d, *buf));
    *buf = NULL;
    *have = 0;
  }
  DDP_TRY(d->impl->host_alloc(d, want ? want : 64, buf));
  *have = want;
  return DDP_OK;
}

ddp_status_t ddp__devcoll_devbuf(ddp__devcoll_t *dc, void **buf, size_t *have, size_t want) {
  if (*buf && *have >= want) return DDP_OK;
  ddp__device_t *d = dc->d;
  if (*buf) {
    DDP_TRY(d->impl->dev_free(d, *buf));
    *buf = NULL;
    *have = 0;
  }
  DDP_TRY(d->impl->dev_alloc(d, want ? want : 64, buf));
  *have = want;
  return DDP_OK;
}

/* ---- transport-neutral algorithms --------------------------------------------------------- */
#define TAG_BCAST 0x6401
#define TAG_AG 0x6402

ddp_status_t ddp__dev_bcast_tree(ddp__ctx_t *x, void *buf, size_t bytes, int root) {
  int size = x->size, vr = (x->rank - root + size) % size;
  if (size == 1 || bytes == 0) return DDP_OK;
  /* Binomial tree: receive from the parent, then send to the children, largest first. */
  int mask = 1;
  while (mask < size) {
    if (vr & mask) {
      ddp__xreq_t q;
      DDP_TRY(x->xp->irecv(x, buf, bytes, (vr - mask + root) % size, TAG_BCAST, &q));
      DDP_TRY(x->xp->wait(x, 1, &q));
      break;
    }
    mask <<= 1;
  }
  ddp__xreq_t sq[32];
  int ns = 0;
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (vr + mask < size) {
      DDP_TRY(x->xp->isend(x, buf, bytes, (vr + mask + root) % size, TAG_BCAST, &sq[ns]));
      ns++;
    }
  }
  return x->xp->wait(x, ns, sq);
}

ddp_status_t ddp__dev_allgather_ring(ddp__ctx_t *x, void *recv, size_t blk) {
  int size = x->size, rank = x->rank;
  if (size == 1 || blk == 0) return DDP_OK;
  int right = (rank + 1) % size, left = (rank - 1 + size) % size;
  char *b = recv;
  for (int s = 0; s < size - 1; s++) {
    int sb = (rank - s + size) % size, rb = (rank - s - 1 + size) % size;
    ddp__xreq_t q[2];
    DDP_TRY(x->xp->irecv(x, b + (size_t)rb * blk, blk, left, TAG_AG, &q[0]));
    DDP_TRY(x->xp->isend(x, b + (size_t)sb * blk, blk, right, TAG_AG, &q[1]));
    DDP_TRY(x->xp->wait(x, 2, q));
  }
  return DDP_OK;
}

/* ---- CUDA-aware MPI transport ------------------------------------------------------------- */
static ddp_status_t dev_allreduce(ddp__ctx_t *x, const ddp__dev_call_t *call, const void *send,
                                  void *recv, size_t count) {
  ddp__comm_t *c = x->c;
  const char *want = call->opts ? call->opts->algo : NULL;
  if (!want || !*want || !strcmp(want, "auto")) want = c->cfg.allreduce_algo;
  size_t bytes = count * ddp_dtype_size(call->dtype);
  if (!want || !*want || !strcmp(want, "auto")) want = bytes >= ((size_t)256 << 10) ? "ring" : "rhd";
  if (strcmp(want, "ring") != 0 && strcmp(want, "rhd") != 0)
    return ddp__error(DDP_EINVAL, "allreduce algorithm '%s' cannot run on device buffers with "
                                  "transport 'mpi' (Open MPI's non-blocking collectives and "
                                  "node-shared windows do not take device memory): use ring or rhd",
                      want);
  ddp__ar_t a = {send, recv, count, call->dtype, call->op == DDP_AVG ? DDP_SUM : call->op};
  const ddp__algo_t *alg = NULL;
  DDP_TRY(ddp__select(c, want, x, &a, &alg));
  x->desc.algo = alg->name;
  DDP_TRY(alg->run(x, &a));
  if (call->op == DDP_AVG) DDP_TRY(x->xp->scale(x, recv, count, call->dtype, (double)x->size));
  return DDP_OK;
}

static ddp_status_t mpi_run(ddp__devcoll_t *dc, const ddp__dev_call_t *call) {
  ddp__comm_t *c = dc->c;
  size_t es = ddp_dtype_size(call->dtype), n = call->count;
  ddp__ctx_t x;
  ddp__ctx_world(&x, c, kind_names[call->kind], n * es, call->opts ? call->opts->tag : -1);
  x.xp = &ddp__xport_cuda;
  x.xstate = dc;
  x.mem = DDP_MEM_CUDA;
  x.desc.algo = "cuda-aware";
  switch (call->kind) {
    case DDP__COLL_ALLREDUCE: return dev_allreduce(&x, call, call->send, call->recv, n);
    case DDP__COLL_BROADCAST: return ddp__dev_bcast_tree(&x, call->recv, n * es, call->root);
    case DDP__COLL_ALLGATHER: {
      char *mine = (char *)call->recv + (size_t)c->rank * n * es;
      DDP_TRY(x.xp->copy(&x, mine, call->send, n * es));
      return ddp__dev_allgather_ring(&x, call->recv, n * es);
    }
    case DDP__COLL_REDUCE_SCATTER: {
      size_t total = n * (size_t)c->size;
      DDP_TRY(ddp__devcoll_devbuf(dc, &dc->dtmp, &dc->dtmp_bytes, total * es));
      DDP_TRY(dev_allreduce(&x, call, call->send, dc->dtmp, total));
      return x.xp->copy(&x, call->recv, (char *)dc->dtmp + (size_t)c->rank * n * es, n * es);
    }
    case DDP__COLL_BARRIER: break;
  }
  return DDP_OK;
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

static ddp_status_t barrier_host(ddp__comm_t *c, struct ddp__coll *cs) {
  ddp__ctx_t x;
  ddp__ctx_world(&x, c, "barrier", 0, -1);
  MPI_Request rq = MPI_REQUEST_NULL;
  DDP_MPI(MPI_Ibarrier(cs->world, &rq));
  return ddp__wait_all(c, 1, &rq, &x.desc);
}

static ddp_status_t device_run(ddp__comm_t *c, struct ddp__coll *cs, const ddp__dev_call_t *call,
                               ddp__transport_t t, ddp_stream_t *stream) {
  ddp__device_t *d = c->dev;
  ddp__devcoll_t *dc = NULL;
  DDP_TRY(ddp__devcoll_get(c, &dc));
  /* Everything the caller queued on its stream before posting this call comes first: the
   * input event was recorded then (ddp__coll_device_post), not now. */
  ddp_event_t *ev_in = call->ev_in;
  if (!ev_in) return ddp__error(DDP_EINTERNAL, "device collective without an input event");
  if (call->kind == DDP__COLL_BARRIER) {
    DDP_TRY(ddp__devcoll_wait(dc, ev_in, "barrier: caller's stream"));
    return barrier_host(c, cs);
  }
  ddp_status_t st = DDP_OK;
  if (t == DDP__TRANSPORT_NCCL) return ddp__nccl_run(dc, call, stream);
  DDP_TRY(d->impl->stream_wait(d, dc->s_d2h, ev_in));
  DDP_TRY(d->impl->stream_wait(d, dc->s_h2d, ev_in));
  if (t == DDP__TRANSPORT_STAGED) {
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
                                  const ddp__dev_call_t *call) {
  if (!call) return ddp__error(DDP_EINVAL, "device collective: call is NULL");
  if ((int)call->kind < 0 || call->kind > DDP__COLL_BARRIER)
    return ddp__error(DDP_EINVAL, "device collective: kind %d is invalid", (int)call->kind);
  ddp__device_t *d = c->dev;
  const char *kn = kind_names[call->kind];
  if (!d) return no_device(c, call->kind);
  ddp__transport_t t = DDP__TRANSPORT_AUTO;
  DDP_TRY(ddp__device_pick_transport(c, NULL, &t));
  ddp_stream_t *stream = call->opts ? call->opts->stream : NULL;
  DDP_TRY(d->impl->check_stream(d, stream, "opts->stream"));
  size_t es = call->kind == DDP__COLL_BARRIER ? 1 : ddp_dtype_size(call->dtype);
  size_t n = call->count, size = (size_t)c->size;
  switch (call->kind) {
    case DDP__COLL_ALLREDUCE:
      DDP_TRY(check_buf(d, call->send, n * es, "send", call->kind));
      DDP_TRY(check_buf(d, call->recv, n * es, "recv", call->kind));
      break;
    case DDP__COLL_BROADCAST:
      DDP_TRY(check_buf(d, call->recv, n * es, "buf", call->kind));
      if (call->root < 0 || call->root >= c->size)
        return ddp__error(DDP_EINVAL, "broadcast: root %d is not a rank (0..%d)", call->root,
                          c->size - 1);
      break;
    case DDP__COLL_ALLGATHER:
      DDP_TRY(check_buf(d, call->send, n * es, "send", call->kind));
      DDP_TRY(check_buf(d, call->recv, n * es * size, "recv", call->kind));
      break;
    case DDP__COLL_REDUCE_SCATTER:
      DDP_TRY(check_buf(d, call->send, n * es * size, "send", call->kind));
      DDP_TRY(check_buf(d, call->recv, n * es, "recv", call->kind));
      break;
    case DDP__COLL_BARRIER: break;
  }
  if (call->kind != DDP__COLL_BARRIER && n == 0) return DDP_OK;
  char args[96];
  if (c->timeline) {
    snprintf(args, sizeof args, "{\"transport\":\"%s\",\"bytes\":%zu}", ddp__transport_name(t),
             n * es);
    ddp__timeline_event(c->timeline, 'B', kn, "device", args);
  }
  ddp_status_t st = device_run(c, cs, call, t, stream);
  if (c->timeline) ddp__timeline_event(c->timeline, 'E', kn, "device", NULL);
  return st;
}
