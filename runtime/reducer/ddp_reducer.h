/* The bucketed allreduce scheduler (what PyTorch's Reducer does): gradients are exchanged
 * bucket by bucket while the backward pass still computes earlier layers. */
#ifndef DDP_REDUCER_H
#define DDP_REDUCER_H

#include "ddp_collectives.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ddp_reducer ddp_reducer_t;

/* One parameter, registered in forward order. */
typedef struct ddp_param {
  void *data;       /* parameter values (broadcast from rank 0 at creation) */
  size_t count;     /* elements */
  ddp_dtype_t dtype;
  ddp_mem_t mem;
  const char *name; /* optional, used in messages; copied */
  void *grad;       /* with grad_as_bucket_view off: the application's gradient buffer
                       (count elements, reduced in place); ignored with views on */
} ddp_param_t;

typedef enum ddp_hook { DDP_HOOK_NONE = 0, DDP_HOOK_FP16, DDP_HOOK_BF16, DDP_HOOK_COUNT } ddp_hook_t;

/* "none", "fp16", "bf16"; "?" for an invalid value. */
DDP_API const char *ddp_hook_name(ddp_hook_t hook);
/* Parse a hook name (as ddp_hook_name writes it): DDP_EINVAL naming the text otherwise (and for
 * NULL arguments); *out is written only on success. */
DDP_API ddp_status_t ddp_hook_parse(const char *text, ddp_hook_t *out);

typedef struct ddp_reducer_opts {
  double bucket_cap_mb;   /* default 10 */
  double first_bucket_mb; /* default 1 */
  int grad_as_bucket_view;/* default 1 */
  int find_unused;        /* default 0 */
  int static_graph;       /* default 0. 1: the set of parameters that get a gradient is the same
                             every iteration; with find_unused, the parameters unused in the first
                             synced iteration are then treated as ready (zero) at the start of
                             each later one, so their buckets launch early and the used-set
                             allreduce is skipped. Buckets are rebuilt once either way. */
  ddp_hook_t hook;        /* default DDP_HOOK_NONE; fp16/bf16 compress f32 buckets only (other
                             dtypes are reduced as they are): the bucket is divided by the
                             world size, rounded to half precision, summed in half precision
                             and widened back, so gradients carry a relative error of about
                             2^-11 (fp16, which also flushes |g|/world < 6e-8 to zero and
                             overflows above 65504) or 2^-8 (bf16) per rounding. */
  int broadcast_params;   /* default 1 */
  ddp_algo_t algo;        /* allreduce algorithm, DDP_ALGO_AUTO = auto */
  ddp_stream_t *stream;   /* stream of the device parameters, NULL = default stream */
  int predivided;         /* default 0: finish leaves sum / world size. 1: the application
                             already divides its loss by the world size (gradients are linear in
                             the loss, so that costs nothing) and finish leaves the plain sum,
                             which saves the division pass over every bucket; bitwise the same
                             result when the world size is a power of two */
  int shard;              /* default 0: every bucket is allreduced. 1 (ZeRO-1): every bucket is
                             reduce-scattered instead, so after finish each rank holds the
                             averaged gradients of its own contiguous shard of each bucket
                             (ddp_reducer_shard_range says which elements of a parameter); the
                             application updates those elements only (its optimizer state is
                             kept for them only) and ddp_reducer_allgather_params brings every
                             rank the updated parameters. Host parameters, views on, no hook.
                             No memory besides the buckets: each is reduce-scattered in place
                             into this rank's block of it.
                             2 (ZeRO-2): as 1, and once ddp_reducer_param_wait has copied a
                             bucket's gathered parameters out, the whole memory pages of the
                             bucket outside this rank's block are given back to the system
                             (madvise; node-shared pool pages are punched out of the segment),
                             so between steps each rank keeps about 1/world of the gradient
                             memory; the next backward writes those pages again (they read as
                             zeros until then). This lowers the resident memory between steps,
                             not the peak during backward (every gradient is still produced in
                             full before its bucket is reduce-scattered), and costs the page
                             faults of re-touching the memory each step. */
} ddp_reducer_opts_t;

DDP_API ddp_status_t ddp_reducer_opts_default(ddp_reducer_opts_t *opts);

/* Collective: checks that every rank registered the same parameters (count, dtype, mem) and
 * options, broadcasts parameters from rank 0, builds buckets. opts may be NULL (defaults).
 * A bad argument on any rank, or a mismatch between ranks, is an error on every rank (the
 * mismatch message names the first differing parameter, its index, name and sizes). The
 * communicator must outlive the reducer; ddp_reducer_destroy is collective over the node
 * (it returns bucket memory to the node-shared pool) and sets *r = NULL (NULL or *r == NULL:
 * DDP_OK, nothing to do). The reducer is used from one thread. */
DDP_API ddp_status_t ddp_reducer_create(ddp_comm_t *comm, const ddp_param_t *params,
                                        size_t nparams, const ddp_reducer_opts_t *opts,
                                        ddp_reducer_t **out);
DDP_API ddp_status_t ddp_reducer_destroy(ddp_reducer_t **r);

/* The gradient buffer of parameter i (a view into its bucket with views on, else the
 * application's). Valid until the buckets are rebuilt: re-fetch after each finish(). */
DDP_API ddp_status_t ddp_reducer_grad(ddp_reducer_t *r, size_t i, void **grad);
/* Every gradient buffer at once: grads[i] = what ddp_reducer_grad(r, i) returns, for i in
 * 0 .. n-1; n must be the reducer's parameter count. Fetch them after create and again after
 * each finish() (the first synced one rebuilds the buckets). On error (r or grads NULL, n not
 * the parameter count) nothing is written to grads. */
DDP_API ddp_status_t ddp_reducer_grads(ddp_reducer_t *r, void **grads, size_t n);
/* Sets every gradient to zero (start of an accumulation window). */
DDP_API ddp_status_t ddp_reducer_zero_grad(ddp_reducer_t *r);
/* Gradient i is complete for this iteration (any order). With views off its buffer is copied
 * into the bucket now. A bucket is launched (non-blocking allreduce, progressed in the
 * background) once all its gradients are ready and all lower buckets are launched. Marking a
 * parameter twice in one iteration is DDP_ESTATE naming it. Under no_sync this only checks i. */
DDP_API ddp_status_t ddp_reducer_grad_ready(ddp_reducer_t *r, size_t i);
/* Ends the iteration: waits for every bucket and leaves averaged gradients in place (copied
 * back to the application's buffers with views off). Parameters not marked ready are zero
 * gradients with find_unused; without it the first missing one is a DDP_ESTATE error naming it
 * (the buckets are still reduced, so other ranks do not hang). The first synced finish rebuilds
 * the buckets from the observed ready order (rank 0's), so re-fetch ddp_reducer_grad after it.
 * Under no_sync it returns at once. */
DDP_API ddp_status_t ddp_reducer_finish(ddp_reducer_t *r);
/* sync = 0: no_sync (accumulate locally, no communication); 1: normal. */
DDP_API ddp_status_t ddp_reducer_set_sync(ddp_reducer_t *r, int sync);

typedef struct ddp_reducer_stats {
  size_t nbuckets;
  size_t bucket_bytes_max, bucket_bytes_min;
  uint64_t iterations;        /* synced iterations finished */
  double comm_ms_avg;         /* mean time from first bucket launch to last completion */
  double exposed_ms_avg;      /* mean time finish() waited */
  double hidden_fraction;     /* 1 - exposed/comm, the share of communication overlapped */
  int rebuilt;                /* buckets rebuilt from observed order */
  size_t unused_params;       /* find_unused: parameters no rank produced in the last iteration */
  size_t wire_bytes;          /* bytes allreduced per synced iteration (halved by a hook) */
  size_t released_bytes;      /* opts.shard = 2: bucket bytes given back to the system after the
                                 last allgather (so far, as its buckets were waited for) */
} ddp_reducer_stats_t;

DDP_API ddp_status_t ddp_reducer_stats(const ddp_reducer_t *r, ddp_reducer_stats_t *stats);
/* Bucket of parameter i and the parameter indices of bucket b, for tests and tools. */
DDP_API ddp_status_t ddp_reducer_bucket_of(const ddp_reducer_t *r, size_t i, size_t *bucket);
/* Writes up to `cap` parameter indices of bucket b (in bucket order) into idx (may be NULL
 * with cap 0) and their number into *n; *bytes (may be NULL) gets the bucket's size. */
DDP_API ddp_status_t ddp_reducer_bucket_params(const ddp_reducer_t *r, size_t b, size_t *idx,
                                               size_t cap, size_t *n, size_t *bytes);
/* ---- sharded mode (opts.shard = 1, ZeRO-1; 2, ZeRO-2) -------------------------------------
 * After a synced finish, elements [*begin, *begin + *count) of parameter i (and of its
 * gradient view) are this rank's: their gradients are averaged, the rest of the view is not.
 * *count may be 0. The ranges of all ranks partition every parameter. DDP_ESTATE before the
 * first synced finish (the buckets are rebuilt then) or without opts.shard. */
DDP_API ddp_status_t ddp_reducer_shard_range(const ddp_reducer_t *r, size_t i, size_t *begin,
                                             size_t *count);
/* Starts the non-blocking allgather of the parameters, bucket by bucket (the first layers'
 * bucket first), after the application updated its own ranges in its parameter buffers. The
 * bucket memory carries the parameters, so the gradient views are not gradients until the next
 * backward writes them. DDP_ESTATE between the first grad_ready and finish (a reduce is in
 * flight) or while an allgather is. */
DDP_API ddp_status_t ddp_reducer_allgather_params(ddp_reducer_t *r);
/* Waits for parameter i's bucket and copies the gathered values into the application's buffer:
 * call it before parameter i is read (the forward pass); at once when nothing is in flight.
 * i = SIZE_MAX waits for all. With opts.shard = 2 it then releases the bucket's pages outside
 * this rank's block (see ddp_reducer_opts_t.shard). */
DDP_API ddp_status_t ddp_reducer_param_wait(ddp_reducer_t *r, size_t i);
/* *data = parameter i's buffer; DDP_ESTATE naming it while its allgather is in flight (a read
 * then would see stale values): call ddp_reducer_param_wait first. */
DDP_API ddp_status_t ddp_reducer_param(ddp_reducer_t *r, size_t i, void **data);

/* After a synced finish with find_unused: *used = 1 when some rank produced gradient i. */
DDP_API ddp_status_t ddp_reducer_param_used(const ddp_reducer_t *r, size_t i, int *used);

#ifdef __cplusplus
}
#endif
#endif /* DDP_REDUCER_H */
