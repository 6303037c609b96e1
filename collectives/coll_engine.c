/* The public collective API and the progress engine.
 *
 * Every collective becomes a request that executes on one thread at a time, in posting order:
 *  - non-blocking calls queue the request for the communicator's progress thread (started on
 *    the first one), which runs them one after the other; the caller never has to poll;
 *  - a blocking call with nothing queued runs at once on the caller's thread (no hand-over
 *    latency); with requests queued it queues behind them and sleeps until done;
 *  - when MPI is not MPI_THREAD_MULTIPLE every collective runs on the caller's thread at the
 *    time it is posted (non-blocking calls then complete before they return).
 * Arguments are checked on the caller's thread before anything is queued, so a bad call
 * returns at once and never touches the output. A live request holds the communicator
 * (ddp__comm_retain): ddp_comm_destroy is DDP_EBUSY until it has been waited/tested. */
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "coll_state.h"
#include "device_internal.h"

/* A request is the call's one description (ddp__call_t, with the algorithm chosen when it was
 * posted) and the world context it runs in, both made once at post time, plus the engine's
 * bookkeeping. */
struct ddp_request {
  ddp__comm_t *c;
  ddp__call_t call;
  ddp__ctx_t x;                /* host memory: the world group on the host transport */
  int on_caller;               /* runs on the thread of the caller blocked in this call */
  int done;                    /* under cs->mu */
  ddp_status_t st;
  struct ddp_request *next;
  char msg[512];               /* the executing thread's error message (last: not zeroed) */
};

/* ---- execution --------------------------------------------------------------------------- */
static const char *const kind_names[] = {"allreduce", "broadcast", "allgather", "reduce_scatter",
                                         "barrier"};

/* Runs r on this thread and records its status (the caller holds cs->exec). `bind`: the
 * caller's thread, which may not have bound the communicator's device yet (the engine's own
 * thread did when it started). */
static void execute(struct ddp_request *r, int bind) {
  ddp__comm_t *c = r->c;
  ddp__coll_t *cs = c->coll;
  const ddp__call_t *call = &r->call;
  ddp_status_t st = bind ? ddp__device_bind_thread(c) : DDP_OK;
  /* Only the thread holding cs->exec writes seq; others read it (diagnostics): a plain
   * store, no locked increment on every collective. */
  if (st == DDP_OK)
    atomic_store_explicit(&cs->seq, atomic_load_explicit(&cs->seq, memory_order_relaxed) + 1,
                          memory_order_release);
  if (st == DDP_OK && c->cfg.check) {
    ddp__coll_fp_t fp = {cs->seq, (int)call->kind, -1, -1, (uint64_t)call->a.count, -1};
    if (call->kind != DDP__COLL_BARRIER) fp.dtype = (int)call->a.dtype;
    if (call->kind == DDP__COLL_ALLREDUCE || call->kind == DDP__COLL_REDUCE_SCATTER)
      fp.op = (int)ddp__call_op(call);
    if (call->kind == DDP__COLL_BROADCAST) fp.root = call->root;
    st = ddp__guard_check(c, &fp);
  }
  if (st == DDP_OK && call->opts.mem == DDP_MEM_CUDA) {
    st = ddp__coll_device_run(c, cs, call);
  } else if (st == DDP_OK) {
    ddp__ctx_t *x = &r->x;
    x->desc.seq = cs->seq;
    x->on_caller = r->on_caller;
    const char *kn = kind_names[call->kind];
    if (c->timeline) ddp__timeline_event(c->timeline, 'B', kn, "coll", NULL);
    st = ddp__coll_exec(x, call);
    if (c->timeline) ddp__timeline_event(c->timeline, 'E', kn, "coll", NULL);
  }
  r->st = st;
  if (st != DDP_OK) snprintf(r->msg, sizeof r->msg, "%s", ddp_last_error());
  if (r->call.ev_in) ddp__coll_device_release(c, r->call.ev_in);
  r->call.ev_in = NULL;
}

static void *engine_main(void *arg) {
  ddp__coll_t *cs = arg;
  /* Before anything else on this thread: the communicator's device is current, so CUDA-aware
   * MPI and NCCL called from here work on it, not on device 0. A failure shows again, with
   * its message, in the first device collective's own calls. */
  (void)ddp__device_bind_thread(cs->c);
  pthread_mutex_lock(&cs->mu);
  for (;;) {
    while (!cs->head && !cs->stop) pthread_cond_wait(&cs->cv_work, &cs->mu);
    if (!cs->head) break; /* stop requested and nothing left */
    struct ddp_request *r = cs->head;
    cs->head = r->next;
    if (!cs->head) cs->tail = NULL;
    pthread_mutex_unlock(&cs->mu);
    pthread_mutex_lock(&cs->exec);
    execute(r, 0);
    pthread_mutex_unlock(&cs->exec);
    pthread_mutex_lock(&cs->mu);
    r->done = 1;
    cs->pending--;
    pthread_cond_broadcast(&cs->cv_done);
  }
  pthread_mutex_unlock(&cs->mu);
  return NULL;
}

ddp_status_t ddp__coll_engine_stop(ddp__coll_t *cs) {
  pthread_mutex_lock(&cs->mu);
  int started = cs->thread_started;
  cs->stop = 1;
  pthread_cond_broadcast(&cs->cv_work);
  pthread_mutex_unlock(&cs->mu);
  if (started) pthread_join(cs->thread, NULL);
  cs->thread_started = 0;
  return DDP_OK;
}

/* Runs r on the thread of the caller blocked in it (cs->exec held): waits inside it may spin
 * longer (idle_waiters: the caller's core would idle anyway), and the mpi algorithm may use the
 * MPI's own blocking call (on_caller). */
static void execute_for_caller(ddp__coll_t *cs, struct ddp_request *r) {
  r->on_caller = 1;
  atomic_fetch_add(&cs->idle_waiters, 1);
  execute(r, 1);
  atomic_fetch_sub(&cs->idle_waiters, 1);
}

/* Hands r to the engine (non-blocking) or runs it here. r->done is set when finished. */
static ddp_status_t submit(struct ddp_request *r, int blocking) {
  ddp__coll_t *cs = r->c->coll;
  if (r->c->mpi_serialized) {
    pthread_mutex_lock(&cs->exec);
    if (blocking) execute_for_caller(cs, r);
    else execute(r, 1);
    pthread_mutex_unlock(&cs->exec);
    r->done = 1;
    return DDP_OK;
  }
  /* Blocking with nothing queued or running: execute here. The common case takes one lock
   * (exec, tried) instead of two: a request queued after this check runs after this call,
   * which is posting order. */
  if (blocking && atomic_load(&cs->pending) == 0 && pthread_mutex_trylock(&cs->exec) == 0) {
    if (atomic_load(&cs->pending) == 0) {
      execute_for_caller(cs, r);
      pthread_mutex_unlock(&cs->exec);
      r->done = 1;
      return DDP_OK;
    }
    pthread_mutex_unlock(&cs->exec);
  }
  pthread_mutex_lock(&cs->mu);
  if (blocking && cs->pending == 0) {
    /* Nothing queued or running: execute here. Lock order is mu -> exec everywhere. */
    pthread_mutex_lock(&cs->exec);
    pthread_mutex_unlock(&cs->mu);
    execute_for_caller(cs, r);
    pthread_mutex_unlock(&cs->exec);
    r->done = 1;
    return DDP_OK;
  }
  if (!cs->thread_started) {
    int rc = pthread_create(&cs->thread, NULL, engine_main, cs);
    if (rc != 0) {
      pthread_mutex_unlock(&cs->mu);
      return ddp__error(DDP_EINTERNAL, "cannot start the collectives progress thread (error %d)", rc);
    }
    cs->thread_started = 1;
  }
  r->next = NULL;
  if (cs->tail) cs->tail->next = r;
  else cs->head = r;
  cs->tail = r;
  cs->pending++;
  pthread_cond_signal(&cs->cv_work);
  if (blocking) {
    atomic_fetch_add(&cs->idle_waiters, 1);
    while (!r->done) pthread_cond_wait(&cs->cv_done, &cs->mu);
    atomic_fetch_sub(&cs->idle_waiters, 1);
  }
  pthread_mutex_unlock(&cs->mu);
  return DDP_OK;
}

static ddp_status_t finish_status(const struct ddp_request *r) {
  if (r->st == DDP_OK) return DDP_OK;
  return ddp__error(r->st, "%s", r->msg);
}

/* ---- argument checks --------------------------------------------------------------------- */
static ddp_status_t check_opts(const ddp_coll_opts_t *opts) {
  if (!opts) return DDP_OK;
  DDP_CHECK_ARG((int)opts->mem >= 0 && opts->mem < DDP_MEM_COUNT,
                "opts->mem is %d: not a ddp_mem_t (host=0, cuda=1)", (int)opts->mem);
  DDP_CHECK_ARG((unsigned)opts->algo < DDP_ALGO_COUNT,
                "opts->algo is %d: not a ddp_algo_t (valid: 0..%d, auto mpi ring rhd shm hier)",
                (int)opts->algo, DDP_ALGO_COUNT - 1);
  return DDP_OK;
}

static ddp_status_t check_dtype(ddp_dtype_t dtype) {
  DDP_CHECK_ARG((int)dtype >= 0 && dtype < DDP_DTYPE_COUNT,
                "dtype %d is not a ddp_dtype_t (valid: 0..%d, f32 f64 f16 bf16 i32 i64 u8)",
                (int)dtype, DDP_DTYPE_COUNT - 1);
  return DDP_OK;
}

static ddp_status_t check_op(ddp_op_t op) {
  DDP_CHECK_ARG((int)op >= 0 && op < DDP_OP_COUNT,
                "op %d is not a ddp_op_t (valid: 0..%d, sum avg min max prod)", (int)op,
                DDP_OP_COUNT - 1);
  return DDP_OK;
}

/* count elements of es bytes, times `mult` blocks, must fit in size_t and be addressable. */
static ddp_status_t check_count(size_t count, size_t es, size_t mult, const char *name) {
  size_t bytes = 0; /* one multiplication, no division: this runs on every call */
  int fits = !__builtin_mul_overflow(count, es * mult, &bytes) && bytes <= ((size_t)1 << 62);
  DDP_CHECK_ARG(fits, "%s %zu overflows: %zu elements of %zu bytes (x%zu) exceed the "
                "address space", name, count, count, es, mult);
  return DDP_OK;
}

static int overlap(const void *a, size_t na, const void *b, size_t nb) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return na && nb && x < y + nb && y < x + na;
}

/* Requests are built on the caller's stack; post() copies non-blocking ones to the heap (no
 * field points into the request). The call is described here once: its buffers, count,
 * dtype and op (avg as sum + avg), and the world context it will run in. */
static void init_request(ddp__comm_t *c, ddp__coll_kind_t kind, const void *send, void *recv,
                         size_t count, ddp_dtype_t dtype, ddp_op_t op,
                         const ddp_coll_opts_t *opts, struct ddp_request *r) {
  /* Field by field rather than a memset of the whole request: this runs on every call. */
  ddp__call_t *call = &r->call;
  r->c = c;
  call->kind = kind;
  call->a.send = send;
  call->a.recv = recv;
  call->a.count = count;
  call->a.dtype = dtype;
  call->avg = op == DDP_AVG;
  call->a.op = call->avg ? DDP_SUM : op;
  call->root = -1;
  call->algo = NULL;
  call->ev_in = NULL;
  if (opts) call->opts = *opts;
  else ddp_coll_opts_default(&call->opts);
  size_t es = kind == DDP__COLL_BARRIER ? 0 : ddp_dtype_size(dtype);
  ddp__ctx_world(&r->x, c, kind_names[kind], count * es, call->opts.tag);
  r->x.desc.algo = "mpi";
  r->on_caller = 0;
  r->done = 0;
  r->st = DDP_OK;
  r->next = NULL;
  r->msg[0] = '\0';
}

ddp_status_t ddp_coll_opts_default(ddp_coll_opts_t *opts) {
  DDP_CHECK_ARG(opts != NULL, "opts is NULL");
  opts->algo = DDP_ALGO_AUTO;
  opts->mem = DDP_MEM_HOST;
  opts->stream = NULL;
  opts->tag = -1;
  return DDP_OK;
}

/* Posts a prepared request: blocking runs it to completion here; non-blocking hands a heap
 * copy to the engine. A device collective records its input event on the caller's stream
 * first: now, not when the engine gets to it. */
static ddp_status_t post(struct ddp_request *r, ddp_request_t **req) {
  ddp__call_t *call = &r->call;
  if (call->opts.mem == DDP_MEM_CUDA)
    DDP_TRY(ddp__coll_device_post(r->c, call->kind, call->opts.stream, &call->ev_in));
  if (!req) {
    ddp_status_t st = submit(r, 1);
    if (st == DDP_OK) st = finish_status(r);
    else if (call->ev_in) ddp__coll_device_release(r->c, call->ev_in);
    return st;
  }
  struct ddp_request *h = malloc(sizeof *h);
  if (!h) {
    if (call->ev_in) ddp__coll_device_release(r->c, call->ev_in);
    return ddp__error(DDP_ENOMEM, "collective request: out of memory");
  }
  memcpy(h, r, sizeof *h);
  ddp__comm_retain(h->c);
  ddp_status_t st = submit(h, 0);
  if (st != DDP_OK) {
    if (h->call.ev_in) ddp__coll_device_release(h->c, h->call.ev_in);
    ddp__comm_release(h->c);
    free(h);
    return st;
  }
  *req = h;
  return DDP_OK;
}

/* ---- allreduce ----------------------------------------------------------------------------- */
static ddp_status_t allreduce_post(ddp_comm_t *comm, const void *send, void *recv, size_t count,
                                   ddp_dtype_t dtype, ddp_op_t op, const ddp_coll_opts_t *opts,
                                   ddp_request_t **req, int nb) {
  ddp__comm_t *c = NULL;
  DDP_TRY(ddp__comm_get(comm, "comm", &c));
  if (nb) DDP_CHECK_ARG(req != NULL, "req is NULL");
  DDP_TRY(check_dtype(dtype));
  DDP_TRY(check_op(op));
  DDP_TRY(check_opts(opts));
  size_t es = ddp_dtype_size(dtype);
  DDP_TRY(check_count(count, es, 1, "count"));
  size_t bytes = count * es;
  DDP_CHECK_ARG(count == 0 || recv != NULL, "recv is NULL with count %zu", count);
  DDP_CHECK_ARG(count == 0 || send != NULL, "send is NULL with count %zu (use DDP_IN_PLACE)", count);
  if (send == DDP_IN_PLACE) send = recv;
  DDP_CHECK_ARG(send == recv || !overlap(send, bytes, recv, bytes),
                "send %p and recv %p overlap partially (%zu bytes): use the same pointer or "
                "DDP_IN_PLACE for an in-place allreduce", send, (void *)recv, bytes);
  struct ddp_request rr, *r = &rr;
  init_request(c, DDP__COLL_ALLREDUCE, send, recv, count, dtype, op, opts, r);
  /* Selected once, here, on the caller's thread: a case the algorithm cannot run fails now. */
  if (r->call.opts.mem == DDP_MEM_HOST)
    DDP_TRY(ddp__select(c, r->call.opts.algo, &r->x, &r->call.a, &r->call.algo));
  return post(r, nb ? req : NULL);
}

ddp_status_t ddp_allreduce(ddp_comm_t *comm, const void *send, void *recv, size_t count,
                           ddp_dtype_t dtype, ddp_op_t op, const ddp_coll_opts_t *opts) {
  return allreduce_post(comm, send, recv, count, dtype, op, opts, NULL, 0);
}

ddp_status_t ddp_iallreduce(ddp_comm_t *comm, const void *send, void *recv, size_t count,
                            ddp_dtype_t dtype, ddp_op_t op, const ddp_coll_opts_t *opts,
                            ddp_request_t **req) {
  return allreduce_post(comm, send, recv, count, dtype, op, opts, req, 1);
}

/* ---- broadcast ----------------------------------------------------------------------------- */
static ddp_status_t broadcast_post(ddp_comm_t *comm, void *buf, size_t count, ddp_dtype_t dtype,
                                   int root, const ddp_coll_opts_t *opts, ddp_request_t **req,
                                   int nb) {
  ddp__comm_t *c = NULL;
  DDP_TRY(ddp__comm_get(comm, "comm", &c));
  if (nb) DDP_CHECK_ARG(req != NULL, "req is NULL");
  DDP_TRY(check_dtype(dtype));
  DDP_TRY(check_opts(opts));
  DDP_TRY(check_count(count, ddp_dtype_size(dtype), 1, "count"));
  DDP_CHECK_ARG(count == 0 || buf != NULL, "buf is NULL with count %zu", count);
  DDP_CHECK_ARG(root >= 0 && root < c->size, "root %d is out of range (world size %d)", root,
                c->size);
  struct ddp_request rr, *r = &rr;
  init_request(c, DDP__COLL_BROADCAST, buf, buf, count, dtype, DDP_SUM, opts, r);
  r->call.root = root;
  return post(r, nb ? req : NULL);
}

ddp_status_t ddp_broadcast(ddp_comm_t *comm, void *buf, size_t count, ddp_dtype_t dtype, int root,
                           const ddp_coll_opts_t *opts) {
  return broadcast_post(comm, buf, count, dtype, root, opts, NULL, 0);
}

ddp_status_t ddp_ibroadcast(ddp_comm_t *comm, void *buf, size_t count, ddp_dtype_t dtype,
                            int root, const ddp_coll_opts_t *opts, ddp_request_t **req) {
  return broadcast_post(comm, buf, count, dtype, root, opts, req, 1);
}

/* ---- allgather ----------------------------------------------------------------------------- */
static ddp_status_t allgather_post(ddp_comm_t *comm, const void *send, void *recv,
                                   size_t send_count, ddp_dtype_t dtype,
                                   const ddp_coll_opts_t *opts, ddp_request_t **req, int nb) {
  ddp__comm_t *c = NULL;
  DDP_TRY(ddp__comm_get(comm, "comm", &c));
  if (nb) DDP_CHECK_ARG(req != NULL, "req is NULL");
  DDP_TRY(check_dtype(dtype));
  DDP_TRY(check_opts(opts));
  size_t es = ddp_dtype_size(dtype);
  DDP_TRY(check_count(send_count, es, (size_t)c->size, "send_count"));
  size_t bytes = send_count * es;
  DDP_CHECK_ARG(send_count == 0 || recv != NULL, "recv is NULL with send_count %zu", send_count);
  DDP_CHECK_ARG(send_count == 0 || send != NULL, "send is NULL with send_count %zu (use DDP_IN_PLACE)",
                send_count);
  void *mine = (char *)recv + (size_t)c->rank * bytes;
  if (send == DDP_IN_PLACE) send = mine;
  DDP_CHECK_ARG(send == mine || !overlap(send, bytes, recv, bytes * (size_t)c->size),
                "send %p overlaps recv %p but is not this rank's block (recv + rank*send_count): "
                "use DDP_IN_PLACE", send, recv);
  struct ddp_request rr, *r = &rr;
  init_request(c, DDP__COLL_ALLGATHER, send, recv, send_count, dtype, DDP_SUM, opts, r);
  return post(r, nb ? req : NULL);
}

ddp_status_t ddp_allgather(ddp_comm_t *comm, const void *send, void *recv, size_t send_count,
                           ddp_dtype_t dtype, const ddp_coll_opts_t *opts) {
  return allgather_post(comm, send, recv, send_count, dtype, opts, NULL, 0);
}

ddp_status_t ddp_iallgather(ddp_comm_t *comm, const void *send, void *recv, size_t send_count,
                            ddp_dtype_t dtype, const ddp_coll_opts_t *opts, ddp_request_t **req) {
  return allgather_post(comm, send, recv, send_count, dtype, opts, req, 1);
}

/* ---- reduce-scatter ------------------------------------------------------------------------ */
static ddp_status_t reduce_scatter_post(ddp_comm_t *comm, const void *send, void *recv,
                                        size_t recv_count, ddp_dtype_t dtype, ddp_op_t op,
                                        const ddp_coll_opts_t *opts, ddp_request_t **req, int nb) {
  ddp__comm_t *c = NULL;
  DDP_TRY(ddp__comm_get(comm, "comm", &c));
  if (nb) DDP_CHECK_ARG(req != NULL, "req is NULL");
  DDP_TRY(check_dtype(dtype));
  DDP_TRY(check_op(op));
  DDP_TRY(check_opts(opts));
  size_t es = ddp_dtype_size(dtype);
  DDP_TRY(check_count(recv_count, es, (size_t)c->size, "recv_count"));
  size_t bytes = recv_count * es;
  DDP_CHECK_ARG(recv_count == 0 || recv != NULL, "recv is NULL with recv_count %zu", recv_count);
  DDP_CHECK_ARG(recv_count == 0 || send != NULL, "send is NULL with recv_count %zu (use DDP_IN_PLACE)",
                recv_count);
  if (send == DDP_IN_PLACE) send = recv;
  /* In place, NCCL's form: recv is this rank's block of send (no buffer besides the input). */
  const void *own = (const char *)send + (size_t)c->rank * bytes;
  DDP_CHECK_ARG(send == recv || recv == own || !overlap(send, bytes * (size_t)c->size, recv, bytes),
                "send %p and recv %p overlap partially: use DDP_IN_PLACE (input in recv, "
                "size*recv_count elements; result in its first recv_count) or recv = send + "
                "rank*recv_count elements (%p: result in this rank's block)", send, recv, own);
  struct ddp_request rr, *r = &rr;
  init_request(c, DDP__COLL_REDUCE_SCATTER, send, recv, recv_count, dtype, op, opts, r);
  return post(r, nb ? req : NULL);
}

ddp_status_t ddp_reduce_scatter(ddp_comm_t *comm, const void *send, void *recv, size_t recv_count,
                                ddp_dtype_t dtype, ddp_op_t op, const ddp_coll_opts_t *opts) {
  return reduce_scatter_post(comm, send, recv, recv_count, dtype, op, opts, NULL, 0);
}

ddp_status_t ddp_ireduce_scatter(ddp_comm_t *comm, const void *send, void *recv,
                                 size_t recv_count, ddp_dtype_t dtype, ddp_op_t op,
                                 const ddp_coll_opts_t *opts, ddp_request_t **req) {
  return reduce_scatter_post(comm, send, recv, recv_count, dtype, op, opts, req, 1);
}

/* ---- barrier ------------------------------------------------------------------------------- */
static ddp_status_t barrier_post(ddp_comm_t *comm, ddp_request_t **req, int nb) {
  ddp__comm_t *c = NULL;
  DDP_TRY(ddp__comm_get(comm, "comm", &c));
  if (nb) DDP_CHECK_ARG(req != NULL, "req is NULL");
  struct ddp_request rr, *r = &rr;
  init_request(c, DDP__COLL_BARRIER, NULL, NULL, 0, DDP_F32, DDP_SUM, NULL, r);
  return post(r, nb ? req : NULL);
}

ddp_status_t ddp_barrier(ddp_comm_t *comm) { return barrier_post(comm, NULL, 0); }
ddp_status_t ddp_ibarrier(ddp_comm_t *comm, ddp_request_t **req) {
  return barrier_post(comm, req, 1);
}

/* ---- completion ---------------------------------------------------------------------------- */
static ddp_status_t complete(ddp_request_t **req) {
  struct ddp_request *r = *req;
  ddp__comm_t *c = r->c;
  ddp_status_t st = finish_status(r);
  free(r);
  *req = NULL;
  ddp__comm_release(c);
  return st;
}

ddp_status_t ddp_test(ddp_request_t **req, int *done) {
  DDP_CHECK_ARG(req != NULL, "req is NULL");
  DDP_CHECK_ARG(done != NULL, "done is NULL");
  DDP_CHECK_ARG(*req != NULL, "*req is NULL (already completed, or never posted)");
  struct ddp_request *r = *req;
  ddp__coll_t *cs = r->c->coll;
  pthread_mutex_lock(&cs->mu);
  int d = r->done;
  pthread_mutex_unlock(&cs->mu);
  *done = d;
  if (!d) return DDP_OK;
  return complete(req);
}

ddp_status_t ddp_wait(ddp_request_t **req) {
  DDP_CHECK_ARG(req != NULL, "req is NULL");
  DDP_CHECK_ARG(*req != NULL, "*req is NULL (already waited, or never posted)");
  struct ddp_request *r = *req;
  ddp__coll_t *cs = r->c->coll;
  pthread_mutex_lock(&cs->mu);
  if (!r->done) {
    atomic_fetch_add(&cs->idle_waiters, 1);
    while (!r->done) pthread_cond_wait(&cs->cv_done, &cs->mu);
    atomic_fetch_sub(&cs->idle_waiters, 1);
  }
  pthread_mutex_unlock(&cs->mu);
  return complete(req);
}

ddp_status_t ddp_waitall(size_t n, ddp_request_t **reqs) {
  DDP_CHECK_ARG(n == 0 || reqs != NULL, "reqs is NULL with n %zu", n);
  ddp_status_t first = DDP_OK;
  char msg[512] = "";
  for (size_t i = 0; i < n; i++) {
    if (!reqs[i]) continue;
    ddp_status_t st = ddp_wait(&reqs[i]);
    if (st != DDP_OK && first == DDP_OK) {
      first = st;
      snprintf(msg, sizeof msg, "request %zu: %s", i, ddp_last_error());
    }
  }
  if (first != DDP_OK) return ddp__error(first, "%s", msg);
  return DDP_OK;
}
