/* Private to the MPI transports (host, CUDA-aware, collectives): the MPI handles they keep in
 * the layer's opaque transport storage (ddp__xhandle_t, ddp__xreq_t). MPI_Comm, MPI_Request
 * and MPI_Win are ints in MPICH and pointers in Open MPI: both fit. */
#ifndef DDP_XPORT_MPI_H
#define DDP_XPORT_MPI_H

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "coll_state.h"

_Static_assert(sizeof(MPI_Comm) <= sizeof(((ddp__xhandle_t *)0)->u), "MPI_Comm fits a handle");
_Static_assert(sizeof(MPI_Win) <= sizeof(((ddp__xhandle_t *)0)->u), "MPI_Win fits a handle");
_Static_assert(DDP__XREQ_PARTS * sizeof(MPI_Request) <= sizeof(((ddp__xreq_t *)0)->parts),
               "MPI_Requests fit a transport request");

static inline MPI_Comm ddp__xh_comm(const ddp__xhandle_t *h) {
  MPI_Comm c = MPI_COMM_NULL;
  if (h && h->live) memcpy(&c, &h->u, sizeof c);
  return c;
}

static inline void ddp__xh_set_comm(ddp__xhandle_t *h, MPI_Comm c) {
  memset(h, 0, sizeof *h);
  memcpy(&h->u, &c, sizeof c);
  h->live = c != MPI_COMM_NULL;
}

static inline MPI_Win ddp__xh_win(const ddp__xhandle_t *h) {
  MPI_Win w = MPI_WIN_NULL;
  if (h && h->live) memcpy(&w, &h->u, sizeof w);
  return w;
}

static inline void ddp__xh_set_win(ddp__xhandle_t *h, MPI_Win w) {
  memset(h, 0, sizeof *h);
  memcpy(&h->u, &w, sizeof w);
  h->live = w != MPI_WIN_NULL;
}

/* The request's MPI parts (nparts of them posted). */
static inline MPI_Request *ddp__xreq_mpi(ddp__xreq_t *r) {
  return (MPI_Request *)(void *)r->parts.b;
}

/* The group's communicator. */
static inline MPI_Comm ddp__ctx_comm(const ddp__ctx_t *x) { return ddp__xh_comm(x->grp); }

/* The watch over blocking MPI_Allreduce calls (coll_mpi_watch.c): the call in flight, which
 * coll_mpi_coll.c publishes around its MPI_Allreduce and the watch thread reads. */
struct ddp__mpi_watch {
  ddp__comm_t *c;
  pthread_mutex_t mu;
  pthread_cond_t cv;     /* the watch sleeps here between looks */
  pthread_t thread;
  int stop;              /* under mu */
  _Atomic uint64_t cur;  /* token of the call in flight; 0 = none */
  uint64_t next;         /* last token handed out (executing thread only: calls hold cs->exec) */
  /* The in-flight call's ddp__wait_desc_t, field by field (atomics: read by the watch
   * while the next call may be writing them; a torn read is discarded by the token check). */
  _Atomic uint64_t d_seq;
  _Atomic(const char *) d_coll;
  _Atomic(const char *) d_algo;
  _Atomic size_t d_bytes;
  _Atomic int d_tag;
};

/* Starts the watch on first use, on the executing thread (cs->mpi_watch); NULL if it cannot
 * run (the caller then takes the non-blocking path). */
DDP_HIDDEN ddp__mpi_watch_t *ddp__mpi_watch_get(ddp__coll_t *cs);

/* The transport's own collectives over MPI (coll_mpi_coll.c). */
DDP_HIDDEN ddp_status_t ddp__mpi_allreduce(ddp__ctx_t *x, const ddp__ar_t *a);
DDP_HIDDEN ddp_status_t ddp__mpi_bcast(ddp__ctx_t *x, void *buf, size_t bytes, int root);
DDP_HIDDEN ddp_status_t ddp__mpi_allgather(ddp__ctx_t *x, const void *send, void *recv,
                                           size_t bytes);
DDP_HIDDEN ddp_status_t ddp__mpi_reduce_scatter(ddp__ctx_t *x, const void *send, void *recv,
                                                size_t count, ddp_dtype_t dtype, ddp_op_t op);
DDP_HIDDEN ddp_status_t ddp__mpi_barrier(ddp__ctx_t *x);
DDP_HIDDEN ddp_status_t ddp__mpi_agree_min(ddp__ctx_t *x, int *v);
DDP_HIDDEN ddp_status_t ddp__mpi_seg_alloc(ddp__ctx_t *x, size_t bytes, ddp__xhandle_t *seg,
                                           void **bases);
DDP_HIDDEN void ddp__mpi_seg_free(ddp__xhandle_t *seg);

#endif /* DDP_XPORT_MPI_H */
