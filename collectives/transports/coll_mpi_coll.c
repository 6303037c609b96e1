/* The host transport's own collectives: the MPI library's allreduce, broadcast, allgather,
 * reduce-scatter and barrier on the layer's communicators, plus node-shared windows.
 *
 * Allreduce (what algorithm `mpi`, algorithms/allreduce_mpi.c, runs) is what an application calling
 * MPI_Allreduce gets (`raw` in allreduce_bench), plus the watchdog.
 * What a call really runs (np 2, Open MPI 4.1.4, measured with allreduce_bench -A raw,mpi):
 *  - a blocking ddp_allreduce (DDP_ON_TIMEOUT=abort and MPI_THREAD_MULTIPLE), which runs on
 *    the caller's thread: the blocking MPI_Allreduce itself, in place or out of place as the
 *    caller asked, waiting the way the MPI waits (Open MPI polls a core, as for `raw`).
 *    A watch thread per communicator (coll_mpi_watch.c) keeps the DDP_TIMEOUT_S guarantee for it: it
 *    answers the stall inspector after 0.25 s and ends the job with the watchdog's report at
 *    the deadline.
 *    The non-blocking form costs more than the watch: Open MPI's MPI_Iallreduce (libnbc) took
 *    1.4 us at 8 B against 0.6 us, and in place 2.4x the blocking call at 4 MB, whatever the
 *    wait loop (MPI_Wait, a tight MPI_Test spin or ddp__wait_all all measured the same).
 *    Exception: out of place above 16 MB MPI_Iallreduce beats the blocking call (64 MB: 36 ms
 *    vs 47 ms, the blocking one copies send to recv first), so it is used there, waited
 *    through ddp__wait_all like every other request.
 *  - non-blocking requests (ddp_iallreduce, the reducer's buckets), run by the progress
 *    thread while the caller computes: MPI_Iallreduce waited through ddp__wait_all, which
 *    yields the core and then naps instead of polling it away from the caller's compute
 *    (coll_wait_cpu_np2); large in-place calls as in the next case.
 *  - DDP_ON_TIMEOUT=return, or MPI below MPI_THREAD_MULTIPLE (no second thread may call MPI):
 *    a call must be able to give up, so every call is MPI_Iallreduce waited through
 *    ddp__wait_all; large in-place calls copy to scratch first (Open MPI's in-place
 *    MPI_Iallreduce is 2x slower than its out-of-place one at 64 MB: 83 ms vs 37 ms).
 * f16/bf16 go through user-defined MPI_Ops (coll_mpi_types.c); counts above INT_MAX are split
 * into chunks. The watch thread is in coll_mpi_watch.c. */
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "xport_mpi.h"

#define CHUNK_ELEMS ((size_t)1 << 30)

/* MPI_Allreduce under the watch (coll_mpi_watch.c): the call is published while it runs. */
static ddp_status_t watched_allreduce(ddp__mpi_watch_t *w, const ddp__ctx_t *x, const void *s,
                                      void *r, int n, MPI_Datatype t, MPI_Op o) {
  /* cur is 0 here. Release stores (plain stores on x86, no fence: TSan does not model
   * atomic_thread_fence): a watch that reads one of these values also sees cur's 0 stored
   * before it; the release store of the token publishes them. */
  atomic_store_explicit(&w->d_seq, x->desc.seq, memory_order_release);
  atomic_store_explicit(&w->d_coll, x->desc.coll, memory_order_release);
  atomic_store_explicit(&w->d_algo, x->desc.algo, memory_order_release);
  atomic_store_explicit(&w->d_bytes, x->desc.bytes, memory_order_release);
  atomic_store_explicit(&w->d_tag, x->desc.tag, memory_order_release);
  atomic_store_explicit(&w->cur, ++w->next, memory_order_release);
  int rc = MPI_Allreduce(s, r, n, t, o, ddp__ctx_comm(x));
  atomic_store_explicit(&w->cur, 0, memory_order_release);
  return rc == MPI_SUCCESS ? DDP_OK : ddp__mpi_error(rc, "MPI_Allreduce");
}

/* ---- allreduce ---------------------------------------------------------------------------- */
#define INPLACE_PIECE ((size_t)64 << 20)
#define INPLACE_MIN ((size_t)64 << 10) /* non-blocking path: below this in place is as fast */
#define NONBLOCKING_OOP_MIN ((size_t)16 << 20) /* out of place above this: MPI_Iallreduce */

static ddp_status_t iallreduce(ddp__ctx_t *x, const void *s, void *r, int n, MPI_Datatype t,
                               MPI_Op o) {
  MPI_Request rq = MPI_REQUEST_NULL;
  DDP_MPI(MPI_Iallreduce(s, r, n, t, o, ddp__ctx_comm(x), &rq));
  return ddp__wait_all(x->c, 1, &rq, &x->desc);
}

/* Under the simulator (ddp_internal.h) every call is the blocking MPI_Allreduce: SMPI's
 * MPI_Iallreduce ignores --cfg=smpi/allreduce and runs its own schedule, and a simulated rank
 * has no watchdog to serve (SMPI reports MPI_THREAD_SINGLE). */
static ddp_status_t simulated_allreduce(ddp__ctx_t *x, const ddp__ar_t *a, MPI_Datatype t,
                                        MPI_Op o) {
  size_t es = ddp_dtype_size(a->dtype);
  int inplace = a->send == a->recv;
  for (size_t off = 0; off < a->count; off += CHUNK_ELEMS) {
    size_t n = a->count - off < CHUNK_ELEMS ? a->count - off : CHUNK_ELEMS;
    const void *s = inplace ? MPI_IN_PLACE : (const char *)a->send + off * es;
    DDP_MPI(MPI_Allreduce(s, (char *)a->recv + off * es, (int)n, t, o, ddp__ctx_comm(x)));
  }
  return DDP_OK;
}

ddp_status_t ddp__mpi_allreduce(ddp__ctx_t *x, const ddp__ar_t *a) {
  ddp__coll_t *cs = x->cs;
  MPI_Datatype t = ddp__mpi_type(cs, a->dtype);
  MPI_Op o = ddp__mpi_op(cs, a->dtype, a->op);
  if (DDP_SIMULATED) return simulated_allreduce(x, a, t, o);
  size_t es = ddp_dtype_size(a->dtype);
  int inplace = a->send == a->recv;
  ddp__mpi_watch_t *w = NULL;
  /* The blocking call only on the thread of a caller blocked in this allreduce, where it is
   * what the application's own MPI_Allreduce would be; on the progress thread (non-blocking
   * requests, the reducer's buckets) MPI_Iallreduce under ddp__wait_all, whose wait yields the
   * core and naps instead of polling it away from the caller's compute. */
  if (x->on_caller && !x->c->mpi_serialized && !x->c->cfg.on_timeout_return) w = cs->mpi_watch ? cs->mpi_watch : ddp__mpi_watch_get(cs);
  if (w && a->count <= CHUNK_ELEMS && (inplace || a->count * es <= NONBLOCKING_OOP_MIN))
    return watched_allreduce(w, x, inplace ? MPI_IN_PLACE : a->send, a->recv, (int)a->count, t, o);
  for (size_t off = 0; off < a->count; off += CHUNK_ELEMS) {
    size_t n = a->count - off < CHUNK_ELEMS ? a->count - off : CHUNK_ELEMS;
    const void *s = inplace ? MPI_IN_PLACE : (const char *)a->send + off * es;
    void *r = (char *)a->recv + off * es;
    if (w && (inplace || n * es <= NONBLOCKING_OOP_MIN)) {
      DDP_TRY(watched_allreduce(w, x, s, r, (int)n, t, o));
    } else if (!w && inplace && n * es > INPLACE_MIN) {
      for (size_t p = 0; p < n; p += INPLACE_PIECE / es) {
        size_t m = n - p < INPLACE_PIECE / es ? n - p : INPLACE_PIECE / es;
        void *tmp = NULL;
        DDP_TRY(x->xp->scratch(x, 3, m * es, &tmp));
        ddp__copy_host(tmp, (char *)r + p * es, m * es);
        DDP_TRY(iallreduce(x, tmp, (char *)r + p * es, (int)m, t, o));
      }
    } else {
      DDP_TRY(iallreduce(x, s, r, (int)n, t, o));
    }
  }
  return DDP_OK;
}

/* ---- broadcast, allgather, reduce-scatter, barrier -------------------------------------- */
#define BYTES_CHUNK ((size_t)1 << 30) /* per MPI call when a count exceeds INT_MAX */

ddp_status_t ddp__mpi_bcast(ddp__ctx_t *x, void *buf, size_t bytes, int root) {
  MPI_Comm comm = ddp__ctx_comm(x);
  for (size_t off = 0; off < bytes; off += BYTES_CHUNK) {
    size_t n = bytes - off < BYTES_CHUNK ? bytes - off : BYTES_CHUNK;
    MPI_Request rq = MPI_REQUEST_NULL;
    DDP_MPI(MPI_Ibcast((char *)buf + off, (int)n, MPI_BYTE, root, comm, &rq));
    DDP_TRY(ddp__wait_all(x->c, 1, &rq, &x->desc));
  }
  return DDP_OK;
}

ddp_status_t ddp__mpi_allgather(ddp__ctx_t *x, const void *send, void *recv, size_t bytes) {
  MPI_Comm comm = ddp__ctx_comm(x);
  int inplace = send == (const void *)((char *)recv + (size_t)x->rank * bytes);
  if (bytes == 0) return DDP_OK;
  if (bytes <= (size_t)INT_MAX) {
    MPI_Request rq = MPI_REQUEST_NULL;
    DDP_MPI(MPI_Iallgather(inplace ? MPI_IN_PLACE : send, (int)bytes, MPI_BYTE, recv,
                           (int)bytes, MPI_BYTE, comm, &rq));
    return ddp__wait_all(x->c, 1, &rq, &x->desc);
  }
  /* Each rank's block is sent in pieces; a resized type places piece k of rank i at
   * recv + i*bytes + off. */
  for (size_t off = 0; off < bytes; off += BYTES_CHUNK) {
    size_t n = bytes - off < BYTES_CHUNK ? bytes - off : BYTES_CHUNK;
    MPI_Datatype blk, t;
    DDP_MPI(MPI_Type_contiguous((int)n, MPI_BYTE, &blk));
    int rc = MPI_Type_create_resized(blk, 0, (MPI_Aint)bytes, &t);
    MPI_Type_free(&blk);
    if (rc != MPI_SUCCESS) return ddp__mpi_error(rc, "MPI_Type_create_resized");
    MPI_Type_commit(&t);
    MPI_Request rq = MPI_REQUEST_NULL;
    if (inplace) {
      rc = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, (char *)recv + off, 1, t, comm,
                          &rq);
    } else {
      rc = MPI_Iallgather((const char *)send + off, (int)n, MPI_BYTE, (char *)recv + off, 1, t,
                          comm, &rq);
    }
    ddp_status_t st = rc == MPI_SUCCESS ? ddp__wait_all(x->c, 1, &rq, &x->desc)
                                        : ddp__mpi_error(rc, "MPI_Iallgather");
    MPI_Type_free(&t);
    DDP_TRY(st);
  }
  return DDP_OK;
}

#define ELEMS_CHUNK ((size_t)1 << 28)

ddp_status_t ddp__mpi_reduce_scatter(ddp__ctx_t *x, const void *send, void *recv, size_t n,
                                     ddp_dtype_t dtype, ddp_op_t op) {
  ddp__coll_t *cs = x->cs;
  MPI_Comm comm = ddp__ctx_comm(x);
  size_t es = ddp_dtype_size(dtype);
  int inplace = send == recv;
  MPI_Datatype t = ddp__mpi_type(cs, dtype);
  MPI_Op o = ddp__mpi_op(cs, dtype, op);
  if (n == 0) return DDP_OK;
  if (n <= ELEMS_CHUNK) {
    MPI_Request rq = MPI_REQUEST_NULL;
    DDP_MPI(MPI_Ireduce_scatter_block(inplace ? MPI_IN_PLACE : send, recv, (int)n, t, o, comm,
                                      &rq));
    return ddp__wait_all(x->c, 1, &rq, &x->desc);
  }
  /* Piece k of every rank's block gathered contiguously in scratch, then reduced. */
  size_t p = (size_t)x->size;
  for (size_t off = 0; off < n; off += ELEMS_CHUNK) {
    size_t m = n - off < ELEMS_CHUNK ? n - off : ELEMS_CHUNK;
    void *tmp = NULL, *out = NULL;
    DDP_TRY(x->xp->scratch(x, 0, m * p * es, &tmp));
    DDP_TRY(x->xp->scratch(x, 1, m * es, &out));
    for (size_t i = 0; i < p; i++)
      memcpy((char *)tmp + i * m * es, (const char *)send + (i * n + off) * es, m * es);
    MPI_Request rq = MPI_REQUEST_NULL;
    DDP_MPI(MPI_Ireduce_scatter_block(tmp, out, (int)m, t, o, comm, &rq));
    DDP_TRY(ddp__wait_all(x->c, 1, &rq, &x->desc));
    memcpy((char *)recv + off * es, out, m * es);
  }
  return DDP_OK;
}

ddp_status_t ddp__mpi_barrier(ddp__ctx_t *x) {
  MPI_Request rq = MPI_REQUEST_NULL;
  int rc = MPI_Ibarrier(ddp__ctx_comm(x), &rq);
  return rc == MPI_SUCCESS ? ddp__wait_all(x->c, 1, &rq, &x->desc)
                           : ddp__mpi_error(rc, "MPI_Ibarrier");
}

ddp_status_t ddp__mpi_agree_min(ddp__ctx_t *x, int *v) {
  int all = 0;
  int rc = MPI_Allreduce(v, &all, 1, MPI_INT, MPI_MIN, ddp__ctx_comm(x));
  if (rc != MPI_SUCCESS) return ddp__mpi_error(rc, "MPI_Allreduce (agreement)");
  *v = all;
  return DDP_OK;
}

/* ---- node-shared segments ------------------------------------------------------------------ */
ddp_status_t ddp__mpi_seg_alloc(ddp__ctx_t *x, size_t bytes, ddp__xhandle_t *seg, void **bases) {
  memset(seg, 0, sizeof *seg);
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "alloc_shared_noncontig", "true");
  void *base = NULL;
  MPI_Win win = MPI_WIN_NULL;
  int rc = MPI_Win_allocate_shared((MPI_Aint)bytes, 1, info, ddp__ctx_comm(x), &base, &win);
  MPI_Info_free(&info);
  if (rc != MPI_SUCCESS) return ddp__mpi_error(rc, "MPI_Win_allocate_shared");
  ddp__xh_set_win(seg, win);
  for (int q = 0; q < x->size; q++) {
    MPI_Aint sz = 0;
    int du = 0;
    void *pb = NULL;
    rc = MPI_Win_shared_query(win, q, &sz, &du, &pb);
    if (rc != MPI_SUCCESS) {
      ddp__mpi_seg_free(seg);
      return ddp__mpi_error(rc, "MPI_Win_shared_query");
    }
    bases[q] = pb;
  }
  return DDP_OK;
}

void ddp__mpi_seg_free(ddp__xhandle_t *seg) {
  MPI_Win w = ddp__xh_win(seg);
  if (w != MPI_WIN_NULL) MPI_Win_free(&w);
  memset(seg, 0, sizeof *seg);
}
