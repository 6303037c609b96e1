/* The bucketed allreduce scheduler (PyTorch's Reducer in C): parameter registry, buckets with
 * gradient views, launch in bucket order as gradients become ready, finish, no_sync,
 * unused-parameter detection, one rebuild from the observed order, fp16/bf16 hooks, stats.
 * Creation-time checks (fingerprints, options, broadcast) live in reducer_create.c. */
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
      st = ddp__rbuf_alloc(r->comm, r->c, b->mem, b->count * 2, 1, r->stream, &b->half);
    }
  }
  if (st != DDP_OK) {
    for (size_t j = l->nb; j-- > 0;) {
      ddp__rbuf_free(r->comm, &bs[j].half);
      ddp__rbuf_free(r->comm, &bs[j].buf);
    }
    free(bs);
    return st;
  }
  *out = bs;
  return DDP_OK;
}

static void buckets_free(ddp_reducer_t *r, ddp__rbucket_t *bs, size_t nb) {
  if (!bs) return;
  for (size_t j = nb; j-- > 0;) {
    ddp__rbuf_free(r->comm, &bs[j].half);
    ddp__rbuf_free(r->comm, &bs[j].buf);
  }
  free(bs);
}

static void *slot(const ddp_reducer_t *r, size_t i) {
  const ddp__rparam_t *p = &r->p[i];
  return (char *)r->b[r->lay.pbucket[i]].buf.ptr + r->lay.poff[i] * ddp_dtype_size(p->dtype);
}

static size_t pbytes(const ddp__rparam_t *p) { return p->count * ddp_dtype_size(p->dtype); }

ddp_status_t ddp__reducer_install_layout(ddp_reducer_t *r, ddp__rlayout_t *l) {
  ddp__rbucket_t *bs = NULL;
  DDP_TRY(buckets_alloc(r, l, &bs));
  r->b = bs;
  r->lay = *l;
  memset(l, 0, sizeof *l);
  r->wire_bytes = 0;
  for (size_t j = 0; j < r->lay.nb; j++)
    r->wire_bytes += r->b[j].hooked ? r->b[j].count * 2 : r->b[j].bytes;
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
          r->hook == DDP_HOOK_FP16 ? "fp16" : r->hook == DDP_HOOK_BF16 ? "bf16" : "none",
          ddp_algo_name(r->algo));
}

/* ---- iteration -------------------------------------------------------------------------- */

static void tl_bucket(ddp_reducer_t *r, const char *what, size_t j) {
  if (!r->c->timeline) return;
  char args[96];
  snprintf(args, sizeof args, "{\"bucket\":%zu,\"bytes\":%zu}", j, r->b[j].bytes);
  ddp__timeline_event(r->c->timeline, 'i', what, "reducer", args);
}

static void note_done(ddp_reducer_t *r, size_t j, ddp_status_t st, double t) {
  ddp__rbucket_t *b = &r->b[j];
  b->done = 1;
  b->t_done = t;
  if (t > r->t_last_done) r->t_last_done = t;
  if (st != DDP_OK && r->comm_err == DDP_OK) {
    r->comm_err = st;
    snprintf(r->comm_msg, sizeof r->comm_msg, "bucket %zu allreduce: %s", j, ddp_last_error());
  }
  tl_bucket(r, "bucket done", j);
}

/* A failed memory operation (device copy, conversion) is reported by finish. */
static void remember(ddp_reducer_t *r, ddp_status_t st, const char *what) {
  if (st == DDP_OK || r->comm_err != DDP_OK) return;
  r->comm_err = st;
  snprintf(r->comm_msg, sizeof r->comm_msg, "%s: %s", what, ddp_last_error());
}

/* Timestamps buckets that completed in the background (the engine runs them in order). */
static void poll(ddp_reducer_t *r) {
  while (r->next_done < r->next_launch) {
    ddp__rbucket_t *b = &r->b[r->next_done];
    if (b->req) {
      int done = 0;
      ddp_status_t st = ddp_test(&b->req, &done);
      if (!done && st == DDP_OK) return;
      if (!done) b->req = NULL;
      note_done(r, r->next_done, st, ddp__now());
    }
    r->next_done++;
  }
}

static ddp_status_t launch(ddp_reducer_t *r, size_t j) {
  ddp__rbucket_t *b = &r->b[j];
  ddp_coll_opts_t o;
  ddp_coll_opts_default(&o);
  o.algo = r->algo;
  o.mem = b->mem;
  o.stream = r->stream;
  o.tag = (int)j;
  double t = ddp__now();
  if (r->next_launch == 0) r->t_first_launch = t;
  b->t_launch = t;
  b->done = 0;
  tl_bucket(r, "bucket launch", j);
  ddp_status_t st;
  if (r->c->size == 1) {
    /* One rank: the average is the gradient itself. Only the hook's rounding is applied, so
     * results do not depend on the world size through anything but the data. */
    st = DDP_OK;
    if (b->hooked) {
      ddp_dtype_t h = r->hook == DDP_HOOK_BF16 ? DDP_BF16 : DDP_F16;
      st = ddp__rbuf_compress(r->comm, b->mem, b->half.ptr, b->buf.ptr, b->count, 1.0f, h, r->stream);
    }
    note_done(r, j, st, ddp__now());
  } else if (b->hooked) {
    ddp_dtype_t h = r->hook == DDP_HOOK_BF16 ? DDP_BF16 : DDP_F16;
    /* Divide before rounding (as PyTorch's fp16_compress_hook) so the sum cannot overflow. */
    st = ddp__rbuf_compress(r->comm, b->mem, b->half.ptr, b->buf.ptr, b->count,
                            r->predivided ? 1.0f : 1.0f / (float)r->c->size, h, r->stream);
    if (st == DDP_OK)
      st = ddp_iallreduce(r->comm, DDP_IN_PLACE, b->half.ptr, b->count, h, DDP_SUM, &o, &b->req);
  } else if (r->shard && r->rebuilt) {
    /* ZeRO-1: each rank gets the average of its own block. The first iteration is allreduced
     * instead, so the rebuild that follows it can move complete gradients to the new buckets. */
    o.algo = DDP_ALGO_AUTO; /* opts.algo names an allreduce algorithm */
    /* In place: the result lands in this rank's block of the bucket (its views), and no
     * shard-sized buffer is needed besides the bucket. */
    size_t es = ddp_dtype_size(b->dtype);
    st = ddp_ireduce_scatter(r->comm, b->buf.ptr, (char *)b->buf.ptr + (size_t)r->c->rank * b->shard * es,
                             b->shard, b->dtype, r->predivided ? DDP_SUM : DDP_AVG, &o, &b->req);
  } else {
    st = ddp_iallreduce(r->comm, DDP_IN_PLACE, b->buf.ptr, b->count, b->dtype,
                        r->predivided ? DDP_SUM : DDP_AVG, &o, &b->req);
  }
  if (st != DDP_OK && !b->done) {
    b->req = NULL;
    note_done(r, j, st, ddp__now());
  }
  r->next_launch = j + 1;
  return st;
}

static void launch_ready(ddp_reducer_t *r) {
  while (r->next_launch < r->lay.nb && r->b[r->next_launch].pending == 0)
    (void)launch(r, r->next_launch); /* failures are recorded and reported by finish */
}

/* Start of a synced iteration: pending counts, and the static graph's known-unused params. */
static void begin_iteration(ddp_reducer_t *r) {
  r->active = 1;
  r->next_launch = r->next_done = 0;
  r->t_first_launch = r->t_last_done = 0.0;
  if (r->recording) r->norder = 0;
  for (size_t j = 0; j < r->lay.nb; j++) {
    r->b[j].pending = r->lay.nmem[j];
    r->b[j].done = 0;
  }
  if (r->static_unused_known) {
    for (size_t i = 0; i < r->np; i++) {
      if (!r->p[i].static_unused) continue;
      remember(r, ddp__rbuf_zero(r->comm, r->p[i].mem, slot(r, i), pbytes(&r->p[i]), r->stream),
               "zeroing an unused parameter's gradient");
      r->p[i].marked = 2; /* marked by the reducer, not the application */
      r->b[r->lay.pbucket[i]].pending--;
    }
    launch_ready(r);
  }
}

static const char *pname(const ddp_reducer_t *r, size_t i) {
  return r->p[i].name ? r->p[i].name : "unnamed";
}

ddp_status_t ddp_reducer_grad_ready(ddp_reducer_t *r, size_t i) {
  DDP_CHECK_ARG(r != NULL, "r is NULL");
  DDP_CHECK_ARG(i < r->np, "parameter index %zu out of range (the reducer has %zu parameters)", i, r->np);
  if (r->b[r->lay.pbucket[i]].ag_pending)
    return ddp__error(DDP_ESTATE, "parameter %zu ('%s'): its bucket still carries the parameter "
                      "allgather: call ddp_reducer_param_wait before the backward pass", i, pname(r, i));
  if (!r->sync) return DDP_OK;
  if (!r->active) begin_iteration(r);
  ddp__rparam_t *p = &r->p[i];
  if (p->marked == 2)
    return ddp__error(DDP_ESTATE,
                      "parameter %zu ('%s') got a gradient, but it was unused in the first "
                      "iteration and static_graph promised the same graph every iteration", i, pname(r, i));
  if (p->marked)
    return ddp__error(DDP_ESTATE, "parameter %zu ('%s') was marked ready twice in this iteration", i, pname(r, i));
  if (!r->views) DDP_TRY(ddp__rbuf_copy(r->comm, p->mem, slot(r, i), p->grad, pbytes(p), r->stream));
  p->marked = 1;
  if (r->recording) r->order[r->norder++] = i;
  if (r->c->timeline) {
    char args[64];
    snprintf(args, sizeof args, "{\"param\":%zu}", i);
    ddp__timeline_event(r->c->timeline, 'i', "grad_ready", "reducer", args);
  }
  size_t j = r->lay.pbucket[i];
  if (--r->b[j].pending == 0) launch_ready(r);
  poll(r);
  return DDP_OK;
}

/* Rank 0's observed order, broadcast, becomes everyone's bucket order (once). */
static ddp_status_t rebuild(ddp_reducer_t *r) {
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
      st = ddp__rbuf_copy(r->comm, r->p[i].mem, dst, slot(r, i), pbytes(&r->p[i]), r->stream);
      if (st != DDP_OK) {
        buckets_free(r, nbs, nl.nb);
        ddp__reducer_layout_free(&nl);
        return st;
      }
    }
  ddp__reducer_free_buckets(r);
  r->b = nbs;
  r->lay = nl;
  r->wire_bytes = 0;
  for (size_t j = 0; j < r->lay.nb; j++)
    r->wire_bytes += r->b[j].hooked ? r->b[j].count * 2 : r->b[j].bytes;
  ddp__reducer_log_layout(r, "rebuilt from the observed order");
  return DDP_OK;
}

ddp_status_t ddp_reducer_finish(ddp_reducer_t *r) {
  DDP_CHECK_ARG(r != NULL, "r is NULL");
  if (!r->sync) return DDP_OK;
  if (!r->active) begin_iteration(r);
  double t_enter = ddp__now();
  ddp__timeline_event(r->c->timeline, 'B', "reducer finish", "reducer", NULL);
  ddp_status_t st = DDP_OK;
  size_t missing = SIZE_MAX, nmissing = 0;
  /* Parameters that got no gradient: zeros (find_unused), or the error below. Either way the
   * buckets are completed and reduced so that no other rank waits forever. */
  for (size_t i = 0; i < r->np; i++) {
    ddp__rparam_t *p = &r->p[i];
    p->used_local = (p->marked == 1);
    if (p->marked) continue;
    if (missing == SIZE_MAX) missing = i;
    nmissing++;
    remember(r, ddp__rbuf_zero(r->comm, p->mem, slot(r, i), pbytes(p), r->stream),
             "zeroing a missing parameter's gradient");
    p->marked = 3;
    r->b[r->lay.pbucket[i]].pending--;
  }
  launch_ready(r);
  /* Used set: one small allreduce (after every bucket, so all ranks post it in the same place). */
  if (r->find_unused && !r->static_unused_known) {
    for (size_t i = 0; i < r->np; i++) r->used[i] = (uint8_t)r->p[i].used_local;
    ddp_status_t ust = ddp_allreduce(r->comm, DDP_IN_PLACE, r->used, r->np, DDP_U8, DDP_MAX, NULL);
    if (ust != DDP_OK && st == DDP_OK) st = ust;
    r->unused_params = 0;
    for (size_t i = 0; i < r->np; i++) r->unused_params += !r->used[i];
    if (r->static_graph) {
      for (size_t i = 0; i < r->np; i++) r->p[i].static_unused = !r->p[i].used_local;
      r->static_unused_known = 1;
    }
  }
  poll(r);
  double t_wait = ddp__now();
  for (size_t j = r->next_done; j < r->next_launch; j++) {
    ddp__rbucket_t *b = &r->b[j];
    if (b->done) continue;
    ddp_status_t wst = b->req ? ddp_wait(&b->req) : DDP_OK;
    b->req = NULL;
    note_done(r, j, wst, ddp__now());
  }
  r->next_done = r->next_launch;
  double t_end = ddp__now();
  for (size_t j = 0; j < r->lay.nb; j++) {
    ddp__rbucket_t *b = &r->b[j];
    if (b->hooked)
      remember(r, ddp__rbuf_decompress(r->comm, b->mem, b->buf.ptr, b->half.ptr, b->count,
                                       r->hook == DDP_HOOK_BF16 ? DDP_BF16 : DDP_F16, r->stream),
               "hook decompression");
  }
  if (!r->views)
    for (size_t i = 0; i < r->np; i++)
      remember(r, ddp__rbuf_copy(r->comm, r->p[i].mem, r->p[i].grad, slot(r, i), pbytes(&r->p[i]), r->stream),
               "copy to the application's gradient");
  if (r->has_device) remember(r, ddp__rbuf_sync(r->comm, DDP_MEM_CUDA, r->stream), "stream synchronize");
  ddp__timeline_event(r->c->timeline, 'E', "reducer finish", "reducer", NULL);
  /* Statistics: communication span of this iteration and the part of it finish waited for. */
  if (r->t_first_launch > 0.0 && r->c->size > 1) {
    double comm = r->t_last_done - r->t_first_launch;
    double exposed = t_end - (t_wait > r->t_first_launch ? t_wait : r->t_first_launch);
    if (exposed < 0.0) exposed = 0.0;
    if (comm < exposed) comm = exposed;
    r->sum_comm += comm;
    r->sum_exposed += exposed;
  }
  (void)t_enter;
  r->iterations++;
  if (r->comm_err != DDP_OK && st == DDP_OK)
    st = ddp__error(r->comm_err, "reducer: %s", r->comm_msg);
  r->comm_err = DDP_OK;
  /* Reset for the next iteration. */
  r->active = 0;
  for (size_t i = 0; i < r->np; i++) r->p[i].marked = 0;
  if (st == DDP_OK && !r->rebuilt) st = rebuild(r);
  r->recording = 0;
  if (st == DDP_OK && missing != SIZE_MAX && !r->find_unused)
    st = ddp__error(DDP_ESTATE,
                    "parameter %zu ('%s') was not marked ready in this iteration (%zu missing); "
                    "call ddp_reducer_grad_ready for every parameter or create the reducer with "
                    "find_unused = 1", missing, pname(r, missing), nmissing);
  if (r->c->log.level >= DDP_LOG_TRACE)
    DDP_LOG(r->c, DDP_LOG_TRACE, "reducer: iteration %llu: comm %.3f ms, waited %.3f ms",
            (unsigned long long)r->iterations, (r->t_last_done - r->t_first_launch) * 1e3,
            (t_end - t_wait) * 1e3);
  return st;
}

ddp_status_t ddp_reducer_set_sync(ddp_reducer_t *r, int sync) {
  DDP_CHECK_ARG(r != NULL, "r is NULL");
  DDP_CHECK_ARG(sync == 0 || sync == 1, "sync %d must be 0 (no_sync) or 1", sync);
  if (r->active && sync != r->sync)
    return ddp__error(DDP_ESTATE, "set_sync(%d) in the middle of an iteration: call "
                      "ddp_reducer_finish first", sync);
  r->sync = sync;
  return DDP_OK;
}

ddp_status_t ddp_reducer_grad(ddp_reducer_t *r, size_t i, void **grad) {
  DDP_CHECK_ARG(r != NULL, "r is NULL");
  DDP_CHECK_ARG(i < r->np, "parameter index %zu out of range (the reducer has %zu parameters)", i, r->np);
  DDP_CHECK_ARG(grad != NULL, "grad is NULL");
  *grad = r->views ? slot(r, i) : r->p[i].grad;
  return DDP_OK;
}

ddp_status_t ddp_reducer_grads(ddp_reducer_t *r, void **grads, size_t n) {
  DDP_CHECK_ARG(r != NULL, "r is NULL");
  DDP_CHECK_ARG(grads != NULL, "grads is NULL");
  DDP_CHECK_ARG(n == r->np, "n %zu is not the reducer's parameter count %zu", n, r->np);
  for (size_t i = 0; i < n; i++) grads[i] = r->views ? slot(r, i) : r->p[i].grad;
  return DDP_OK;
}

ddp_status_t ddp_reducer_zero_grad(ddp_reducer_t *r) {
  DDP_CHECK_ARG(r != NULL, "r is NULL");
  if (r->active)
    return ddp__error(DDP_ESTATE, "zero_grad in the middle of an iteration (buckets may be in flight)");
  for (size_t j = 0; j < r->lay.nb; j++)
    if (r->b[j].ag_pending)
      return ddp__error(DDP_ESTATE, "zero_grad while the parameter allgather of bucket %zu is in "
                        "flight: call ddp_reducer_param_wait first", j);
  if (r->views)
    for (size_t j = 0; j < r->lay.nb; j++)
      DDP_TRY(ddp__rbuf_zero(r->comm, r->b[j].mem, r->b[j].buf.ptr, r->b[j].bytes, r->stream));
  else
    for (size_t i = 0; i < r->np; i++)
      DDP_TRY(ddp__rbuf_zero(r->comm, r->p[i].mem, r->p[i].grad, pbytes(&r->p[i]), r->stream));
  if (r->has_device) DDP_TRY(ddp__rbuf_sync(r->comm, DDP_MEM_CUDA, r->stream));
  return DDP_OK;
}

ddp_status_t ddp_reducer_stats(const ddp_reducer_t *r, ddp_reducer_stats_t *stats) {
  DDP_CHECK_ARG(r != NULL, "r is NULL");
  DDP_CHECK_ARG(stats != NULL, "stats is NULL");
  ddp_reducer_stats_t s;
  memset(&s, 0, sizeof s);
  s.nbuckets = r->lay.nb;
  s.bucket_bytes_min = r->lay.nb ? SIZE_MAX : 0;
  for (size_t j = 0; j < r->lay.nb; j++) {
    if (r->b[j].bytes > s.bucket_bytes_max) s.bucket_bytes_max = r->b[j].bytes;
    if (r->b[j].bytes < s.bucket_bytes_min) s.bucket_bytes_min = r->b[j].bytes;
  }
  s.iterations = r->iterations;
  if (r->iterations) {
    s.comm_ms_avg = r->sum_comm * 1e3 / (double)r->iterations;
    s.exposed_ms_avg = r->sum_exposed * 1e3 / (double)r->iterations;
  }
  s.hidden_fraction = r->sum_comm > 0.0 ? 1.0 - r->sum_exposed / r->sum_comm : 0.0;
  if (s.hidden_fraction < 0.0) s.hidden_fraction = 0.0;
  s.rebuilt = r->rebuilt;
  s.unused_params = r->unused_params;
  s.wire_bytes = r->wire_bytes;
  s.released_bytes = r->released_bytes;
  *stats = s;
  return DDP_OK;
}

ddp_status_t ddp_reducer_bucket_of(const ddp_reducer_t *r, size_t i, size_t *bucket) {
  DDP_CHECK_ARG(r != NULL, "r is NULL");
  DDP_CHECK_ARG(i < r->np, "parameter index %zu out of range (the reducer has %zu parameters)", i, r->np);
  DDP_CHECK_ARG(bucket != NULL, "bucket is NULL");
  *bucket = r->lay.pbucket[i];
  return DDP_OK;
}

ddp_status_t ddp_reducer_bucket_params(const ddp_reducer_t *r, size_t b, size_t *idx, size_t cap,
                                       size_t *n, size_t *bytes) {
  DDP_CHECK_ARG(r != NULL, "r is NULL");
  DDP_CHECK_ARG(b < r->lay.nb, "bucket %zu out of range (the reducer has %zu buckets)", b, r->lay.nb);
  DDP_CHECK_ARG(n != NULL, "n is NULL");
  DDP_CHECK_ARG(idx != NULL || cap == 0, "idx is NULL but cap is %zu", cap);
  size_t m = r->lay.nmem[b];
  for (size_t k = 0; k < m && k < cap; k++) idx[k] = r->lay.members[r->lay.first[b] + k];
  *n = m;
  if (bytes) *bytes = r->b[b].bytes;
  return DDP_OK;
}

ddp_status_t ddp_reducer_param_used(const ddp_reducer_t *r, size_t i, int *used) {
  DDP_CHECK_ARG(r != NULL, "r is NULL");
  DDP_CHECK_ARG(i < r->np, "parameter index %zu out of range (the reducer has %zu parameters)", i, r->np);
  DDP_CHECK_ARG(used != NULL, "used is NULL");
  if (!r->find_unused)
    return ddp__error(DDP_ESTATE, "param_used needs a reducer created with find_unused = 1");
  *used = r->used[i] != 0;
  return DDP_OK;
}

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
  DDP_CHECK_ARG(i < r->np, "parameter index %zu out of range (the reducer has %zu parameters)", i, r->np);
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
        memcpy((char *)slot(r, i) + begin * es, (const char *)r->p[i].data + begin * es, count * es);
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
    const char *src = (const char *)slot(r, i);
    memcpy(dst, src, begin * es);
    memcpy(dst + (begin + count) * es, src + (begin + count) * es, (r->p[i].count - begin - count) * es);
  }
  if (r->shard == 2) release_others(r, j);
  return DDP_OK;
}

ddp_status_t ddp_reducer_param_wait(ddp_reducer_t *r, size_t i) {
  DDP_CHECK_ARG(r != NULL, "r is NULL");
  DDP_CHECK_ARG(i < r->np || i == SIZE_MAX,
                "parameter index %zu out of range (the reducer has %zu parameters; SIZE_MAX = all)", i, r->np);
  if (i != SIZE_MAX) return gather_wait(r, r->lay.pbucket[i]);
  ddp_status_t st = DDP_OK;
  for (size_t j = r->lay.nb; j-- > 0;) {
    ddp_status_t wst = gather_wait(r, j);
    if (st == DDP_OK) st = wst;
  }
  return st;
}

ddp_status_t ddp_reducer_param(ddp_reducer_t *r, size_t i, void **data) {
  DDP_CHECK_ARG(r != NULL, "r is NULL");
  DDP_CHECK_ARG(i < r->np, "parameter index %zu out of range (the reducer has %zu parameters)", i, r->np);
  DDP_CHECK_ARG(data != NULL, "data is NULL");
  if (r->b[r->lay.pbucket[i]].ag_pending)
    return ddp__error(DDP_ESTATE, "parameter %zu ('%s') is being allgathered: call "
                      "ddp_reducer_param_wait(r, %zu) before reading it", i, pname(r, i), i);
  *data = r->p[i].data;
  return DDP_OK;
}
