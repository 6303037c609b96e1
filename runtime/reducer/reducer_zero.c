/* The reducer's sharded mode (ZeRO-1/2): this rank's range of each parameter, the parameter
 * allgather bucket by bucket, and ZeRO-2's release of the other ranks' blocks. */
#include <string.h>

#include "reducer_internal.h"

/* ---- sharded mode (ZeRO-1) ------------------------------------------------------------------ */

static ddp_status_t shard_ready(const ddp_reducer_t *r, const char *what) {
  if (!r->shard)
    return ddp__error(DDP_ESTATE, "%s needs a reducer created with opts.shard = 1 or 2", what);
  if (!r->rebuilt)
    return ddp__error(DDP_ESTATE, "%s before the first synced ddp_reducer_finish: the buckets, and "
                      "so the shards, are fixed only then", what);
  return DDP_OK;
}

/* Parameter i's elements in this rank's block of its bucket: [*begin, *begin + *count). */
static void own_range(const ddp_reducer_t *r, size_t i, size_t *begin, size_t *count) {
  const ddp__rbucket_t *b = &r->b[r->lay.pbucket[i]];
  size_t lo = (size_t)r->c->rank * b->shard, hi = lo + b->shard;
  size_t a = r->lay.poff[i], e = a + r->p[i].count;
  size_t s = lo > a ? lo : a, t = hi < e ? hi : e;
  *begin = t > s ? s - a : 0;
  *count = t > s ? t - s : 0;
}

ddp_status_t ddp_reducer_shard_range(const ddp_reducer_t *r, size_t i, size_t *begin, size_t *count) {
  DDP_CHECK_ARG(r != NULL, "r is NULL");
  DDP_TRY(ddp__reducer_check_index(r, i));
  DDP_CHECK_ARG(begin != NULL, "begin is NULL");
  DDP_CHECK_ARG(count != NULL, "count is NULL");
  DDP_TRY(shard_ready(r, "ddp_reducer_shard_range"));
  own_range(r, i, begin, count);
  return DDP_OK;
}

ddp_status_t ddp_reducer_allgather_params(ddp_reducer_t *r) {
  DDP_CHECK_ARG(r != NULL, "r is NULL");
  DDP_TRY(shard_ready(r, "ddp_reducer_allgather_params"));
  if (r->active)
    return ddp__error(DDP_ESTATE, "ddp_reducer_allgather_params while gradients are being reduced "
                      "(between the first grad_ready and finish): call ddp_reducer_finish first");
  for (size_t j = 0; j < r->lay.nb; j++)
    if (r->b[j].ag_pending)
      return ddp__error(DDP_ESTATE, "ddp_reducer_allgather_params while the previous allgather "
                        "(bucket %zu) is in flight: call ddp_reducer_param_wait first", j);
  ddp_coll_opts_t o;
  ddp_coll_opts_default(&o);
  ddp_status_t st = DDP_OK;
  r->released_bytes = 0; /* counted again as this allgather's buckets are waited for */
  /* The last bucket holds the first layers (buckets follow the backward order): it goes first,
   * so the forward pass can start while later layers are still on the wire. */
  for (size_t j = r->lay.nb; st == DDP_OK && j-- > 0;) {
    ddp__rbucket_t *b = &r->b[j];
    size_t es = ddp_dtype_size(b->dtype);
    for (size_t k = 0; k < r->lay.nmem[j]; k++) {
      size_t i = r->lay.members[r->lay.first[j] + k], begin, count;
      own_range(r, i, &begin, &count);
      if (count)
        memcpy((char *)ddp__reducer_slot(r, i) + begin * es, (const char *)r->p[i].data + begin * es, count * es);
    }
    if (r->c->size > 1) {
      o.tag = (int)j;
      st = ddp_iallgather(r->comm, DDP_IN_PLACE, b->buf.ptr, b->shard, b->dtype, &o, &b->agreq);
    }
    if (st == DDP_OK) b->ag_pending = 1;
  }
  return st;
}

/* ZeRO-2: the parameters are copied out, so bucket j's memory outside this rank's block holds
 * nothing anyone needs until the next backward writes gradients there: release those pages.
 * Safe for the node-shared pool too: this rank's allgather completed, so every rank posted its
 * allgather, which it does after its reduce-scatter (the only time peers read those blocks of
 * this bucket) completed. The pages read as zeros afterwards, which keeps the padding zero. */
static void release_others(ddp_reducer_t *r, size_t j) {
  ddp__rbucket_t *b = &r->b[j];
  size_t es = ddp_dtype_size(b->dtype), blk = b->shard * es, mine = (size_t)r->c->rank * blk;
  size_t all = b->shard * (size_t)r->c->size * es;
  char *base = (char *)b->buf.ptr;
  size_t freed = ddp__rbuf_release(b->mem, b->buf.pooled, base, mine);
  freed += ddp__rbuf_release(b->mem, b->buf.pooled, base + mine + blk, all - mine - blk);
  r->released_bytes += freed;
}

static ddp_status_t gather_wait(ddp_reducer_t *r, size_t j) {
  ddp__rbucket_t *b = &r->b[j];
  if (!b->ag_pending) return DDP_OK;
  ddp_status_t st = b->agreq ? ddp_wait(&b->agreq) : DDP_OK;
  b->agreq = NULL;
  b->ag_pending = 0;
  if (st != DDP_OK) return st;
  /* This rank's own range is already in the application's buffer (it was copied from there):
   * only the others' elements come back. */
  for (size_t k = 0; k < r->lay.nmem[j]; k++) {
    size_t i = r->lay.members[r->lay.first[j] + k], begin, count, es = ddp_dtype_size(r->p[i].dtype);
    own_range(r, i, &begin, &count);
    char *dst = (char *)r->p[i].data;
    const char *src = (const char *)ddp__reducer_slot(r, i);
    memcpy(dst, src, begin * es);
    memcpy(dst + (begin + count) * es, src + (begin + count) * es, (r->p[i].count - begin - count) * es);
  }
  if (r->shard == 2) release_others(r, j);
  return DDP_OK;
}

ddp_status_t ddp_reducer_param_wait(ddp_reducer_t *r, size_t i) {
  DDP_CHECK_ARG(r != NULL, "r is NULL");
  if (i != SIZE_MAX) { /* SIZE_MAX: all */
    DDP_TRY(ddp__reducer_check_index(r, i));
    return gather_wait(r, r->lay.pbucket[i]);
  }
  ddp_status_t st = DDP_OK;
  for (size_t j = r->lay.nb; j-- > 0;) {
    ddp_status_t wst = gather_wait(r, j);
    if (st == DDP_OK) st = wst;
  }
  return st;
}

ddp_status_t ddp_reducer_param(ddp_reducer_t *r, size_t i, void **data) {
  DDP_CHECK_ARG(r != NULL, "r is NULL");
  DDP_TRY(ddp__reducer_check_index(r, i));
  DDP_CHECK_ARG(data != NULL, "data is NULL");
  if (r->b[r->lay.pbucket[i]].ag_pending)
    return ddp__error(DDP_ESTATE, "parameter %zu ('%s') is being allgathered: call "
                      "ddp_reducer_param_wait(r, %zu) before reading it", i, ddp__reducer_pname(r, i), i);
  *data = r->p[i].data;
  return DDP_OK;
}
