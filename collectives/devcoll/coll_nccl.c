/* The NCCL transport (the comparison baseline): one NCCL communicator per ddp communicator,
 * created on first use from an ncclUniqueId that rank 0 makes and sends with MPI; collectives
 * are queued on the communicator's transport stream after the caller's work posted before them,
 * f16/bf16 natively, and the caller's stream waits for the result.
 *
 * Every wait is under the DDP_TIMEOUT_S watchdog: the communicator is created non-blocking
 * (NCCL >= 2.14) and polled with ncclCommGetAsyncError, and so is each collective while the
 * host waits for it. A failure (NCCL error, asynchronous error, timeout) aborts the NCCL
 * communicator (ncclCommAbort stops its kernels) and is sticky: later nccl collectives fail at
 * once with the first reason instead of retrying the creation on every call. Two ranks on one
 * GPU never get here: the device probe refuses nccl for them (runtime/device/device_probe.c).
 * tests/cuda_fake.c runs this file against the fake NCCL of tests/fake_cuda. */
#include "coll_device_internal.h"

#if DDP__NCCL_BACKEND
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <string.h>
#include <time.h>

#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
#define DDP__NCCL_NONBLOCKING 1 /* ncclConfig_t.blocking = 0, ncclCommFinalize */
#else
#define DDP__NCCL_NONBLOCKING 0
#endif

static ddp_status_t nccl_err(ncclResult_t r, const char *what, ncclComm_t nc) {
  return ddp__error(DDP_ENCCL, "%s failed: %s (%s)", what, ncclGetErrorString(r),
                    ncclGetLastError(nc));
}

static ddp_status_t nccl_type(ddp_dtype_t t, ncclDataType_t *out) {
  switch (t) {
    case DDP_F32: *out = ncclFloat32; return DDP_OK;
    case DDP_F64: *out = ncclFloat64; return DDP_OK;
    case DDP_F16: *out = ncclFloat16; return DDP_OK;
    case DDP_BF16: *out = ncclBfloat16; return DDP_OK;
    case DDP_I32: *out = ncclInt32; return DDP_OK;
    case DDP_I64: *out = ncclInt64; return DDP_OK;
    case DDP_U8: *out = ncclUint8; return DDP_OK;
    default: break;
  }
  return ddp__error(DDP_EINVAL, "dtype %d has no NCCL equivalent", (int)t);
}

static ncclRedOp_t nccl_op(ddp_op_t op) {
  switch (op) {
    case DDP_AVG: return ncclAvg;
    case DDP_MIN: return ncclMin;
    case DDP_MAX: return ncclMax;
    case DDP_PROD: return ncclProd;
    default: return ncclSum;
  }
}

/* Makes a failure sticky and aborts the NCCL communicator; returns st (message kept). */
static ddp_status_t nccl_break(ddp__devcoll_t *dc, ddp_status_t st) {
  if (dc->c->coll->nccl_status == DDP_OK) {
    dc->c->coll->nccl_status = st;
    snprintf(dc->c->coll->nccl_reason, sizeof dc->c->coll->nccl_reason, "%s", ddp_last_error());
  }
  if (dc->nccl) {
    ncclCommAbort((ncclComm_t)dc->nccl);
    dc->nccl = NULL;
    DDP_LOG(dc->c, DDP_LOG_WARN, "NCCL communicator aborted: %s", dc->c->coll->nccl_reason);
  }
  return st;
}

/* ---- waits under the watchdog ---------------------------------------------------------- */
typedef struct {
  ddp__device_t *d;
  ncclComm_t nc;
  ddp_event_t *ev; /* NULL: wait for the communicator's state to leave ncclInProgress */
  const char *what;
} nccl_wait_t;

/* The asynchronous error first: a collective whose event completed may still have failed. */
static ddp_status_t nccl_test(void *arg, int *done) {
  nccl_wait_t *w = arg;
  *done = 0;
  ncclResult_t a = ncclInProgress;
  ncclResult_t r = ncclCommGetAsyncError(w->nc, &a);
  if (r != ncclSuccess) return nccl_err(r, "ncclCommGetAsyncError", w->nc);
  if (a != ncclSuccess && a != ncclInProgress)
    return ddp__error(DDP_ENCCL, "%s: NCCL reported an asynchronous error: %s (%s)", w->what,
                      ncclGetErrorString(a), ncclGetLastError(w->nc));
  if (!w->ev) {
    *done = a == ncclSuccess;
    return DDP_OK;
  }
  return w->d->impl->event_query(w->d, w->ev, done);
}

/* The result of a call on a non-blocking communicator: ncclInProgress means "queued, poll
 * ncclCommGetAsyncError until it settles" (NCCL's rule before the next call). */
static ddp_status_t nccl_settle(ddp__devcoll_t *dc, ncclComm_t nc, ncclResult_t r,
                                const char *what) {
  if (r == ncclSuccess) return DDP_OK;
  if (r != ncclInProgress) return nccl_err(r, what, nc);
  nccl_wait_t w = {dc->d, nc, NULL, what};
  return ddp__devcoll_spin(dc, what, "nccl", nccl_test, &w);
}

/* ---- the communicator ------------------------------------------------------------------- */
static ddp_status_t nccl_create(ddp__devcoll_t *dc, ncclComm_t *out) {
  ddp__comm_t *c = dc->c;
  struct {
    ncclUniqueId id;
    int ok;
    char why[124];
  } msg;
  memset(&msg, 0, sizeof msg);
  if (c->rank == 0) {
    ncclResult_t r = ncclGetUniqueId(&msg.id);
    msg.ok = r == ncclSuccess;
    if (!msg.ok)
      snprintf(msg.why, sizeof msg.why, "%s (%s)", ncclGetErrorString(r), ncclGetLastError(NULL));
  }
  /* Rank 0's failure travels with the id, so no rank waits for an id that never comes. */
  ddp__ctx_t x;
  ddp__ctx_world(&x, c, "nccl-init", sizeof msg, -1);
  MPI_Request rq = MPI_REQUEST_NULL;
  DDP_MPI(MPI_Ibcast(&msg, (int)sizeof msg, MPI_BYTE, 0, c->coll->world, &rq));
  DDP_TRY(ddp__wait_all(c, 1, &rq, &x.desc));
  if (!msg.ok) return ddp__error(DDP_ENCCL, "ncclGetUniqueId failed on rank 0: %s", msg.why);
  ncclComm_t nc = NULL;
#if DDP__NCCL_NONBLOCKING
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclResult_t r = ncclCommInitRankConfig(&nc, c->size, msg.id, c->rank, &cfg);
  ddp_status_t st = nc ? nccl_settle(dc, nc, r, "ncclCommInitRankConfig")
                       : nccl_err(r == ncclSuccess ? ncclInternalError : r,
                                  "ncclCommInitRankConfig", NULL);
  if (st != DDP_OK) {
    if (nc) ncclCommAbort(nc);
    return st;
  }
#else
  /* Before NCCL 2.14 the creation blocks inside NCCL, out of the watchdog's reach. */
  ncclResult_t r = ncclCommInitRank(&nc, c->size, msg.id, c->rank);
  if (r != ncclSuccess) return nccl_err(r, "ncclCommInitRank", NULL);
#endif
  *out = nc;
  return DDP_OK;
}

/* The NCCL communicator, created on first use by every rank together. Failures are agreed on
 * (one rank's failure fails all) and sticky. */
static ddp_status_t nccl_comm(ddp__devcoll_t *dc, ncclComm_t *out) {
  ddp__comm_t *c = dc->c;
  if (dc->nccl) {
    *out = (ncclComm_t)dc->nccl;
    return DDP_OK;
  }
  if (dc->c->coll->nccl_status != DDP_OK)
    return ddp__error(dc->c->coll->nccl_status, "NCCL failed on this communicator before and is not "
                                      "tried again: %s", dc->c->coll->nccl_reason);
  ncclComm_t nc = NULL;
  ddp_status_t st = nccl_create(dc, &nc);
  char why[sizeof dc->c->coll->nccl_reason];
  snprintf(why, sizeof why, "%s", st != DDP_OK ? ddp_last_error() : "");
  if (st != DDP_ETIMEDOUT) {
    int mine = (int)st, worst = 0;
    ddp__ctx_t x;
    ddp__ctx_world(&x, c, "nccl-init-agree", sizeof mine, -1);
    MPI_Request rq = MPI_REQUEST_NULL;
    int rc = MPI_Iallreduce(&mine, &worst, 1, MPI_INT, MPI_MIN, c->coll->world, &rq);
    ddp_status_t ast = rc == MPI_SUCCESS ? ddp__wait_all(c, 1, &rq, &x.desc)
                                         : ddp__mpi_error(rc, "MPI_Iallreduce (NCCL agreement)");
    if (st == DDP_OK && ast != DDP_OK) {
      st = ast;
      snprintf(why, sizeof why, "%s", ddp_last_error());
    } else if (st == DDP_OK && worst != DDP_OK) {
      st = (ddp_status_t)worst;
      snprintf(why, sizeof why, "creating the NCCL communicator failed on another rank (%s; "
               "see that rank's message)", ddp_strerror(st));
    }
  }
  if (st != DDP_OK) {
    if (nc) ncclCommAbort(nc);
    ddp__error(st, "%s", why);
    return nccl_break(dc, st);
  }
  dc->nccl = nc;
  DDP_LOG(c, DDP_LOG_INFO, "NCCL communicator created (%d ranks, device %d, %s)", c->size,
          c->device, DDP__NCCL_NONBLOCKING ? "non-blocking" : "blocking");
  *out = nc;
  return DDP_OK;
}

/* ---- collectives --------------------------------------------------------------------------- */
static ddp_status_t nccl_enqueue(ddp__devcoll_t *dc, ncclComm_t nc, const ddp__call_t *call,
                                 ddp_stream_t *s) {
  ddp__comm_t *c = dc->c;
  ncclDataType_t t = ncclFloat32;
  DDP_TRY(nccl_type(call->a.dtype, &t));
  cudaStream_t cs = (cudaStream_t)s;
  size_t n = call->a.count, es = ddp_dtype_size(call->a.dtype);
  switch (call->kind) {
    case DDP__COLL_ALLREDUCE:
      return nccl_settle(dc, nc, ncclAllReduce(call->a.send, call->a.recv, n, t, nccl_op(ddp__call_op(call)), nc, cs),
                         "ncclAllReduce");
    case DDP__COLL_BROADCAST:
      return nccl_settle(dc, nc, ncclBroadcast(call->a.recv, call->a.recv, n, t, call->root, nc, cs),
                         "ncclBroadcast");
    case DDP__COLL_ALLGATHER:
      /* In place, send is recv + rank*n: NCCL's own in-place rule for allgather. */
      return nccl_settle(dc, nc, ncclAllGather(call->a.send, call->a.recv, n, t, nc, cs), "ncclAllGather");
    case DDP__COLL_REDUCE_SCATTER:
      if (call->a.send == call->a.recv) {
        /* Our in-place form has the input in recv and the result in its first n elements;
         * NCCL's in-place rule is recvbuff == sendbuff + rank*n (any other overlap is a race).
         * Reduce into this rank's own block, then move it to the front. */
        char *mine = (char *)call->a.recv + (size_t)c->rank * n * es;
        DDP_TRY(nccl_settle(dc, nc, ncclReduceScatter(call->a.recv, mine, n, t, nccl_op(ddp__call_op(call)), nc, cs),
                            "ncclReduceScatter (in place)"));
        if (c->rank == 0) return DDP_OK;
        return dc->d->impl->memcpy_async(dc->d, call->a.recv, mine, n * es, s);
      }
      return nccl_settle(dc, nc, ncclReduceScatter(call->a.send, call->a.recv, n, t, nccl_op(ddp__call_op(call)), nc, cs),
                         "ncclReduceScatter");
    case DDP__COLL_BARRIER: break;
  }
  return DDP_OK;
}

ddp_status_t ddp__nccl_run(ddp__devcoll_t *dc, const ddp__call_t *call, ddp_stream_t *stream) {
  ddp__device_t *d = dc->d;
  const ddp__devimpl_t *im = d->impl;
  ncclComm_t nc = NULL;
  DDP_TRY(nccl_comm(dc, &nc));
  /* NCCL's stream waits for the caller's work posted before the call, and only for that. */
  ddp_stream_t *ns = dc->s_h2d;
  ddp_status_t st = im->stream_wait(d, ns, call->ev_in);
  if (st == DDP_OK) st = nccl_enqueue(dc, nc, call, ns);
  if (st == DDP_OK) st = im->event_record(d, dc->ev_done, ns);
  if (st == DDP_OK) st = im->stream_wait(d, stream, dc->ev_done);
  if (st == DDP_OK) {
    nccl_wait_t w = {d, nc, dc->ev_done, "nccl collective"};
    st = ddp__devcoll_spin(dc, "nccl collective", "nccl", nccl_test, &w);
  }
  return st == DDP_OK ? DDP_OK : nccl_break(dc, st);
}

void ddp__nccl_free(ddp__devcoll_t *dc) {
  ncclComm_t nc = (ncclComm_t)dc->nccl;
  if (!nc) return;
  dc->nccl = NULL;
#if DDP__NCCL_NONBLOCKING
  /* Finalize (flushes, waits for every rank), bounded by DDP_TIMEOUT_S; abort when that fails
   * or takes too long, so destroying the communicator never hangs in NCCL. */
  ncclResult_t r = ncclCommFinalize(nc), a = r;
  double t0 = ddp__now();
  while (r == ncclInProgress || r == ncclSuccess) {
    if (ncclCommGetAsyncError(nc, &a) != ncclSuccess || a != ncclInProgress) break;
    if (ddp__now() - t0 > dc->c->cfg.timeout_s) break;
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  if ((r == ncclSuccess || r == ncclInProgress) && a == ncclSuccess) ncclCommDestroy(nc);
  else ncclCommAbort(nc);
#else
  ncclCommDestroy(nc);
#endif
}

#else
ddp_status_t ddp__nccl_run(ddp__devcoll_t *dc, const ddp__call_t *call, ddp_stream_t *stream) {
  (void)dc;
  (void)call;
  (void)stream;
  return ddp__error(DDP_ENOTSUP, "transport 'nccl': this library was built without NCCL");
}

void ddp__nccl_free(ddp__devcoll_t *dc) { (void)dc; }
#endif
