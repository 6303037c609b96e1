/* Internal interfaces of the collectives layer: the transport table the algorithms are written
 * against, algorithm descriptors, the per-communicator state, and the host reduction kernels. */
#ifndef DDP_COLL_INTERNAL_H
#define DDP_COLL_INTERNAL_H

#include "ddp_collectives.h"
#include "ddp_internal.h"
#include "kernels_internal.h"

/* ==== transports ==========================================================================
 * An algorithm (ring, rhd, hier, shm, tree...) never touches MPI or its buffers' memory kind
 * itself: every byte it moves or combines goes through a transport, so the same ring runs on
 * host memory, on device memory with CUDA-aware MPI, or staged through pinned host buffers. A
 * transport is a table of operations plus opaque per-call state (x->xstate, e.g. a CUDA
 * stream); groups of ranks, requests and node-shared segments are the transport's own handles,
 * held in opaque storage (ddp__xhandle_t) that the algorithms never look into.
 *
 * Rules every implementation follows:
 *  - isend/irecv post a message of `bytes` bytes to/from `peer` (a rank of x's group) and fill
 *    *req; nothing may be assumed finished until `wait` returns for that request. `bytes` may
 *    exceed INT_MAX: the transport splits it (a request then holds several parts).
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
 *    Slots: 0, 1 ring (and shm's piece buffer); 2 rhd; 3 the transport's own allreduce;
 *    4 reduce-scatter's full-size intermediate.
 *  - The transport's own collectives (allreduce, bcast, allgather, reduce_scatter, barrier) over
 *    x's group: NULL where it has none (the algorithms then build them from point to point).
 *    They block until done, under the watchdog. allreduce: a->op is never DDP_AVG; allgather:
 *    `send` == recv + rank * bytes means in place; reduce_scatter: op is never DDP_AVG, send ==
 *    recv means in place (input size*count elements in recv).
 *  - agree_min: *v = the minimum of *v over x's group (set-up steps, not per call).
 *  - seg_alloc/seg_free: node-shared memory, collective over x's group (ranks of one node):
 *    every rank gets a segment of `bytes` bytes and bases[q] (q < x->size) is where rank q's
 *    segment is mapped in this process. NULL where the transport has no shared memory.
 *  All operations are complete on return from the host's point of view, except isend/irecv.
 *  A device transport orders its copies/kernels on its stream and synchronises where a
 *  following message needs the bytes. */
#define DDP__SCRATCH_SLOTS 5
#define DDP__XREQ_PARTS 4 /* transport requests per request (messages > INT_MAX) */

typedef struct ddp__ctx ddp__ctx_t;

/* Opaque storage for one transport handle (an MPI communicator, request or window: an int in
 * MPICH, a pointer in Open MPI); `live` says whether it holds one. */
typedef struct ddp__xhandle {
  int live;
  union {
    void *p;
    long long i;
    unsigned char b[16];
  } u;
} ddp__xhandle_t;

typedef struct ddp__xreq {
  int nparts;   /* parts posted (0: nothing to wait for) */
  int peer;     /* rank in x's group, for the watchdog report */
  void *dst;    /* transport-private (staged receive: final device destination) */
  void *stage;  /* transport-private (staging buffer) */
  size_t bytes;
  union {       /* transport-private: the parts' handles */
    void *p;
    long long i;
    unsigned char b[DDP__XREQ_PARTS * 8];
  } parts;
} ddp__xreq_t;

typedef struct ddp__ar ddp__ar_t;

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
  /* the transport's own collectives (NULL: none) */
  ddp_status_t (*allreduce)(ddp__ctx_t *x, const ddp__ar_t *a);
  ddp_status_t (*bcast)(ddp__ctx_t *x, void *buf, size_t bytes, int root);
  ddp_status_t (*allgather)(ddp__ctx_t *x, const void *send, void *recv, size_t bytes);
  ddp_status_t (*reduce_scatter)(ddp__ctx_t *x, const void *send, void *recv, size_t count,
                                 ddp_dtype_t dtype, ddp_op_t op);
  ddp_status_t (*barrier)(ddp__ctx_t *x);
  ddp_status_t (*agree_min)(ddp__ctx_t *x, int *v);
  /* node-shared memory (NULL: none) */
  ddp_status_t (*seg_alloc)(ddp__ctx_t *x, size_t bytes, ddp__xhandle_t *seg, void **bases);
  void (*seg_free)(ddp__xhandle_t *seg);
} ddp__xport_t;

/* The host-memory transport (MPI point-to-point and collectives, CPU kernels). */
DDP_HIDDEN extern const ddp__xport_t ddp__xport_host;

/* Everything an algorithm needs for one call. `grp/rank/size` is the group it runs over: the
 * layer's world group, or the cross-node one inside hier, or the node inside shm. */
struct ddp__ctx {
  ddp__comm_t *c;
  struct ddp__coll *cs;
  const ddp__xport_t *xp;
  void *xstate;        /* transport's per-call state */
  const ddp__xhandle_t *grp; /* the transport's handle of the group */
  int rank, size;
  const int *world_of; /* world rank of each rank of the group (NULL: the group is the world) */
  ddp_mem_t mem;
  ddp__wait_desc_t desc; /* what the watchdog names on a timeout */
  int on_caller;         /* runs on the thread of a caller blocked in this very call (not the
                          * progress thread): the transport's own blocking calls may wait here */
};

/* Initialises a request so that `wait` skips it. */
static inline void ddp__xreq_init(ddp__xreq_t *r) {
  r->nparts = 0;
  r->peer = -1;
  r->dst = r->stage = NULL;
  r->bytes = 0;
}

/* ==== algorithms ==========================================================================
 * One file each; a descriptor says whether it can run a case and runs it. Inside run(), op is
 * never DDP_AVG, and send == recv means in place (the dispatcher maps DDP_IN_PLACE). */
struct ddp__ar {
  const void *send;
  void *recv;
  size_t count;
  ddp_dtype_t dtype;
  ddp_op_t op;
};

typedef struct ddp__algo {
  const char *name;
  ddp_algo_t id;
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

/* rhd's two halves (allreduce_rhd.c), for hier's node-local steps: ddp__rhd_reduce_scatter
 * folds a non-power-of-two group and halves (nearest partner first); then this rank holds the
 * reduced elements [f->lo, f->hi) of buf (an empty range on ranks folded out), the same range
 * on every group of the same size and count. ddp__rhd_allgather retraces it and unfolds. The
 * count must be at least the group size. Uses scratch slot 2 (in the reduce-scatter only). */
typedef struct ddp__rhd {
  int pof2, rem, newrank, lvl;
  size_t lo, hi;
  size_t los[32], his[32];
} ddp__rhd_t;
DDP_HIDDEN ddp_status_t ddp__rhd_reduce_scatter(ddp__ctx_t *x, void *buf, size_t count,
                                                ddp_dtype_t dtype, ddp_op_t op, ddp__rhd_t *f);
DDP_HIDDEN ddp_status_t ddp__rhd_allgather(ddp__ctx_t *x, void *buf, size_t count,
                                           ddp_dtype_t dtype, ddp__rhd_t *f);
/* The same levels one at a time, for a group whose size is a power of two (no fold), so a
 * caller can keep levels of several pieces in flight at once (hier's pipeline):
 * ddp__rhd_begin starts a halving of `count` elements; while (1 << f->lvl) < f->pof2,
 * ddp__rhd_halve_post posts one level's exchange (q: 2 requests; the partner's half arrives in
 * tmp, at least (count+1)/2 elements) and, once q is waited for, ddp__rhd_halve_done reduces it
 * and moves on. Then, while f->lvl > 0, ddp__rhd_double_post / ddp__rhd_double_done retrace
 * the levels (allgather). */
DDP_HIDDEN void ddp__rhd_begin(ddp__rhd_t *f, int rank, int size, size_t count);
DDP_HIDDEN ddp_status_t ddp__rhd_halve_post(ddp__ctx_t *x, char *buf, size_t es,
                                            const ddp__rhd_t *f, void *tmp, ddp__xreq_t q[2]);
DDP_HIDDEN ddp_status_t ddp__rhd_halve_done(ddp__ctx_t *x, char *buf, ddp_dtype_t dtype,
                                            ddp_op_t op, ddp__rhd_t *f, const void *tmp);
DDP_HIDDEN ddp_status_t ddp__rhd_double_post(ddp__ctx_t *x, char *buf, size_t es,
                                             const ddp__rhd_t *f, ddp__xreq_t q[2]);
DDP_HIDDEN void ddp__rhd_double_done(ddp__rhd_t *f);

/* Broadcast, allgather and reduce-scatter over point-to-point, for transports without their
 * own (algorithms/bcast_tree.c, allgather_ring.c, reduce_scatter_allreduce.c). allgather_ring
 * is in place (this rank's block already at recv + rank*blk); reduce_scatter_allreduce runs
 * the allreduce algorithm `al` (op never DDP_AVG). */
DDP_HIDDEN ddp_status_t ddp__bcast_tree(ddp__ctx_t *x, void *buf, size_t bytes, int root);
DDP_HIDDEN ddp_status_t ddp__allgather_ring(ddp__ctx_t *x, void *recv, size_t blk);
DDP_HIDDEN ddp_status_t ddp__reduce_scatter_allreduce(ddp__ctx_t *x, const ddp__algo_t *al,
                                                      const void *send, void *recv,
                                                      size_t count, ddp_dtype_t dtype,
                                                      ddp_op_t op);

/* shm phases (host memory, ranks of c->node): reduce-scatter leaving this local rank's
 * contiguous slice (ddp__split of count over local_size) reduced into recv at its offset, and
 * allgather of those slices from recv into recv. Used by shm and hier. */
DDP_HIDDEN ddp_status_t ddp__shm_reduce_scatter(ddp__ctx_t *x, const void *send, void *recv,
                                                size_t count, ddp_dtype_t dtype, ddp_op_t op);
DDP_HIDDEN ddp_status_t ddp__shm_allgather(ddp__ctx_t *x, void *recv, size_t count,
                                           ddp_dtype_t dtype);
/* Most elements one shm reduce-scatter/allgather call may take. */
DDP_HIDDEN size_t ddp__shm_chunk(ddp_dtype_t dtype);

/* Selection (coll_select.c): resolves opts->algo / DDP_ALLREDUCE_ALGO / auto for one case,
 * host or device memory (x->mem). Errors name the valid algorithms. */
DDP_HIDDEN ddp_status_t ddp__select(ddp__comm_t *c, ddp_algo_t want, const ddp__ctx_t *x,
                                    const ddp__ar_t *a, const ddp__algo_t **out);

/* ==== one collective call ================================================================= */
typedef enum ddp__coll_kind {
  DDP__COLL_ALLREDUCE = 0,
  DDP__COLL_BROADCAST = 1,
  DDP__COLL_ALLGATHER = 2,
  DDP__COLL_REDUCE_SCATTER = 3,
  DDP__COLL_BARRIER = 4
} ddp__coll_kind_t;

/* DDP_IN_PLACE is already mapped (send == recv; allgather: send == recv + rank*count); op may
 * be DDP_AVG. */
typedef struct ddp__call {
  ddp__coll_kind_t kind;
  const void *send;
  void *recv;
  size_t count; /* allreduce/broadcast: elements; allgather: send_count; reduce_scatter: recv_count */
  ddp_dtype_t dtype;
  ddp_op_t op;
  int root;
  const ddp_coll_opts_t *opts; /* algo, stream, tag (NULL: defaults) */
  void *ev_in; /* device memory: ddp_event_t recorded on the caller's stream when posted */
  const ddp__algo_t *algo; /* allreduce: chosen at post time (NULL: select when run) */
} ddp__call_t;

/* Runs one collective over x's transport and group (coll_exec.c): allreduce with call->algo
 * or the selection; the others with the transport's own collective, or over point to point.
 * ddp__allreduce_exec runs `al` (op may be DDP_AVG: sum, then scale). */
DDP_HIDDEN ddp_status_t ddp__coll_exec(ddp__ctx_t *x, const ddp__call_t *call);
DDP_HIDDEN ddp_status_t ddp__allreduce_exec(ddp__ctx_t *x, const ddp__algo_t *al,
                                            const void *send, void *recv, size_t count,
                                            ddp_dtype_t dtype, ddp_op_t op);

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
typedef struct ddp__mpi_watch ddp__mpi_watch_t; /* transports/coll_mpi_coll.c */

typedef struct ddp__coll {
  ddp__comm_t *c;
  /* Dedicated duplicates: library traffic never matches user or other-layer messages. */
  MPI_Comm world, node, cross;
  /* The same groups as the transports' handles (ddp__ctx_t.grp), set by ddp__coll_groups. */
  ddp__xhandle_t g_world, g_node, g_cross;
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
  int shm_disabled;        /* shm phases unavailable (no shared windows) */
  int sim_nocompute;       /* simulator sweeps: skip local reduce/copy (coll_comm.c) */
  int uniform_nodes;       /* every node has the same number of ranks (hier) */
  int cross_rank, cross_size; /* this rank in `cross` (= node index), number of nodes */
  int *cross_world;        /* world rank of each rank of `cross` (the watchdog names those) */
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

/* Fills cs->g_* from cs->world/node/cross (the host transport, coll_xport_host.c). */
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

/* ==== device-memory collectives (collectives/devcoll/coll_device.c) ================================
 * The dispatcher calls ddp__coll_device_run for opts->mem == DDP_MEM_CUDA after its argument
 * checks, on the thread that executes the collective (progress engine or caller), holding
 * cs->exec. It picks the transport (ddp_device_set_transport or DDP_TRANSPORT: CUDA-aware MPI,
 * staged, NCCL) and runs the same algorithms as host memory on it, or NCCL directly. */
/* At post time, on the caller's thread: checks that the communicator has a device and that
 * `stream` is one of its streams, and records an input event on that stream, so the
 * collective waits for the work queued before the call and not for work queued after it
 * (backward kernels that follow a bucket's post). Release the event when the call has run
 * (or was never queued). */
DDP_HIDDEN ddp_status_t ddp__coll_device_post(ddp__comm_t *c, ddp__coll_kind_t kind,
                                              void *stream, void **ev_in);
DDP_HIDDEN void ddp__coll_device_release(ddp__comm_t *c, void *ev_in);
DDP_HIDDEN ddp_status_t ddp__coll_device_run(ddp__comm_t *c, struct ddp__coll *cs,
                                             const ddp__call_t *call);
/* Frees the device collectives' state (cs->devcoll: streams, events, staging buffers, NCCL),
 * created on the first device collective, with the device current; nothing without one.
 * Called by ddp__coll_comm_fini, which runs before the device layer's fini. */
DDP_HIDDEN void ddp__devcoll_free(ddp__coll_t *cs);
/* Resolves the device collectives' transport: `requested` (DDP_TRANSPORT_AUTO: the
 * communicator's choice, ddp_device_set_transport or DDP_TRANSPORT) for this device: DDP_OK
 * with *out set (never AUTO), or DDP_ENOTSUP/DDP_EINVAL explaining why it cannot run here. */
DDP_HIDDEN ddp_status_t ddp__coll_pick_transport(ddp__comm_t *c, ddp_transport_t requested,
                                                 ddp_transport_t *out);

/* The collectives' hooks on the communicator (ddp__comm_layer_t, coll_comm.c). */
DDP_HIDDEN ddp_status_t ddp__coll_comm_init(ddp__comm_t *c);
DDP_HIDDEN void ddp__coll_comm_fini(ddp__comm_t *c);

#endif /* DDP_COLL_INTERNAL_H */
