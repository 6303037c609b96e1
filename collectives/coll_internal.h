/* Internal interfaces of the collectives layer: the transport table the algorithms are written
 * against, algorithm descriptors, the per-communicator state, and the host reduction kernels. */
#ifndef DDP_COLL_INTERNAL_H
#define DDP_COLL_INTERNAL_H

#include "ddp_collectives.h"
#include "ddp_internal.h"
#include "kernels_internal.h"

/* ==== transports ==========================================================================
 * An algorithm (ring, rhd, hier) never touches its buffers itself: every byte it moves or
 * combines goes through a transport, so the same ring runs on host memory, on device memory
 * with CUDA-aware MPI, or staged through pinned host buffers. A transport is a table of
 * operations plus opaque per-call state (x->xstate, e.g. a CUDA stream).
 *
 * Rules every implementation follows:
 *  - isend/irecv post a message of `bytes` bytes to/from `peer` (a rank of x->comm) and fill
 *    *req; nothing may be assumed finished until `wait` returns for that request. `bytes` may
 *    exceed INT_MAX: the transport splits it (a request then holds several MPI requests).
 *  - wait completes n requests (entries with nothing posted are skipped). It must block only
 *    through ddp__wait_all (the DDP_TIMEOUT_S watchdog); a staged transport finishes its copies
 *    (device <- staging) here.
 *  - reduce: dst[i] = dst[i] op src[i] for i < count; op is never DDP_AVG (the dispatcher runs
 *    avg as sum followed by `scale`). f16/bf16 are computed in f32 and rounded to nearest-even.
 *  - copy: dst <- src, `bytes` bytes, both in the transport's memory; dst == src is a no-op.
 *  - scale: buf[i] = buf[i] / divisor (avg). Integers: truncated toward zero.
 *  - scratch: a buffer of at least `bytes` bytes in the transport's memory, one per `slot`
 *    (0..DDP__SCRATCH_SLOTS-1); it stays valid until the next scratch call with the same slot
 *    and is owned by the communicator (one collective runs at a time, so no locking).
 *  All operations are complete on return from the host's point of view, except isend/irecv.
 *  A device transport orders its copies/kernels on its stream and synchronises where a
 *  following MPI call needs the bytes. */
#define DDP__SCRATCH_SLOTS 4
#define DDP__XREQ_PARTS 4 /* MPI requests per transport request (messages > INT_MAX) */

typedef struct ddp__ctx ddp__ctx_t;

typedef struct ddp__xreq {
  MPI_Request mpi[DDP__XREQ_PARTS]; /* MPI_REQUEST_NULL when unused */
  int nmpi;
  int peer;     /* rank in x->comm, for the watchdog report */
  void *dst;    /* transport-private (staged receive: final device destination) */
  void *stage;  /* transport-private (staging buffer) */
  size_t bytes;
} ddp__xreq_t;

typedef struct ddp__xport {
  const char *name;
  ddp_status_t (*isend)(ddp__ctx_t *x, const void *buf, size_t bytes, int peer, int tag,
                        ddp__xreq_t *req);
  ddp_status_t (*irecv)(ddp__ctx_t *x, void *buf, size_t bytes, int peer, int tag,
                        ddp__xreq_t *req);
  ddp_status_t (*wait)(ddp__ctx_t *x, int n, ddp__xreq_t *reqs);
  ddp_status_t (*reduce)(ddp__ctx_t *x, void *dst, const void *src, size_t count,
                         ddp_dtype_t dtype, ddp_op_t op);
  ddp_status_t (*copy)(ddp__ctx_t *x, void *dst, const void *src, size_t bytes);
  ddp_status_t (*scale)(ddp__ctx_t *x, void *buf, size_t count, ddp_dtype_t dtype,
                        double divisor);
  ddp_status_t (*scratch)(ddp__ctx_t *x, int slot, size_t bytes, void **ptr);
} ddp__xport_t;

/* The host-memory transport (MPI point-to-point, CPU kernels). */
DDP_HIDDEN extern const ddp__xport_t ddp__xport_host;

/* Everything an algorithm needs for one call. `comm/rank/size` is the group it runs over: the
 * layer's duplicate of the world communicator, or of the cross-node one inside hier. */
struct ddp__ctx {
  ddp__comm_t *c;
  struct ddp__coll *cs;
  const ddp__xport_t *xp;
  void *xstate;        /* transport's per-call state */
  MPI_Comm comm;
  int rank, size;
  const int *world_of; /* world rank of each rank of `comm` (NULL: comm is the world) */
  ddp_mem_t mem;
  ddp__wait_desc_t desc; /* what the watchdog names on a timeout */
  int on_caller;         /* runs on the thread of a caller blocked in this very call (not the
                          * progress thread): MPI's own blocking calls may wait here */
};

/* Initialises a request so that `wait` skips it. */
static inline void ddp__xreq_init(ddp__xreq_t *r) {
  for (int i = 0; i < DDP__XREQ_PARTS; i++) r->mpi[i] = MPI_REQUEST_NULL;
  r->nmpi = 0;
  r->peer = -1;
  r->dst = r->stage = NULL;
  r->bytes = 0;
}

/* ==== algorithms ==========================================================================
 * One file each; a descriptor says whether it can run a case and runs it. Inside run(), op is
 * never DDP_AVG, and send == recv means in place (the dispatcher maps DDP_IN_PLACE). */
typedef struct ddp__ar {
  const void *send;
  void *recv;
  size_t count;
  ddp_dtype_t dtype;
  ddp_op_t op;
} ddp__ar_t;

typedef struct ddp__algo {
  const char *name;
  /* NULL if the algorithm can run this case; else a short reason ("needs node-shared memory"). */
  const char *(*supports)(const ddp__ctx_t *x, const ddp__ar_t *a);
  ddp_status_t (*run)(ddp__ctx_t *x, const ddp__ar_t *a);
} ddp__algo_t;

DDP_HIDDEN extern const ddp__algo_t ddp__algo_mpi, ddp__algo_ring, ddp__algo_rhd,
    ddp__algo_shm, ddp__algo_hier;

/* Pieces the ring, rhd and hier algorithms share: reduce-scatter / allgather over arbitrary
 * per-rank chunks of `buf` (in place), written against the transport. offs/lens: size entries. */
DDP_HIDDEN ddp_status_t ddp__ring_reduce_scatter(ddp__ctx_t *x, void *buf, const size_t *offs,
                                                 const size_t *lens, ddp_dtype_t dtype,
                                                 ddp_op_t op);
DDP_HIDDEN ddp_status_t ddp__ring_allgather(ddp__ctx_t *x, void *buf, const size_t *offs,
                                            const size_t *lens, ddp_dtype_t dtype);
/* Splits count into `parts` near-equal chunks (the first count%parts get one more). */
DDP_HIDDEN void ddp__split(size_t count, int parts, size_t *offs, size_t *lens);

/* Storage for the offsets and lengths of a split into n parts: on the stack up to
 * DDP__PARTS_STACK parts, on the heap above. Not copyable (offs/lens may point into it). */
#define DDP__PARTS_STACK 64
typedef struct ddp__parts {
  size_t *offs, *lens;
  size_t stack[2 * DDP__PARTS_STACK];
} ddp__parts_t;
/* `who` names the algorithm in the out-of-memory message. */
DDP_HIDDEN ddp_status_t ddp__parts_init(ddp__parts_t *p, int n, const char *who);
DDP_HIDDEN void ddp__parts_free(ddp__parts_t *p);

/* shm phases (host memory, ranks of c->node): reduce-scatter leaving this local rank's
 * contiguous slice (ddp__split of count over local_size) reduced into recv at its offset, and
 * allgather of those slices from recv into recv. Used by shm and hier. */
DDP_HIDDEN ddp_status_t ddp__shm_reduce_scatter(ddp__ctx_t *x, const void *send, void *recv,
                                                size_t count, ddp_dtype_t dtype, ddp_op_t op);
DDP_HIDDEN ddp_status_t ddp__shm_allgather(ddp__ctx_t *x, void *recv, size_t count,
                                           ddp_dtype_t dtype);
/* Most elements one shm reduce-scatter/allgather call may take. */
DDP_HIDDEN size_t ddp__shm_chunk(ddp_dtype_t dtype);

/* Selection (coll_select.c): resolves opts->algo / DDP_ALLREDUCE_ALGO / auto for one case.
 * Errors name the valid algorithms. */
DDP_HIDDEN ddp_status_t ddp__select(ddp__comm_t *c, const char *want, const ddp__ctx_t *x,
                                    const ddp__ar_t *a, const ddp__algo_t **out);

/* ==== per-communicator state ============================================================== */
typedef struct ddp__pool_win {
  MPI_Win win;
  char *base;         /* this rank's segment */
  size_t bytes;       /* this rank's segment size */
  char **peer_base;   /* local_size entries */
  uint64_t id;        /* same on every node rank (creation order) */
  struct ddp__pool_win *next;
} ddp__pool_win_t;

typedef struct ddp__shm ddp__shm_t; /* allreduce_shm.c */
typedef struct ddp__mpi_watch ddp__mpi_watch_t; /* allreduce_mpi.c */

typedef struct ddp__coll {
  ddp__comm_t *c;
  /* Dedicated duplicates: library traffic never matches user or other-layer messages. */
  MPI_Comm world, node, cross;
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
  /* f16/bf16 MPI ops and datatypes (mpi algorithm) */
  MPI_Datatype half_type[2];        /* [0] f16, [1] bf16 */
  MPI_Op half_op[2][DDP_OP_COUNT];  /* avg slot unused */
  MPI_Op u8_op[DDP_OP_COUNT];       /* own u8 ops where the MPI's are wrong, else NULL */
  int half_ready;
  /* watch thread over blocking MPI_Allreduce calls (mpi algorithm), started on first use */
  ddp__mpi_watch_t *mpi_watch;
  int mpi_watch_failed;
  /* node-shared memory */
  ddp__shm_t *shm;
  ddp__pool_win_t *pool;
  uint64_t pool_next_id;
  pthread_mutex_t pool_mu;
  MPI_Comm poolcomm;       /* dup of node for ddp_alloc/ddp_free (called on user threads) */
  int shm_disabled;        /* shm phases unavailable (no shared windows) */
  int uniform_nodes;       /* every node has the same number of ranks (hier) */
  int cross_rank, cross_size; /* this rank in `cross` (= node index), number of nodes */
  int *cross_world;        /* world rank of each rank of `cross` (the watchdog names those) */
  int host_ranks;          /* ranks on this machine (virtual nodes may split a machine) */
} ddp__coll_t;

/* A queued or executing collective (coll_engine.c). */
DDP_HIDDEN ddp_status_t ddp__coll_engine_stop(ddp__coll_t *cs);

DDP_HIDDEN ddp_status_t ddp__coll_mpi_types(ddp__coll_t *cs); /* allreduce_mpi.c */
DDP_HIDDEN void ddp__coll_mpi_types_free(ddp__coll_t *cs);
DDP_HIDDEN void ddp__coll_mpi_watch_stop(ddp__coll_t *cs);
/* MPI datatype / op for a dtype (f16/bf16: the layer's own); avg maps to the sum op. */
DDP_HIDDEN MPI_Datatype ddp__mpi_type(const ddp__coll_t *cs, ddp_dtype_t dtype);
DDP_HIDDEN MPI_Op ddp__mpi_op(const ddp__coll_t *cs, ddp_dtype_t dtype, ddp_op_t op);
DDP_HIDDEN void ddp__shm_free(ddp__coll_t *cs);               /* allreduce_shm.c */
DDP_HIDDEN void ddp__pool_free_all(ddp__coll_t *cs);          /* coll_pool.c */
/* If [p, p+bytes) lies inside one ddp_alloc window: its id and offset, returns 1. */
DDP_HIDDEN int ddp__pool_find(ddp__coll_t *cs, const void *p, size_t bytes, uint64_t *id,
                              size_t *offset);
DDP_HIDDEN ddp__pool_win_t *ddp__pool_by_id(ddp__coll_t *cs, uint64_t id);

/* p rounded up to a multiple of 64 (shared-window segments carry no alignment promise). */
static inline void *ddp__align64(void *p) {
  return (void *)(((uintptr_t)p + 63) & ~(uintptr_t)63);
}

/* Fills a context for the world group on host memory. */
DDP_HIDDEN void ddp__ctx_world(ddp__ctx_t *x, ddp__comm_t *c, const char *coll, size_t bytes,
                               int tag);

/* ==== device-memory collectives (collectives/coll_device.c) ================================
 * The dispatcher calls this for opts->mem == DDP_MEM_CUDA after its argument checks, on the
 * thread that executes the collective (progress engine or caller), holding cs->exec. It picks
 * the transport (DDP_TRANSPORT: CUDA-aware MPI, staged, NCCL) and runs the host algorithms on
 * it, or NCCL directly. DDP_IN_PLACE is already mapped (send == recv); op may be DDP_AVG. */
typedef enum ddp__coll_kind {
  DDP__COLL_ALLREDUCE = 0,
  DDP__COLL_BROADCAST = 1,
  DDP__COLL_ALLGATHER = 2,
  DDP__COLL_REDUCE_SCATTER = 3,
  DDP__COLL_BARRIER = 4
} ddp__coll_kind_t;

typedef struct ddp__dev_call {
  ddp__coll_kind_t kind;
  const void *send;
  void *recv;
  size_t count; /* allreduce/broadcast: elements; allgather: send_count; reduce_scatter: recv_count */
  ddp_dtype_t dtype;
  ddp_op_t op;
  int root;
  const ddp_coll_opts_t *opts; /* algo, stream, tag */
  void *ev_in; /* ddp_event_t *recorded on the caller's stream when the call was posted */
} ddp__dev_call_t;

/* At post time, on the caller's thread: checks that the communicator has a device and that
 * `stream` is one of its streams, and records an input event on that stream, so the
 * collective waits for the work queued before the call and not for work queued after it
 * (backward kernels that follow a bucket's post). Release the event when the call has run
 * (or was never queued). */
DDP_HIDDEN ddp_status_t ddp__coll_device_post(ddp__comm_t *c, ddp__coll_kind_t kind,
                                              void *stream, void **ev_in);
DDP_HIDDEN void ddp__coll_device_release(ddp__comm_t *c, void *ev_in);
DDP_HIDDEN ddp_status_t ddp__coll_device_run(ddp__comm_t *c, struct ddp__coll *cs,
                                             const ddp__dev_call_t *call);
/* Frees the device collectives' state (streams, events, staging buffers, NCCL), created on
 * the first device collective, with the device current; nothing without one. Called by
 * ddp__coll_comm_fini, which runs before the device layer's fini. */
DDP_HIDDEN void ddp__devcoll_free(ddp__comm_t *c);

/* The collectives' hooks on the communicator (ddp__comm_layer_t, coll_comm.c). */
DDP_HIDDEN ddp_status_t ddp__coll_comm_init(ddp__comm_t *c);
DDP_HIDDEN void ddp__coll_comm_fini(ddp__comm_t *c);

#endif /* DDP_COLL_INTERNAL_H */
