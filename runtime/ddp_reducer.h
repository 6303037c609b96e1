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

typedef enum ddp_hook { DDP_HOOK_NONE = 0, DDP_HOOK_FP16, DDP_HOOK_BF16 } ddp_hook_t;

typedef struct ddp_reducer_opts {
  double bucket_cap_mb;   /* default 25 */
  double first_bucket_mb; /* default 1 */
  int grad_as_bucket_view;/* default 1 */
  int find_unused;        /* default 0 */
  int static_graph;       /* default 0: buckets rebuilt once from the first iteration's order */
  ddp_hook_t hook;        /* default DDP_HOOK_NONE */
  int broadcast_params;   /* default 1 */
  const char *algo;       /* allreduce algorithm, NULL = auto */
  void *stream;           /* cudaStream_t for device parameters, NULL = default stream */
} ddp_reducer_opts_t;

DDP_API ddp_status_t ddp_reducer_opts_default(ddp_reducer_opts_t *opts);

/* Collective: checks that every rank registered the same parameters (count, dtype, mem),
 * broadcasts parameters from rank 0, builds buckets. opts may be NULL (defaults). */
DDP_API ddp_status_t ddp_reducer_create(ddp_comm_t *comm, const ddp_param_t *params,
                                        size_t nparams, const ddp_reducer_opts_t *opts,
                                        ddp_reducer_t **out);
DDP_API ddp_status_t ddp_reducer_destroy(ddp_reducer_t *r);

/* The gradient buffer of parameter i (a view into its bucket with views on, else the
 * application's). Valid until the buckets are rebuilt: re-fetch after each finish(). */
DDP_API ddp_status_t ddp_reducer_grad(ddp_reducer_t *r, size_t i, void **grad);
/* Sets every gradient to zero (start of an accumulation window). */
DDP_API ddp_status_t ddp_reducer_zero_grad(ddp_reducer_t *r);
/* Gradient i is complete for this iteration. */
DDP_API ddp_status_t ddp_reducer_grad_ready(ddp_reducer_t *r, size_t i);
/* Waits for every bucket; leaves averaged gradients in place. */
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
} ddp_reducer_stats_t;

DDP_API ddp_status_t ddp_reducer_stats(const ddp_reducer_t *r, ddp_reducer_stats_t *stats);
/* Bucket of parameter i and the parameter indices of bucket b, for tests and tools. */
DDP_API ddp_status_t ddp_reducer_bucket_of(const ddp_reducer_t *r, size_t i, size_t *bucket);

#ifdef __cplusplus
}
#endif
#endif /* DDP_REDUCER_H */
