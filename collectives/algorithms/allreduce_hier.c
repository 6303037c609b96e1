/* Algorithm `hier`: node-local reduce-scatter through shared memory, cross-node allreduce of
 * each rank's shard among the ranks with the same local rank (rhd for small shards, ring for
 * large), node-local allgather through shared memory. In chunks of the shm staging size.
 * Needs the same number of ranks on every node. Exercised on one machine with
 * DDP_RANKS_PER_NODE (virtual nodes). */
#include <stdlib.h>

#include "coll_internal.h"

#define CROSS_RING_BYTES ((size_t)64 << 10) /* shard size from which the cross step is a ring */

static const char *hier_supports(const ddp__ctx_t *x, const ddp__ar_t *a) {
  (void)a;
  if (x->mem != DDP_MEM_HOST) return "needs host memory";
  if (x->cs->shm_disabled) return "node-shared memory windows do not work here";
  if (!x->cs->uniform_nodes) return "needs the same number of ranks on every node";
  return NULL;
}

static ddp_status_t hier_run(ddp__ctx_t *x, const ddp__ar_t *a) {
  ddp__comm_t *c = x->c;
  ddp__coll_t *cs = x->cs;
  size_t es = ddp_dtype_size(a->dtype);
  int n = c->local_size, me = c->local_rank;
  ddp__ctx_t xc = *x; /* the cross-node group */
  xc.grp = &cs->g_cross;
  xc.rank = cs->cross_rank;
  xc.size = cs->cross_size;
  xc.world_of = cs->cross_world;
  size_t chunk = ddp__shm_chunk(a->dtype);
  ddp__parts_t pt;
  DDP_TRY(ddp__parts_init(&pt, n, "hier"));
  size_t *o = pt.offs, *l = pt.lens;
  ddp_status_t st = DDP_OK;
  for (size_t base = 0; base < a->count && st == DDP_OK; base += chunk) {
    size_t m = a->count - base < chunk ? a->count - base : chunk;
    const char *sb = (const char *)a->send + base * es;
    char *rb = (char *)a->recv + base * es;
    ddp__split(m, n, o, l);
    if (n > 1) st = ddp__shm_reduce_scatter(x, sb, rb, m, a->dtype, a->op);
    else st = x->xp->copy(x, rb, sb, m * es);
    if (st != DDP_OK) break;
    if (xc.size > 1 && l[me] > 0) {
      ddp__ar_t shard = {rb + o[me] * es, rb + o[me] * es, l[me], a->dtype, a->op};
      const ddp__algo_t *al = l[me] * es >= CROSS_RING_BYTES ? &ddp__algo_ring : &ddp__algo_rhd;
      st = al->run(&xc, &shard);
      if (st != DDP_OK) break;
    }
    if (n > 1) st = ddp__shm_allgather(x, rb, m, a->dtype);
  }
  ddp__parts_free(&pt);
  return st;
}

const ddp__algo_t ddp__algo_hier = {"hier", DDP_ALGO_HIER, hier_supports, hier_run};
