/* Collectives: allreduce, broadcast, allgather, reduce-scatter, barrier; blocking and
 * non-blocking; algorithms mpi, ring, rhd, shm, hier chosen by `auto` or by name. */
#ifndef DDP_COLLECTIVES_H
#define DDP_COLLECTIVES_H

#include "ddp_comm.h"
#include "ddp_device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Pass as the send buffer for an in-place collective (send == recv also means in place). */
#define DDP_IN_PLACE ((const void *)(intptr_t)-1)

typedef struct ddp_request ddp_request_t;

/* Per-call options; NULL means all defaults. Initialise with ddp_coll_opts_default(). */
typedef struct ddp_coll_opts {
  ddp_algo_t algo;  /* DDP_ALGO_AUTO: DDP_ALLREDUCE_ALGO, else the selection table; another
                       value forces that allreduce algorithm for this call */
  ddp_mem_t mem;    /* where the buffers live (DDP_MEM_HOST default) */
  ddp_stream_t *stream; /* the stream the data is ordered on, for DDP_MEM_CUDA (NULL: default) */
  int tag;          /* caller's label for diagnostics (bucket index), -1 if none */
} ddp_coll_opts_t;

DDP_API ddp_status_t ddp_coll_opts_default(ddp_coll_opts_t *opts);

/* Blocking collectives. Counts are in elements (size_t: counts above INT_MAX work). For
 * reduce-scatter `recv_count` is the count each rank receives (send holds size*recv_count);
 * for allgather `send_count` is each rank's contribution (recv holds size*send_count).
 * In place: allreduce: send = DDP_IN_PLACE or send == recv; allgather: send = DDP_IN_PLACE (or
 * recv + rank*send_count) with this rank's block already in place; reduce-scatter: send =
 * DDP_IN_PLACE (or recv), input in recv (size*recv_count), result in its first recv_count
 * (MPI's form), or recv = send + rank*recv_count (NCCL's form: the result lands in this rank's
 * own block of the input, and no buffer besides the input is needed; ZeRO's buckets use it).
 * Partially overlapping buffers are DDP_EINVAL. f16/bf16 are reduced in f32 and rounded to
 * nearest-even; avg is a sum divided on every rank, and all ranks end with the same bits.
 * Collectives run in posting order: every rank must post them in the same order. */
DDP_API ddp_status_t ddp_allreduce(ddp_comm_t *comm, const void *send, void *recv, size_t count,
                                   ddp_dtype_t dtype, ddp_op_t op, const ddp_coll_opts_t *opts);
DDP_API ddp_status_t ddp_broadcast(ddp_comm_t *comm, void *buf, size_t count, ddp_dtype_t dtype,
                                   int root, const ddp_coll_opts_t *opts);
DDP_API ddp_status_t ddp_allgather(ddp_comm_t *comm, const void *send, void *recv,
                                   size_t send_count, ddp_dtype_t dtype,
                                   const ddp_coll_opts_t *opts);
DDP_API ddp_status_t ddp_reduce_scatter(ddp_comm_t *comm, const void *send, void *recv,
                                        size_t recv_count, ddp_dtype_t dtype, ddp_op_t op,
                                        const ddp_coll_opts_t *opts);
DDP_API ddp_status_t ddp_barrier(ddp_comm_t *comm);

/* Non-blocking versions: they return at once with *req set; the communicator's progress
 * engine moves them forward without the caller polling. Buffers must stay valid until the
 * request completes. Arguments are checked at once (an error returns no request). While a
 * request is live (until ddp_wait/ddp_test returned it complete) ddp_comm_destroy is
 * DDP_EBUSY. */
DDP_API ddp_status_t ddp_iallreduce(ddp_comm_t *comm, const void *send, void *recv, size_t count,
                                    ddp_dtype_t dtype, ddp_op_t op, const ddp_coll_opts_t *opts,
                                    ddp_request_t **req);
DDP_API ddp_status_t ddp_ibroadcast(ddp_comm_t *comm, void *buf, size_t count, ddp_dtype_t dtype,
                                    int root, const ddp_coll_opts_t *opts, ddp_request_t **req);
DDP_API ddp_status_t ddp_iallgather(ddp_comm_t *comm, const void *send, void *recv,
                                    size_t send_count, ddp_dtype_t dtype,
                                    const ddp_coll_opts_t *opts, ddp_request_t **req);
DDP_API ddp_status_t ddp_ireduce_scatter(ddp_comm_t *comm, const void *send, void *recv,
                                         size_t recv_count, ddp_dtype_t dtype, ddp_op_t op,
                                         const ddp_coll_opts_t *opts, ddp_request_t **req);
DDP_API ddp_status_t ddp_ibarrier(ddp_comm_t *comm, ddp_request_t **req);

/* *done = 1 once complete; then the request is freed and *req set to NULL, and the
 * collective's own status is returned. */
DDP_API ddp_status_t ddp_test(ddp_request_t **req, int *done);
/* Waits, frees the request, sets *req = NULL; returns the collective's status. Waiting on a
 * NULL request (for instance one already waited) is DDP_EINVAL. */
DDP_API ddp_status_t ddp_wait(ddp_request_t **req);
/* Waits for all; NULL entries are skipped; returns the first failure. */
DDP_API ddp_status_t ddp_waitall(size_t n, ddp_request_t **reqs);

/* Node-shared memory pool: buffers that peers on the node can read directly, so the shm
 * algorithm needs no copy-in. Collective over the node (every rank of the node calls it with
 * the same size, in the same order). */
DDP_API ddp_status_t ddp_alloc(ddp_comm_t *comm, size_t bytes, void **ptr);
DDP_API ddp_status_t ddp_free(ddp_comm_t *comm, void *ptr);

/* Names of the allreduce algorithms, NULL-terminated ("auto" first), in ddp_algo_t order. */
DDP_API const char *const *ddp_allreduce_algos(void);
/* What `auto` (or the forced name) would run for this call; *name stays valid forever. */
DDP_API ddp_status_t ddp_allreduce_choice(ddp_comm_t *comm, const void *buf, size_t count,
                                          ddp_dtype_t dtype, const ddp_coll_opts_t *opts,
                                          const char **name);

/* Which transport device-memory collectives use on this communicator: `requested` resolved
 * (DDP_TRANSPORT_AUTO: this communicator's current choice, ddp_device_set_transport or
 * DDP_TRANSPORT, then auto), never DDP_TRANSPORT_AUTO in *out. DDP_ENOTSUP when it cannot run. */
DDP_API ddp_status_t ddp_device_transport(ddp_comm_t *comm, ddp_transport_t requested,
                                          ddp_transport_t *out);
/* Makes `transport` the transport of this communicator's later device collectives,
 * overriding DDP_TRANSPORT (for side-by-side comparisons in one run; DDP_TRANSPORT_AUTO:
 * pick automatically again). Every rank must make the same call at the same point, with no
 * device collective in flight. DDP_ENOTSUP when that transport cannot run here (the message
 * says why). */
DDP_API ddp_status_t ddp_device_set_transport(ddp_comm_t *comm, ddp_transport_t transport);

#ifdef __cplusplus
}
#endif
#endif /* DDP_COLLECTIVES_H */
