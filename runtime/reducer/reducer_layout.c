/* The reducer's bucket layout: PyTorch's size-capped assignment of parameters to buckets, the
 * bucket memory of a layout (gradient views and the hooks' half copies), and the one rebuild
 * from the order gradients became ready in the first synced iteration. */
#include <stdlib.h>
#include <string.h>

#include "reducer_internal.h"

/* ---- bucket assignment ------------------------------------------------------------------ */

/* PyTorch's compute_bucket_assignment_by_size: walk `order` (reverse registration order, or the
 * observed ready order), one open bucket per (dtype, mem); a bucket closes once it reaches its
 * limit (first_bucket for a key's first bucket, cap after). Buckets are numbered by the
 * position of their first member, so bucket 0 holds the gradients that are ready first. */
ddp_status_t ddp__reducer_assign(const ddp__rparam_t *p, size_t np, const size_t *order,
                                 size_t first_bytes, size_t cap_bytes, ddp__rlayout_t *out) {
  memset(out, 0, sizeof *out);
  enum { NKEYS = DDP_DTYPE_COUNT * DDP_MEM_COUNT };
  size_t open[NKEYS], closed[NKEYS];
  for (int k = 0; k < NKEYS; k++) open[k] = SIZE_MAX, closed[k] = 0;
  out->members = malloc(np * sizeof *out->members);
  out->first = malloc(np * sizeof *out->first);
  out->nmem = calloc(np, sizeof *out->nmem);
  out->bytes = calloc(np, sizeof *out->bytes);
  out->pbucket = malloc(np * sizeof *out->pbucket);
  out->poff = malloc(np * sizeof *out->poff);
  if (!out->members || !out->first || !out->nmem || !out->bytes || !out->pbucket || !out->poff) {
    ddp__reducer_layout_free(out);
    return ddp__error(DDP_ENOMEM, "reducer: out of memory for the bucket layout (%zu parameters)", np);
  }
  /* First pass: which bucket each parameter goes to, in walk order. */
  size_t nb = 0;
  for (size_t k = 0; k < np; k++) {
    size_t i = order[k];
    int key = (int)p[i].dtype * DDP_MEM_COUNT + (int)p[i].mem;
    if (open[key] == SIZE_MAX) {
      open[key] = nb;
      out->bytes[nb] = 0;
      nb++;
    }
    size_t b = open[key];
    out->pbucket[i] = b;
    out->poff[i] = out->bytes[b]; /* bytes for now */
    out->bytes[b] += p[i].count * ddp_dtype_size(p[i].dtype);
    out->nmem[b]++;
    size_t limit = closed[key] ? cap_bytes : first_bytes;
    if (out->bytes[b] >= limit) {
      open[key] = SIZE_MAX;
      closed[key]++;
    }
  }
  /* Second pass: members listed bucket by bucket, in walk order inside each bucket. */
  size_t pos = 0;
  for (size_t b = 0; b < nb; b++) out->first[b] = pos, pos += out->nmem[b];
  size_t *fill = calloc(nb ? nb : 1, sizeof *fill);
  if (!fill) {
    ddp__reducer_layout_free(out);
    return ddp__error(DDP_ENOMEM, "reducer: out of memory for the bucket layout");
  }
  for (size_t k = 0; k < np; k++) {
    size_t i = order[k], b = out->pbucket[i];
    out->members[out->first[b] + fill[b]++] = i;
  }
  free(fill);
  for (size_t i = 0; i < np; i++) out->poff[i] /= ddp_dtype_size(p[i].dtype); /* elements */
  out->nb = nb;
  return DDP_OK;
}

void ddp__reducer_layout_free(ddp__rlayout_t *l) {
  free(l->members);
  free(l->first);
  free(l->nmem);
  free(l->bytes);
  free(l->pbucket);
  free(l->poff);
  memset(l, 0, sizeof *l);
}

static int layout_equal(const ddp__rlayout_t *a, const ddp__rlayout_t *b, size_t np) {
  if (a->nb != b->nb) return 0;
  for (size_t j = 0; j < a->nb; j++)
    if (a->nmem[j] != b->nmem[j]) return 0;
  return memcmp(a->members, b->members, np * sizeof *a->members) == 0;
}

static void buckets_free(ddp_reducer_t *r, ddp__rbucket_t *bs, size_t nb) {
  if (!bs) return;
  for (size_t j = nb; j-- > 0;) {
    ddp__rbuf_free(r->comm, &bs[j].half);
    ddp__rbuf_free(r->comm, &bs[j].buf);
  }
  free(bs);
}

/* Allocates the bucket buffers of a layout (node-collective: same order on every rank). */
static ddp_status_t buckets_alloc(ddp_reducer_t *r, const ddp__rlayout_t *l, ddp__rbucket_t **out) {
  ddp__rbucket_t *bs = calloc(l->nb ? l->nb : 1, sizeof *bs);
  if (!bs) return ddp__error(DDP_ENOMEM, "reducer: out of memory for %zu buckets", l->nb);
  ddp_status_t st = DDP_OK;
  for (size_t j = 0; j < l->nb && st == DDP_OK; j++) {
    ddp__rbucket_t *b = &bs[j];
    const ddp__rparam_t *p0 = &r->p[l->members[l->first[j]]];
    b->dtype = p0->dtype;
    b->mem = p0->mem;
    b->bytes = l->bytes[j];
    b->count = b->bytes / ddp_dtype_size(b->dtype);
    b->req = NULL;
    size_t alloc = b->bytes;
    if (r->shard) {
      /* Reduce-scatter needs equal blocks: the bucket is padded with zeros to a multiple of
       * the world size (the padding is never written, so it stays zero through every sum). */
      size_t n = (size_t)r->c->size, es = ddp_dtype_size(b->dtype);
      b->shard = (b->count + n - 1) / n;
      alloc = b->shard * n * es;
    }
    if (st == DDP_OK) st = ddp__rbuf_alloc(r->comm, r->c, b->mem, alloc, 1, r->stream, &b->buf);
    if (st == DDP_OK && r->hook != DDP_HOOK_NONE && b->dtype == DDP_F32) {
      b->hooked = 1;
      st = ddp__rbuf_alloc(r->comm, r->c, b->mem, b->count * ddp_dtype_size(ddp__rbucket_wire_dtype(r, b)), 1,
                           r->stream, &b->half);
    }
  }
  if (st != DDP_OK) {
    buckets_free(r, bs, l->nb);
    return st;
  }
  *out = bs;
  return DDP_OK;
}

/* The reducer takes over buckets bs of layout *l (l is emptied) and counts its wire bytes. */
static void adopt(ddp_reducer_t *r, ddp__rbucket_t *bs, ddp__rlayout_t *l) {
  r->b = bs;
  r->lay = *l;
  memset(l, 0, sizeof *l);
  r->wire_bytes = 0;
  for (size_t j = 0; j < r->lay.nb; j++)
    r->wire_bytes += r->b[j].count * ddp_dtype_size(ddp__rbucket_wire_dtype(r, &r->b[j]));
}

ddp_status_t ddp__reducer_install_layout(ddp_reducer_t *r, ddp__rlayout_t *l) {
  ddp__rbucket_t *bs = NULL;
  DDP_TRY(buckets_alloc(r, l, &bs));
  adopt(r, bs, l);
  return DDP_OK;
}

void ddp__reducer_free_buckets(ddp_reducer_t *r) {
  buckets_free(r, r->b, r->lay.nb);
  r->b = NULL;
  ddp__reducer_layout_free(&r->lay);
}

void ddp__reducer_log_layout(ddp_reducer_t *r, const char *what) {
  if (r->c->log.level < DDP_LOG_INFO || r->c->rank != 0) return;
  char sizes[512];
  size_t o = 0;
  sizes[0] = '\0';
  for (size_t j = 0; j < r->lay.nb && o + 24 < sizeof sizes; j++)
    o += (size_t)snprintf(sizes + o, sizeof sizes - o, "%s%.2f", j ? " " : "",
                          (double)r->b[j].bytes / 1048576.0);
  if (r->lay.nb && o + 24 >= sizeof sizes) snprintf(sizes + o, sizeof sizes - o, " ...");
  DDP_LOG(r->c, DDP_LOG_INFO,
          "reducer: %s: %zu parameters in %zu bucket(s) [MB: %s], views %s, pool %s, hook %s, algo %s",
          what, r->np, r->lay.nb, sizes, r->views ? "on" : "off",
          (r->lay.nb && r->b[0].buf.pooled) ? "node-shared" : "private",
          ddp_hook_name(r->hook), ddp_algo_name(r->algo));
}

/* Rank 0's observed order, broadcast, becomes everyone's bucket order (once). */
ddp_status_t ddp__reducer_rebuild(ddp_reducer_t *r) {
  r->recording = 0;
  /* Parameters never marked (unused) follow in reverse registration order. */
  char *seen = calloc(r->np, 1);
  if (!seen) return ddp__error(DDP_ENOMEM, "reducer: out of memory (rebuild)");
  for (size_t k = 0; k < r->norder; k++) seen[r->order[k]] = 1;
  for (size_t i = r->np; i-- > 0;)
    if (!seen[i]) r->order[r->norder++] = i;
  free(seen);
  int64_t *o64 = malloc(r->np * sizeof *o64);
  if (!o64) return ddp__error(DDP_ENOMEM, "reducer: out of memory (rebuild)");
  for (size_t k = 0; k < r->np; k++) o64[k] = (int64_t)r->order[k];
  ddp_status_t st = ddp_broadcast(r->comm, o64, r->np, DDP_I64, 0, NULL);
  if (st == DDP_OK)
    for (size_t k = 0; k < r->np; k++) r->order[k] = (size_t)o64[k];
  free(o64);
  DDP_TRY(st);
  ddp__rlayout_t nl;
  DDP_TRY(ddp__reducer_assign(r->p, r->np, r->order, r->first_bytes, r->cap_bytes, &nl));
  r->rebuilt = 1;
  if (layout_equal(&nl, &r->lay, r->np)) {
    ddp__reducer_layout_free(&nl);
    DDP_LOG(r->c, DDP_LOG_INFO, "reducer: observed order gives the same buckets; kept");
    return DDP_OK;
  }
  ddp__rbucket_t *nbs = NULL;
  st = buckets_alloc(r, &nl, &nbs);
  if (st != DDP_OK) {
    ddp__reducer_layout_free(&nl);
    return st;
  }
  if (r->views) /* the averaged gradients move to their new homes */
    for (size_t i = 0; i < r->np; i++) {
      void *dst = (char *)nbs[nl.pbucket[i]].buf.ptr + nl.poff[i] * ddp_dtype_size(r->p[i].dtype);
      st = ddp__rbuf_copy(r->comm, r->p[i].mem, dst, ddp__reducer_slot(r, i), ddp__rparam_bytes(&r->p[i]), r->stream);
      if (st != DDP_OK) {
        buckets_free(r, nbs, nl.nb);
        ddp__reducer_layout_free(&nl);
        return st;
      }
    }
  ddp__reducer_free_buckets(r);
  adopt(r, nbs, &nl);
  ddp__reducer_log_layout(r, "rebuilt from the observed order");
  return DDP_OK;
}
