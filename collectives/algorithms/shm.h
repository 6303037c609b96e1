/* Private to the shm algorithms (allreduce_shm.c, allreduce_shm_large.c, shm_pieces.c) and
 * hier, which runs the shm phases on a node: the pieces they share over the node-shared
 * segment transport (coll_shm.h). */
#ifndef DDP_ALGO_SHM_H
#define DDP_ALGO_SHM_H

#include "coll_shm.h"

#define DDP__SHM_SMALL_BYTES ((size_t)16 << 10) /* at or below: every rank reduces everything */
#define DDP__SHM_PUSH_PIECE_BYTES ((size_t)128 << 10) /* pool push: reduce then copy while in cache */
#define DDP__SHM_CMA_PIECE_BYTES ((size_t)256 << 10) /* cross-memory attach: pull, reduce, push */

/* A span of this rank's reduction work on the timeline (DDP_TIMELINE), with its bytes. */
DDP_HIDDEN void ddp__shm_span(ddp__ctx_t *x, char ph, const char *name, size_t bytes);
/* dst = in[0] op in[1] op ... in[n-1], elements [off, off+count) of each. */
DDP_HIDDEN void ddp__shm_reduce_n(void *dst, const char *const *in, int n, size_t off,
                                  size_t count, ddp_dtype_t dtype, ddp_op_t op);
/* This rank's slice [off, off+count) of the reduction into dst (in place when dst is in[me]+off). */
DDP_HIDDEN void ddp__shm_reduce_slice(void *dst, const char *const *in, int n, int me, size_t off,
                                      size_t count, ddp_dtype_t dtype, ddp_op_t op);
/* Copies the slices other ranks will read (all but `me`) of a staged chunk. */
DDP_HIDDEN void ddp__shm_copy_in_others(char *stage, const char *src, const size_t *o,
                                        const size_t *l, int me, int n, size_t es);
/* Above DDP__SHM_SMALL_BYTES (allreduce_shm_large.c): chunked reduce-scatter + allgather through
 * the published locations, or cross-memory attach when every buffer is private. */
DDP_HIDDEN ddp_status_t ddp__shm_large(ddp__ctx_t *x, ddp__shm_t *s, const ddp__ar_t *a);

/* shm phases (host memory, ranks of c->node; shm_pieces.c): reduce-scatter leaving this local
 * rank's contiguous slice (ddp__split of count over local_size) reduced into recv at its
 * offset, and allgather of those slices from recv into recv. Used by shm and hier; count at
 * most ddp__shm_chunk elements. */
DDP_HIDDEN ddp_status_t ddp__shm_reduce_scatter(ddp__ctx_t *x, const void *send, void *recv,
                                                size_t count, ddp_dtype_t dtype, ddp_op_t op);
DDP_HIDDEN ddp_status_t ddp__shm_allgather(ddp__ctx_t *x, void *recv, size_t count,
                                           ddp_dtype_t dtype);
DDP_HIDDEN size_t ddp__shm_chunk(ddp_dtype_t dtype);

#endif /* DDP_ALGO_SHM_H */
