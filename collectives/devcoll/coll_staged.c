/* The staged transport, for MPI that cannot take device pointers: device data goes through a
 * ring of pinned host chunks (DDP_STAGING_CHUNK bytes, DDP_STAGING_DEPTH deep). The copy to the
 * host of the next chunks runs while the host algorithm works on the current one, and the copy
 * back of each chunk runs while the next one is reduced. */
#include <string.h>

#include "coll_device_internal.h"

static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }
static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

ddp_status_t ddp__staged_pipeline(ddp__devcoll_t *dc, const void *src, void *dst, size_t count,
                                  size_t es, size_t lo, size_t hi, ddp__stage_fn fn, void *arg) {
  ddp__device_t *d = dc->d;
  const ddp__devimpl_t *im = d->impl;
  ddp__comm_t *c = dc->c;
  int depth = c->cfg.staging_depth;
  if (depth < 2) depth = 2;
  if (depth > DDP__STAGE_MAX) depth = DDP__STAGE_MAX;
  size_t ce = c->cfg.staging_chunk / es;
  if (ce == 0) ce = 1;
  size_t slot_bytes = ce * es;
  if (dc->stage_bytes < slot_bytes) {
    for (int i = 0; i < DDP__STAGE_MAX; i++) {
      if (dc->stage[i]) DDP_TRY(im->host_free(d, dc->stage[i]));
      dc->stage[i] = NULL;
    }
    dc->stage_bytes = 0;
  }
  for (int i = 0; i < depth; i++)
    if (!dc->stage[i]) DDP_TRY(im->host_alloc(d, max_sz(slot_bytes, dc->stage_bytes), &dc->stage[i]));
  dc->stage_bytes = max_sz(slot_bytes, dc->stage_bytes);

  const char *s = src;
  char *o = dst;
  size_t chunks = (count + ce - 1) / ce;
  ddp_status_t st = DDP_OK;
  /* Copy in chunk k: into slot k % depth, on the d2h stream, marked by ev_d2h[slot]. */
#define ISSUE(k)                                                                              \
  do {                                                                                        \
    size_t k_ = (k), off_ = k_ * ce, m_ = min_sz(ce, count - off_);                           \
    int sl_ = (int)(k_ % (size_t)depth);                                                      \
    st = im->memcpy_async(d, dc->stage[sl_], s + off_ * es, m_ * es, dc->s_d2h);              \
    if (st == DDP_OK) st = im->event_record(d, dc->ev_d2h[sl_], dc->s_d2h);                   \
  } while (0)
  if (src)
    for (size_t k = 0; k < chunks && k < (size_t)depth && st == DDP_OK; k++) ISSUE(k);
  for (size_t k = 0; k < chunks && st == DDP_OK; k++) {
    int slot = (int)(k % (size_t)depth);
    size_t off = k * ce, m = min_sz(ce, count - off);
    char *buf = dc->stage[slot];
    /* The first copy waits for the caller's stream: under the watchdog, not a silent hang. */
    if (src) st = ddp__devcoll_wait(dc, dc->ev_d2h[slot], "staged copy to host, after the caller's stream");
    else if (k >= (size_t)depth) st = ddp__devcoll_wait(dc, dc->ev_h2d[slot], "staged: copy back");
    if (st != DDP_OK) break;
    if ((st = fn(arg, buf, off, m)) != DDP_OK) break;
    if (dst) {
      size_t a = max_sz(off, lo), b = min_sz(off + m, hi);
      if (a < b) st = im->memcpy_async(d, o + (a - lo) * es, buf + (a - off) * es, (b - a) * es, dc->s_h2d);
      if (st == DDP_OK) st = im->event_record(d, dc->ev_h2d[slot], dc->s_h2d);
      if (st != DDP_OK) break;
    }
    if (src && k + (size_t)depth < chunks) {
      /* The slot is reused: its copy back must be done before the next copy in lands. */
      if (dst && (st = im->stream_wait(d, dc->s_d2h, dc->ev_h2d[slot])) != DDP_OK) break;
      ISSUE(k + (size_t)depth);
    }
  }
#undef ISSUE
  /* Staging buffers stay in use until both streams are done, also after an error; but after
   * a watchdog timeout the caller's stream may never finish: return at once (the copies still
   * queued land in the staging ring, which later collectives queue behind). */
  if (st == DDP_ETIMEDOUT) return st;
  ddp_status_t s1 = im->stream_sync(d, dc->s_d2h);
  ddp_status_t s2 = im->stream_sync(d, dc->s_h2d);
  if (st == DDP_OK) st = s1 != DDP_OK ? s1 : s2;
  return st;
}

/* ---- host work per chunk -------------------------------------------------------------------- */
typedef struct {
  ddp__comm_t *c;
  const ddp__call_t *call;
  const char *coll;
} stage_arg_t;

static ddp_status_t chunk_allreduce(void *arg, void *buf, size_t off, size_t count) {
  (void)off;
  stage_arg_t *sa = arg;
  const ddp__call_t *call = sa->call;
  ddp__ctx_t x;
  ddp__ctx_world(&x, sa->c, sa->coll, count * ddp_dtype_size(call->a.dtype),
                 call->opts.tag);
  ddp__ar_t a = {buf, buf, count, call->a.dtype, call->a.op};
  const ddp__algo_t *alg = NULL;
  DDP_TRY(ddp__select(sa->c, call->opts.algo, &x, &a, &alg));
  return ddp__allreduce_run(&x, alg, &a, call->avg);
}

static ddp_status_t chunk_bcast(void *arg, void *buf, size_t off, size_t count) {
  (void)off;
  stage_arg_t *sa = arg;
  size_t bytes = count * ddp_dtype_size(sa->call->a.dtype);
  ddp__ctx_t x;
  ddp__ctx_world(&x, sa->c, "broadcast", bytes, sa->call->opts.tag);
  x.desc.algo = "staged-tree";
  return ddp__bcast_tree(&x, buf, bytes, sa->call->root);
}

static ddp_status_t staged_allgather(ddp__devcoll_t *dc, const ddp__call_t *call) {
  ddp__comm_t *c = dc->c;
  ddp__device_t *d = dc->d;
  size_t blk = call->a.count * ddp_dtype_size(call->a.dtype), size = (size_t)c->size;
  DDP_TRY(ddp__devcoll_pinned(dc, &dc->hbuf, &dc->hbuf_bytes, blk * size));
  char *h = dc->hbuf;
  DDP_TRY(d->impl->memcpy_async(d, h + (size_t)c->rank * blk, call->a.send, blk, dc->s_d2h));
  DDP_TRY(d->impl->stream_sync(d, dc->s_d2h));
  ddp__ctx_t x;
  ddp__ctx_world(&x, c, "allgather", blk, call->opts.tag);
  x.desc.algo = "staged-ring";
  DDP_TRY(ddp__allgather_ring(&x, h, blk));
  DDP_TRY(d->impl->memcpy_async(d, call->a.recv, h, blk * size, dc->s_h2d));
  return d->impl->stream_sync(d, dc->s_h2d);
}

ddp_status_t ddp__staged_run(ddp__devcoll_t *dc, const ddp__call_t *call) {
  ddp__comm_t *c = dc->c;
  size_t es = ddp_dtype_size(call->a.dtype), n = call->a.count;
  stage_arg_t sa = {c, call, "allreduce"};
  switch (call->kind) {
    case DDP__COLL_ALLREDUCE:
      return ddp__staged_pipeline(dc, call->a.send, call->a.recv, n, es, 0, n, chunk_allreduce, &sa);
    case DDP__COLL_BROADCAST:
      if (c->rank == call->root)
        return ddp__staged_pipeline(dc, call->a.recv, NULL, n, es, 0, 0, chunk_bcast, &sa);
      return ddp__staged_pipeline(dc, NULL, call->a.recv, n, es, 0, n, chunk_bcast, &sa);
    case DDP__COLL_ALLGATHER: return staged_allgather(dc, call);
    case DDP__COLL_REDUCE_SCATTER: {
      /* Allreduce of the whole input, chunk by chunk; only this rank's block is copied back. */
      size_t lo = (size_t)c->rank * n;
      sa.coll = "reduce_scatter";
      return ddp__staged_pipeline(dc, call->a.send, call->a.recv, n * (size_t)c->size, es, lo, lo + n,
                                  chunk_allreduce, &sa);
    }
    case DDP__COLL_BARRIER: break;
  }
  return DDP_OK;
}
