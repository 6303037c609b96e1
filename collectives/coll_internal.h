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

/* What the algorithms know of the communicator's collectives state (the rest of ddp__coll_t,
 * coll_state.h, is the engine's and the transports'): its groups as transport handles and the
 * shape of the job. */
typedef struct ddp__coll_shape {
  ddp__xhandle_t g_world, g_node, g_cross;
  int shm_disabled;           /* node-shared memory unavailable (no shared windows) */
  int uniform_nodes;          /* every node has the same number of ranks (hier) */
  int cross_rank, cross_size; /* this rank among the nodes' (= node index), number of nodes */
  int *cross_world;           /* world rank of each rank of the cross-node group (the watchdog
                               * names those) */
} ddp__coll_shape_t;

typedef struct ddp__shm ddp__shm_t; /* the node-shared segment (coll_shm.h) */

/* Everything an algorithm needs for one call. `grp/rank/size` is the group it runs over: the
 * layer's world group, or the cross-node one inside hier, or the node inside shm. */
struct ddp__ctx {
  ddp__comm_t *c;
  struct ddp__coll *cs; /* opaque to algorithms (coll_state.h): for the transport */
  const ddp__coll_shape_t *shape;
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

/* Pieces the ring, rhd and hier algorithms share (rhd's own halves: algorithms/rhd.h): reduce-scatter / allgather over arbitrary
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

/* One collective call, described once when it is posted (coll_engine.c) and run from this
 * description: the engine's request holds it, the selection and the algorithms read its `a`
 * directly. DDP_IN_PLACE is already mapped (send == recv; allgather: send == recv + rank*count).
 * a.count: allreduce/broadcast: elements; allgather: send_count; reduce_scatter: recv_count.
 * a.op is never DDP_AVG: avg is then set, and a.op is DDP_SUM (divide by the size after). */
typedef struct ddp__call {
  ddp__coll_kind_t kind;
  ddp__ar_t a;
  int avg;
  int root;
  ddp_coll_opts_t opts; /* algo, mem, stream, tag */
  void *ev_in; /* device memory: ddp_event_t recorded on the caller's stream when posted */
  const ddp__algo_t *algo; /* host allreduce: chosen at post time (NULL: device memory, chosen
                            * by the device transport's runner) */
} ddp__call_t;

/* The op the caller asked for (DDP_AVG included). */
static inline ddp_op_t ddp__call_op(const ddp__call_t *call) {
  return call->avg ? DDP_AVG : call->a.op;
}

/* Runs one collective over x's transport and group (coll_exec.c): allreduce with call->algo
 * (selected here only where the post did not: device memory); the others with the transport's
 * own collective, or over point to point. */
DDP_HIDDEN ddp_status_t ddp__coll_exec(ddp__ctx_t *x, const ddp__call_t *call);

/* Runs allreduce algorithm `al` on `a` (a->op never DDP_AVG; avg: divide by the group size
 * after). Inline: the one step between the executor and the algorithm. */
static inline ddp_status_t ddp__allreduce_run(ddp__ctx_t *x, const ddp__algo_t *al,
                                              const ddp__ar_t *a, int avg) {
  if (a->count == 0) return DDP_OK;
  x->desc.algo = al->name;
  ddp_status_t st = al->run(x, a);
  if (st == DDP_OK && avg) st = x->xp->scale(x, a->recv, a->count, a->dtype, (double)x->size);
  return st;
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
/* Resolves the device collectives' transport: `requested` (DDP_TRANSPORT_AUTO: the
 * communicator's choice, ddp_device_set_transport or DDP_TRANSPORT) for this device: DDP_OK
 * with *out set (never AUTO), or DDP_ENOTSUP/DDP_EINVAL explaining why it cannot run here. */
DDP_HIDDEN ddp_status_t ddp__coll_pick_transport(ddp__comm_t *c, ddp_transport_t requested,
                                                 ddp_transport_t *out);

/* The collectives' hooks on the communicator (ddp__comm_layer_t, coll_comm.c). */
DDP_HIDDEN ddp_status_t ddp__coll_comm_init(ddp__comm_t *c);
DDP_HIDDEN void ddp__coll_comm_fini(ddp__comm_t *c);

#endif /* DDP_COLL_INTERNAL_H */
