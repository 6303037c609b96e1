/* The bucketed allreduce scheduler's iteration (PyTorch's Reducer in C): launch in bucket order
 * as gradients become ready, finish, no_sync, unused-parameter detection, zero_grad. Bucket
 * layout and rebuild: reducer_layout.c; getters: reducer_query.c; ZeRO: reducer_zero.c;
 * creation-time checks (fingerprints, options, broadcast): reducer_create.c. */
#include <stdlib.h>
#include <string.h>

#include "reducer_internal.h"

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
    if (b->hooked)
      st = ddp__rbuf_compress(r->comm, b->mem, b->half.ptr, b->buf.ptr, b->count, 1.0f,
                              ddp__rbucket_wire_dtype(r, b), r->stream);
    note_done(r, j, st, ddp__now());
  } else if (b->hooked) {
    ddp_dtype_t h = ddp__rbucket_wire_dtype(r, b);
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
      remember(r, ddp__rbuf_zero(r->comm, r->p[i].mem, ddp__reducer_slot(r, i),
                                 ddp__rparam_bytes(&r->p[i]), r->stream),
               "zeroing an unused parameter's gradient");
      r->p[i].marked = 2; /* marked by the reducer, not the application */
      r->b[r->lay.pbucket[i]].pending--;
    }
    launch_ready(r);
  }
}

ddp_status_t ddp_reducer_grad_ready(ddp_reducer_t *r, size_t i) {
  DDP_CHECK_ARG(r != NULL, "r is NULL");
  DDP_TRY(ddp__reducer_check_index(r, i));
  if (r->b[r->lay.pbucket[i]].ag_pending)
    return ddp__error(DDP_ESTATE, "parameter %zu ('%s'): its bucket still carries the parameter "
                      "allgather: call ddp_reducer_param_wait before the backward pass", i, ddp__reducer_pname(r, i));
  if (!r->sync) return DDP_OK;
  if (!r->active) begin_iteration(r);
  ddp__rparam_t *p = &r->p[i];
  if (p->marked == 2)
    return ddp__error(DDP_ESTATE,
                      "parameter %zu ('%s') got a gradient, but it was unused in the first "
                      "iteration and static_graph promised the same graph every iteration", i,
                      ddp__reducer_pname(r, i));
  if (p->marked)
    return ddp__error(DDP_ESTATE, "parameter %zu ('%s') was marked ready twice in this iteration", i,
                      ddp__reducer_pname(r, i));
  if (!r->views)
    DDP_TRY(ddp__rbuf_copy(r->comm, p->mem, ddp__reducer_slot(r, i), p->grad, ddp__rparam_bytes(p), r->stream));
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

ddp_status_t ddp_reducer_finish(ddp_reducer_t *r) {
  DDP_CHECK_ARG(r != NULL, "r is NULL");
  if (!r->sync) return DDP_OK;
  if (!r->active) begin_iteration(r);
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
    remember(r, ddp__rbuf_zero(r->comm, p->mem, ddp__reducer_slot(r, i), ddp__rparam_bytes(p), r->stream),
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
                                       ddp__rbucket_wire_dtype(r, b), r->stream),
               "hook decompression");
  }
  if (!r->views)
    for (size_t i = 0; i < r->np; i++)
      remember(r, ddp__rbuf_copy(r->comm, r->p[i].mem, r->p[i].grad, ddp__reducer_slot(r, i),
                                 ddp__rparam_bytes(&r->p[i]), r->stream),
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
  r->iterations++;
  if (r->comm_err != DDP_OK && st == DDP_OK)
    st = ddp__error(r->comm_err, "reducer: %s", r->comm_msg);
  r->comm_err = DDP_OK;
  /* Reset for the next iteration. */
  r->active = 0;
  for (size_t i = 0; i < r->np; i++) r->p[i].marked = 0;
  if (st == DDP_OK && !r->rebuilt) st = ddp__reducer_rebuild(r);
  r->recording = 0;
  if (st == DDP_OK && missing != SIZE_MAX && !r->find_unused)
    st = ddp__error(DDP_ESTATE,
                    "parameter %zu ('%s') was not marked ready in this iteration (%zu missing); "
                    "call ddp_reducer_grad_ready for every parameter or create the reducer with "
                    "find_unused = 1", missing, ddp__reducer_pname(r, missing), nmissing);
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
      DDP_TRY(ddp__rbuf_zero(r->comm, r->p[i].mem, r->p[i].grad, ddp__rparam_bytes(&r->p[i]), r->stream));
  if (r->has_device) DDP_TRY(ddp__rbuf_sync(r->comm, DDP_MEM_CUDA, r->stream));
  return DDP_OK;
}
