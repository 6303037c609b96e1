/* Algorithm `hier`: multi-leader hierarchical allreduce. Every local rank carries one slice of
 * the vector across nodes: node-local reduce-scatter (slice i of the node's sum ends on local
 * rank i's side), allreduce of each slice among the ranks with the same local rank on every
 * node (rhd for small slices, ring for large; all local ranks' cross-node streams run at
 * once, so every rank of a node drives the network, not one leader), node-local allgather.
 * The node-local steps go through node-shared memory where the node's ranks can map each
 * other's memory, in chunks of the shm staging size; elsewhere (no shared windows, or the
 * simulator: ddp_internal.h) through the transport's point to point on the node group, over
 * the whole vector: recursive halving / doubling (log2 steps, nearest partner first, rhd's
 * halves), or the ring where the vector has fewer elements than the node has ranks. Needs the same number of ranks on
 * every node. Exercised on one machine with DDP_RANKS_PER_NODE (virtual nodes), on simulated
 * clusters by scale/ (docs/scale.md). */
#include <stdlib.h>

#include "coll_internal.h"

#define CROSS_RING_BYTES ((size_t)64 << 10) /* slice size from which the cross step is a ring */
#define CROSS_HALVE_BYTES ((size_t)8 << 10) /* slice size from which the cross step halves */
#define P2P_PIECE_BYTES ((size_t)1 << 30)    /* point-to-point path: pieces per pass */

static const char *hier_supports(const ddp__ctx_t *x, const ddp__ar_t *a) {
  (void)a;
  if (x->mem != DDP_MEM_HOST) return "needs host memory";
  if (!x->cs->uniform_nodes) return "needs the same number of ranks on every node";
  return NULL;
}

/* The cross-node allreduce of one slice. All local ranks' slices cross at once, so each
 * stream gets a share of the node's link: the bandwidth term weighs local_size times more
 * than for a lone stream, and Rabenseifner (rhd's halving + doubling, 2 log2(nodes) messages)
 * pays from small slices on (CROSS_HALVE_BYTES) where rhd alone would still double the whole
 * slice. On node counts that are not powers of two the ring takes large slices, where rhd's
 * fold would send the whole slice twice more. */
static ddp_status_t cross_step(ddp__ctx_t *xc, char *slice, size_t n, ddp_dtype_t dtype,
                               ddp_op_t op) {
  if (xc->size <= 1 || n == 0) return DDP_OK;
  size_t bytes = n * ddp_dtype_size(dtype);
  int pof2 = (xc->size & (xc->size - 1)) == 0;
  ddp__ar_t s = {slice, slice, n, dtype, op};
  if (!pof2 && bytes >= CROSS_RING_BYTES) return ddp__algo_ring.run(xc, &s);
  if (pof2 && bytes >= CROSS_HALVE_BYTES && n >= (size_t)xc->size) {
    ddp__rhd_t f;
    DDP_TRY(ddp__rhd_reduce_scatter(xc, slice, n, dtype, op, &f));
    return ddp__rhd_allgather(xc, slice, n, dtype, &f);
  }
  return ddp__algo_rhd.run(xc, &s);
}

static ddp_status_t hier_run(ddp__ctx_t *x, const ddp__ar_t *a) {
  ddp__comm_t *c = x->c;
  ddp__coll_t *cs = x->cs;
  size_t es = ddp_dtype_size(a->dtype);
  int n = c->local_size, me = c->local_rank;
  ddp__ctx_t xc = *x; /* the cross-node group of this local rank */
  xc.grp = &cs->g_cross;
  xc.rank = cs->cross_rank;
  xc.size = cs->cross_size;
  xc.world_of = cs->cross_world;
  ddp__ctx_t xn = *x; /* the node group (point-to-point path) */
  xn.grp = &cs->g_node;
  xn.rank = me;
  xn.size = n;
  xn.world_of = NULL;
  int shm = !cs->shm_disabled;
  /* Shared memory: the reduce-scatter leaves local rank me's slice at chunk me. Point to
   * point: the ring reduce-scatter leaves it at chunk me+1 (allreduce_ring.c). */
  int mine = shm ? me : (me + 1) % n;
  size_t chunk = shm ? ddp__shm_chunk(a->dtype) : P2P_PIECE_BYTES / es;
  ddp__parts_t pt;
  DDP_TRY(ddp__parts_init(&pt, n, "hier"));
  size_t *o = pt.offs, *l = pt.lens;
  ddp_status_t st = DDP_OK;
  for (size_t base = 0; base < a->count && st == DDP_OK; base += chunk) {
    size_t m = a->count - base < chunk ? a->count - base : chunk;
    const char *sb = (const char *)a->send + base * es;
    char *rb = (char *)a->recv + base * es;
    ddp__split(m, n, o, l);
    size_t lo = o[mine], len = l[mine]; /* this local rank's slice */
    ddp__rhd_t f = {0};
    int halve = !shm && n > 1 && m >= (size_t)n; /* else the ring */
    if (n > 1 && shm) {
      st = ddp__shm_reduce_scatter(x, sb, rb, m, a->dtype, a->op);
    } else {
      st = x->xp->copy(x, rb, sb, m * es);
      if (st == DDP_OK && halve) {
        st = ddp__rhd_reduce_scatter(&xn, rb, m, a->dtype, a->op, &f);
        lo = f.lo, len = f.hi - f.lo;
      } else if (st == DDP_OK && n > 1) {
        st = ddp__ring_reduce_scatter(&xn, rb, o, l, a->dtype, a->op);
      }
    }
    if (st == DDP_OK) st = cross_step(&xc, rb + lo * es, len, a->dtype, a->op);
    if (st != DDP_OK || n == 1) continue;
    if (shm) st = ddp__shm_allgather(x, rb, m, a->dtype);
    else if (halve) st = ddp__rhd_allgather(&xn, rb, m, a->dtype, &f);
    else st = ddp__ring_allgather(&xn, rb, o, l, a->dtype);
  }
  ddp__parts_free(&pt);
  return st;
}

const ddp__algo_t ddp__algo_hier = {"hier", DDP_ALGO_HIER, hier_supports, hier_run};
