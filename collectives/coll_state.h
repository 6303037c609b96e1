/* The collectives' per-communicator state (ddp__coll_t: the layer's MPI communicators, the
 * engine, transport scratch and MPI types, node-shared memory, device-collective state) and
 * the calls that set it up and tear it down. For the engine, the communicator hooks, the
 * transports and the device runners; algorithms see only ddp__coll_shape_t (coll_internal.h)
 * and reach the rest through their transport. */
#ifndef DDP_COLL_STATE_H
#define DDP_COLL_STATE_H

#include <pthread.h>

#include "coll_internal.h"

typedef struct ddp__pool_win {
  MPI_Win win;
  char *base;         /* this rank's segment */
  size_t bytes;       /* this rank's segment size */
  char **peer_base;   /* local_size entries */
  uint64_t id;        /* same on every node rank (creation order) */
  struct ddp__pool_win *next;
} ddp__pool_win_t;

typedef struct ddp__mpi_watch ddp__mpi_watch_t; /* transports/coll_mpi_coll.c */

typedef struct ddp__coll {
  ddp__comm_t *c;
  /* Dedicated duplicates: library traffic never matches user or other-layer messages. */
  MPI_Comm world, node, cross;
  /* The groups as the transports' handles and the shape the algorithms see (coll_internal.h):
   * ddp__ctx_t.shape points here. */
  ddp__coll_shape_t shape;
  /* engine */
  pthread_mutex_t mu;      /* queue, done flags */
  pthread_cond_t cv_work;  /* engine sleeps here while idle */
  pthread_cond_t cv_done;  /* waiters sleep here */
  pthread_mutex_t exec;    /* held while a collective executes (engine or inline) */
  struct ddp_request *head, *tail;
  _Atomic int pending;     /* queued + executing non-blocking requests (changed under mu) */
  /* Threads that have nothing to do but wait for a collective: callers blocked in ddp_wait or
   * in a blocking call (also while running it inline). Waits inside a collective spin longer
   * while this is non-zero: the caller's core would idle anyway, and a sleep costs a wake-up
   * (about 25 us on a VM) per barrier. */
  _Atomic int idle_waiters;
  int thread_started, stop;
  pthread_t thread;
  _Atomic uint64_t seq;    /* collective sequence number (fingerprints, diagnostics); atomic:
                            * read on callers' threads while the engine increments it */
  /* host transport scratch */
  void *scratch[DDP__SCRATCH_SLOTS];
  size_t scratch_bytes[DDP__SCRATCH_SLOTS];
  /* f16/bf16 MPI ops and datatypes (the host transport's own collectives) */
  MPI_Datatype half_type[2];        /* [0] f16, [1] bf16 */
  MPI_Op half_op[2][DDP_OP_COUNT];  /* avg slot unused */
  MPI_Op u8_op[DDP_OP_COUNT];       /* own u8 ops where the MPI's are wrong, else NULL */
  int half_ready;
  /* watch thread over blocking MPI_Allreduce calls (the host transport's allreduce, which the
   * mpi algorithm runs), started on first use */
  ddp__mpi_watch_t *mpi_watch;
  int mpi_watch_failed;
  /* node-shared memory */
  ddp__shm_t *shm;
  ddp__pool_win_t *pool;
  uint64_t pool_next_id;
  pthread_mutex_t pool_mu;
  MPI_Comm poolcomm;       /* dup of node for ddp_alloc/ddp_free (called on user threads) */
  int sim_nocompute;       /* simulator sweeps: skip local reduce/copy (coll_comm.c) */
  int host_ranks;          /* ranks on this machine (virtual nodes may split a machine) */
  /* device-memory collectives */
  struct ddp__devcoll *devcoll; /* created on the first one (coll_device.c), freed at fini */
  int transport_set;            /* ddp_device_set_transport was called */
  ddp_transport_t transport;    /* then: its choice, else DDP_TRANSPORT */
  /* NCCL's state is sticky: once creating or running the NCCL communicator failed, every
   * later nccl collective fails at once with this reason instead of trying again. */
  ddp_status_t nccl_status;
  char nccl_reason[256];
} ddp__coll_t;

/* Fills cs->shape.g_* from cs->world/node/cross (the host transport, coll_xport_host.c). */
DDP_HIDDEN void ddp__coll_groups(ddp__coll_t *cs);

/* Stops the progress thread after the requests queued have run (coll_engine.c). */
DDP_HIDDEN ddp_status_t ddp__coll_engine_stop(ddp__coll_t *cs);

/* The MPI types, ops and watch of the host transport (transports/coll_mpi_coll.c). */
DDP_HIDDEN ddp_status_t ddp__coll_mpi_types(ddp__coll_t *cs);
DDP_HIDDEN void ddp__coll_mpi_types_free(ddp__coll_t *cs);
DDP_HIDDEN void ddp__coll_mpi_watch_stop(ddp__coll_t *cs);
/* MPI datatype / op for a dtype (f16/bf16: the layer's own); avg maps to the sum op. */
DDP_HIDDEN MPI_Datatype ddp__mpi_type(const ddp__coll_t *cs, ddp_dtype_t dtype);
DDP_HIDDEN MPI_Op ddp__mpi_op(const ddp__coll_t *cs, ddp_dtype_t dtype, ddp_op_t op);
DDP_HIDDEN void ddp__shm_free(ddp__coll_t *cs);  /* transports/coll_xport_shm.c */
DDP_HIDDEN void ddp__pool_free_all(ddp__coll_t *cs); /* transports/coll_pool.c */
/* If [p, p+bytes) lies inside one ddp_alloc window: its id and offset, returns 1. */
DDP_HIDDEN int ddp__pool_find(ddp__coll_t *cs, const void *p, size_t bytes, uint64_t *id,
                              size_t *offset);
DDP_HIDDEN ddp__pool_win_t *ddp__pool_by_id(ddp__coll_t *cs, uint64_t id);

/* p rounded up to a multiple of 64 (shared-window segments carry no alignment promise). */
static inline void *ddp__align64(void *p) {
  return (void *)(((uintptr_t)p + 63) & ~(uintptr_t)63);
}

/* Frees the device collectives' state (cs->devcoll: streams, events, staging buffers, NCCL),
 * created on the first device collective, with the device current; nothing without one.
 * Called by ddp__coll_comm_fini, which runs before the device layer's fini. */
DDP_HIDDEN void ddp__devcoll_free(ddp__coll_t *cs); /* devcoll/coll_device.c */

#endif /* DDP_COLL_STATE_H */
