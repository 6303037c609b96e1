/* Private to rhd (allreduce_rhd.c) and hier (allreduce_hier.c), which runs rhd's halves on a
 * node and across nodes. */
#ifndef DDP_ALGO_RHD_H
#define DDP_ALGO_RHD_H

#include "coll_internal.h"

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

#endif /* DDP_ALGO_RHD_H */
