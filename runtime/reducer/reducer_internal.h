/* Private state of the reducer (runtime/reducer/), and the small bucket-memory interface
 * (reducer_mem.c) that the device work extends for DDP_MEM_CUDA buckets. */
#ifndef DDP_REDUCER_INTERNAL_H
#define DDP_REDUCER_INTERNAL_H

#include "ddp_internal.h"
#include "ddp_reducer.h"

/* ---- bucket memory ----------------------------------------------------------------------
 * Every allocation, copy and fill of bucket memory goes through these, so a memory kind is
 * added in one place. Host buckets come from the node-shared pool (ddp_alloc: the shm
 * allreduce then reads peers' buckets directly, no copy-in) when the node has more than one
 * rank, else from malloc. ddp_alloc is collective over the node: every rank allocates the same
 * buckets in the same order, which holds because bucket layouts agree across ranks. */
typedef struct ddp__rbuf {
  void *ptr;
  size_t bytes;
  ddp_mem_t mem;
  int pooled; /* 1: ddp_alloc (free with ddp_free, collective over the node) */
} ddp__rbuf_t;

DDP_HIDDEN ddp_status_t ddp__rbuf_alloc(ddp_comm_t *comm, ddp__comm_t *c, ddp_mem_t mem,
                                        size_t bytes, int want_pool, ddp_stream_t *stream,
                                        ddp__rbuf_t *out);
DDP_HIDDEN void ddp__rbuf_free(ddp_comm_t *comm, ddp__rbuf_t *b);
/* Device operations are ordered on `stream` (the application's gradient stream); host ones are
 * done on return. */
DDP_HIDDEN ddp_status_t ddp__rbuf_zero(ddp_comm_t *comm, ddp_mem_t mem, void *ptr, size_t bytes,
                                       ddp_stream_t *stream);
/* dst and src both of kind `mem` (bucket <-> application gradient, old <-> new bucket). */
DDP_HIDDEN ddp_status_t ddp__rbuf_copy(ddp_comm_t *comm, ddp_mem_t mem, void *dst, const void *src,
                                       size_t bytes, ddp_stream_t *stream);
/* Compression hook: dst_half = (half)(src * scale), and back (dtype names the half type; round
 * to nearest even). For device memory, compress scales src in place first. */
DDP_HIDDEN ddp_status_t ddp__rbuf_compress(ddp_comm_t *comm, ddp_mem_t mem, void *dst_half,
                                           float *src, size_t count, float scale,
                                           ddp_dtype_t half, ddp_stream_t *stream);
DDP_HIDDEN ddp_status_t ddp__rbuf_decompress(ddp_comm_t *comm, ddp_mem_t mem, float *dst,
                                             const void *src_half, size_t count, ddp_dtype_t half,
                                             ddp_stream_t *stream);
/* ZeRO-2: gives the whole pages inside ptr[0 .. bytes) back to the system (host memory: shared
 * pool pages are punched out of the node-shared segment, private ones dropped); they read as
 * zeros when touched again. Returns the bytes released (0 for device memory or when the system
 * refuses). */
DDP_HIDDEN size_t ddp__rbuf_release(ddp_mem_t mem, int pooled, void *ptr, size_t bytes);
/* Host view of the results: waits for the stream's work (device), no-op for host memory. */
DDP_HIDDEN ddp_status_t ddp__rbuf_sync(ddp_comm_t *comm, ddp_mem_t mem, ddp_stream_t *stream);
/* NULL when the reducer can hold parameters of kind `mem` on this communicator, else why. */
DDP_HIDDEN const char *ddp__rbuf_unsupported(ddp_comm_t *comm, ddp_mem_t mem);

/* ---- the reducer -------------------------------------------------------------------------- */
typedef struct ddp__rparam {
  void *data;
  size_t count;
  ddp_dtype_t dtype;
  ddp_mem_t mem;
  char *name;       /* copy, or NULL */
  void *grad;       /* application's buffer (views off) */
  int marked;       /* this iteration: 0 no, 1 by the application, 2 static-unused, 3 by finish */
  int used_local;   /* last synced iteration: marked by the application on this rank */
  int static_unused;
} ddp__rparam_t;

/* Bucket layout: members[first[b] .. first[b]+nmem[b]) are bucket b's parameters in bucket
 * order; parameter i lives in bucket pbucket[i] at element offset poff[i]. */
typedef struct ddp__rlayout {
  size_t nb;
  size_t *members, *first, *nmem, *bytes; /* bytes: nb entries */
  size_t *pbucket, *poff;                 /* np entries */
} ddp__rlayout_t;

typedef struct ddp__rbucket {
  ddp__rbuf_t buf;   /* the gradients (views) or their copies */
  ddp__rbuf_t half;  /* fp16/bf16 hook: compressed copy that goes on the wire */
  size_t count, bytes;
  ddp_dtype_t dtype;
  ddp_mem_t mem;
  int hooked;
  size_t pending;    /* parameters not ready yet this iteration */
  ddp_request_t *req;
  size_t shard;      /* sharded mode: elements per rank (count rounded up to the world size) */
  ddp_request_t *agreq; /* sharded mode: the parameter allgather in flight */
  int ag_pending;    /* allgather posted, parameters not yet copied out */
  int done;
  double t_launch, t_done;
} ddp__rbucket_t;

struct ddp_reducer {
  ddp_comm_t *comm;
  ddp__comm_t *c;
  ddp__rparam_t *p;
  size_t np;
  ddp__rlayout_t lay;
  ddp__rbucket_t *b;
  /* options */
  size_t first_bytes, cap_bytes;
  int views, find_unused, static_graph, predivided, shard;
  ddp_hook_t hook;
  ddp_algo_t algo;
  ddp_stream_t *stream;
  int has_device;         /* some parameter lives in device memory */
  /* iteration state */
  int sync, active;
  size_t next_launch, next_done;
  double t_first_launch, t_last_done;
  ddp_status_t comm_err;
  char comm_msg[256];
  uint8_t *used;          /* np entries: used on some rank (find_unused) */
  int static_unused_known;
  /* rebuild */
  size_t *order, norder;
  int recording, rebuilt;
  /* statistics */
  uint64_t iterations;
  double sum_comm, sum_exposed;
  size_t unused_params, wire_bytes;
  size_t released_bytes;  /* shard = 2: gradient bytes released after the last allgather */
};

/* ---- helpers shared by the reducer's files ------------------------------------------------ */
/* The half dtype a compression hook sends (DDP_F16 or DDP_BF16); DDP_HOOK_NONE: DDP_DTYPE_COUNT. */
DDP_HIDDEN ddp_dtype_t ddp__hook_dtype(ddp_hook_t hook);
/* DDP_EINVAL naming i when it is not one of r's parameter indices (the one message for it). */
DDP_HIDDEN ddp_status_t ddp__reducer_check_index(const ddp_reducer_t *r, size_t i);

/* What bucket b puts on the wire: the hook's half copy of an f32 bucket, else the bucket. */
static inline ddp_dtype_t ddp__rbucket_wire_dtype(const ddp_reducer_t *r, const ddp__rbucket_t *b) {
  return b->hooked ? ddp__hook_dtype(r->hook) : b->dtype;
}
static inline void *ddp__rbucket_wire_buf(const ddp__rbucket_t *b) {
  return b->hooked ? b->half.ptr : b->buf.ptr;
}
static inline size_t ddp__rparam_bytes(const ddp__rparam_t *p) {
  return p->count * ddp_dtype_size(p->dtype);
}
/* Parameter i's gradient slot in its bucket. */
static inline void *ddp__reducer_slot(const ddp_reducer_t *r, size_t i) {
  return (char *)r->b[r->lay.pbucket[i]].buf.ptr + r->lay.poff[i] * ddp_dtype_size(r->p[i].dtype);
}
static inline const char *ddp__reducer_pname(const ddp_reducer_t *r, size_t i) {
  return r->p[i].name ? r->p[i].name : "unnamed";
}

/* reducer_layout.c: bucket assignment, bucket memory, the rebuild from the observed order */
DDP_HIDDEN ddp_status_t ddp__reducer_assign(const ddp__rparam_t *p, size_t np, const size_t *order,
                                            size_t first_bytes, size_t cap_bytes,
                                            ddp__rlayout_t *out);
DDP_HIDDEN void ddp__reducer_layout_free(ddp__rlayout_t *l);
/* Allocates buckets for *l and takes it over (l is emptied). Node-collective. */
DDP_HIDDEN ddp_status_t ddp__reducer_install_layout(ddp_reducer_t *r, ddp__rlayout_t *l);
DDP_HIDDEN void ddp__reducer_free_buckets(ddp_reducer_t *r);
DDP_HIDDEN void ddp__reducer_log_layout(ddp_reducer_t *r, const char *what);
/* After the first synced iteration: rank 0's observed ready order becomes every rank's bucket
 * order (collective; the averaged gradients move to their new buckets). */
DDP_HIDDEN ddp_status_t ddp__reducer_rebuild(ddp_reducer_t *r);

#endif /* DDP_REDUCER_INTERNAL_H */
