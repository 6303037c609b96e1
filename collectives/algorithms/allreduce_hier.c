/* Algorithm `hier`: multi-leader hierarchical allreduce. Every local rank carries one slice of
 * the vector across nodes: node-local reduce-scatter (slice i of the node's sum ends on local
 * rank i's side), allreduce of each slice among the ranks with the same local rank on every
 * node (rhd for small slices, ring for large; all local ranks' cross-node streams run at
 * once, so every rank of a node drives the network, not one leader), node-local allgather.
 * The node-local steps go through node-shared memory where the node's ranks can map each
 * other's memory, in chunks of the shm staging size; elsewhere (no shared windows, DDP_SHM=0,
 * or the simulator: ddp_internal.h) through the transport's point to point on the node group,
 * over the whole vector: recursive halving / doubling (log2 steps, nearest partner first,
 * rhd's halves), or the ring where the vector has fewer elements than the node has ranks.
 * On that path large vectors are pipelined (pipe_run below): while one chunk crosses the
 * network, the next one's node-local reduce-scatter and the previous one's allgather run.
 * Needs the same number of ranks on every node. Exercised on one machine with
 * DDP_RANKS_PER_NODE (virtual nodes) and DDP_SHM=0, on simulated clusters by scale/
 * (docs/scale.md). */
#include <stdlib.h>

#include "rhd.h"
#include "shm.h"

#define CROSS_RING_BYTES ((size_t)64 << 10) /* slice size from which the cross step is a ring */
#define CROSS_HALVE_BYTES ((size_t)8 << 10) /* slice size from which the cross step halves */
#define P2P_PIECE_BYTES ((size_t)1 << 30)    /* point-to-point path: pieces per pass */

static const char *hier_supports(const ddp__ctx_t *x, const ddp__ar_t *a) {
  (void)a;
  if (x->mem != DDP_MEM_HOST) return "needs host memory";
  if (!x->shape->uniform_nodes) return "needs the same number of ranks on every node";
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

/* ---- the pipelined point-to-point path ---------------------------------------------------
 * The vector is cut into K chunks; each chunk goes through four stages, each a sequence of
 * rhd levels (ddp__rhd_halve_* / ddp__rhd_double_*): node reduce-scatter (log2 L halvings on
 * the node group), cross-node reduce-scatter and allgather of this rank's slice (log2 N
 * halvings, log2 N doublings on the cross group), node allgather (log2 L doublings). The
 * stages run in lock-step rounds: each round posts the next level of every chunk that may
 * move (at most one chunk per stage, in order; the cross stages are one network stream), then
 * waits for all of them and finishes them, so a round costs its slowest exchange, and the
 * node-local levels of chunks k+1 and k-1 hide behind chunk k's cross-node level. Every rank
 * runs the same rounds (they depend only on L, N, K and the count), so messages match.
 *
 * Chunk count, from the alpha-beta model (docs/scale.md): pipelining hides all but the first
 * chunk's node reduce-scatter and the last chunk's node allgather, 2 T_node (1 - 1/K) with
 * T_node = n (L-1)/L / B_node, and costs 2 log2 N more cross-node latencies per extra chunk,
 * (K-1) 2 log2 N alpha. The best K is sqrt(2 T_node / (2 log2 N alpha)): on the simulated
 * 100 Gb/s fat tree (B_node 200 GB/s loopback, alpha ~4-5 us across leaves, 32-128 nodes)
 * about 3-4 at 64 MB, 1-2 at 16 MB, 1 at 1 MB; with real node-local reductions (memory
 * bound, a few GB/s) the node terms are larger and the best chunk smaller. K = n / C chunks of
 * C = DDP_HIER_PIPELINE (default 16 MB: 4 chunks at 64 MB, none below 32 MB), at most
 * PIPE_MAX_CHUNKS, and every chunk keeps at least L N elements (each halving level has
 * something to send). Powers of two only (L and N: no fold). */
#define PIPE_MAX_CHUNKS 8

enum { ST_RS, ST_XRS, ST_XAG, ST_AG, ST_DONE };

typedef struct pipe_chunk {
  char *buf;      /* the chunk in recv */
  const char *sb; /* the chunk in send */
  size_t m;       /* elements */
  int st;
  ddp__rhd_t fn, fx; /* node levels over the chunk, cross levels over this rank's slice */
} pipe_chunk_t;

static int pof2(int v) { return v > 0 && (v & (v - 1)) == 0; }

/* Chunks for a piece of `count` elements (1: not pipelined). */
static int pipe_chunks(const ddp__ctx_t *x, int n, int nodes, size_t count, size_t es) {
  size_t c = x->c->cfg.hier_pipeline;
  if (c == 0 || n < 2 || nodes < 2 || !pof2(n) || !pof2(nodes)) return 1;
  size_t k = count * es / c, most = count / ((size_t)n * (size_t)nodes);
  if (k > PIPE_MAX_CHUNKS) k = PIPE_MAX_CHUNKS;
  if (k > most) k = most;
  return k < 2 ? 1 : (int)k;
}

/* May chunk c (stage st) take its next level this round? The chunk before it must have left
 * that stage (and, for the cross stages, both of them). */
static int may_move(const pipe_chunk_t *ch, int c) {
  if (ch[c].st == ST_DONE) return 0;
  if (c == 0) return 1;
  int prev = ch[c - 1].st, st = ch[c].st;
  return st == ST_XRS || st == ST_XAG ? prev >= ST_AG : prev > st;
}

static ddp_status_t pipe_post(ddp__ctx_t *xn, ddp__ctx_t *xc, pipe_chunk_t *k, size_t es,
                              void *tn, void *tx, ddp__xreq_t q[2]) {
  switch (k->st) {
    case ST_RS:
      if (k->fn.lvl == 0 && k->sb != k->buf) DDP_TRY(xn->xp->copy(xn, k->buf, k->sb, k->m * es));
      return ddp__rhd_halve_post(xn, k->buf, es, &k->fn, tn, q);
    case ST_XRS: return ddp__rhd_halve_post(xc, k->buf + k->fn.lo * es, es, &k->fx, tx, q);
    case ST_XAG: return ddp__rhd_double_post(xc, k->buf + k->fn.lo * es, es, &k->fx, q);
    default: return ddp__rhd_double_post(xn, k->buf, es, &k->fn, q);
  }
}

static ddp_status_t pipe_done(ddp__ctx_t *xn, ddp__ctx_t *xc, pipe_chunk_t *k, ddp_dtype_t dt,
                              ddp_op_t op, const void *tn, const void *tx) {
  size_t es = ddp_dtype_size(dt);
  switch (k->st) {
    case ST_RS:
      DDP_TRY(ddp__rhd_halve_done(xn, k->buf, dt, op, &k->fn, tn));
      if ((1 << k->fn.lvl) == k->fn.pof2) {
        ddp__rhd_begin(&k->fx, xc->rank, xc->size, k->fn.hi - k->fn.lo);
        k->st = ST_XRS;
      }
      break;
    case ST_XRS:
      DDP_TRY(ddp__rhd_halve_done(xc, k->buf + k->fn.lo * es, dt, op, &k->fx, tx));
      if ((1 << k->fx.lvl) == k->fx.pof2) k->st = ST_XAG;
      break;
    case ST_XAG:
      ddp__rhd_double_done(&k->fx);
      if (k->fx.lvl == 0) k->st = ST_AG;
      break;
    default:
      ddp__rhd_double_done(&k->fn);
      if (k->fn.lvl == 0) k->st = ST_DONE;
  }
  return DDP_OK;
}

static ddp_status_t pipe_run(ddp__ctx_t *xn, ddp__ctx_t *xc, const char *sb, char *rb,
                             size_t count, int nk, ddp_dtype_t dt, ddp_op_t op) {
  size_t es = ddp_dtype_size(dt), offs[PIPE_MAX_CHUNKS], lens[PIPE_MAX_CHUNKS];
  pipe_chunk_t ch[PIPE_MAX_CHUNKS];
  ddp__split(count, nk, offs, lens);
  for (int c = 0; c < nk; c++) {
    ch[c].buf = rb + offs[c] * es, ch[c].sb = sb + offs[c] * es, ch[c].m = lens[c];
    ch[c].st = ST_RS;
    ddp__rhd_begin(&ch[c].fn, xn->rank, xn->size, lens[c]);
  }
  /* Halving receives at most half (rounded up) of what it holds: the node step half a chunk,
   * the cross step half a slice (a slice is at most a chunk / L, rounded up per level). */
  size_t most = lens[0];
  void *tn = NULL, *tx = NULL;
  DDP_TRY(xn->xp->scratch(xn, 0, ((most + 1) / 2) * es, &tn));
  DDP_TRY(xn->xp->scratch(xn, 1, ((most / (size_t)xn->size + 2) / 2 + 1) * es, &tx));
  for (int left = nk; left > 0;) {
    ddp__xreq_t qn[2 * PIPE_MAX_CHUNKS], qc[2 * PIPE_MAX_CHUNKS];
    int moved[PIPE_MAX_CHUNKS], nm = 0, nn = 0, nc = 0;
    for (int c = 0; c < nk; c++) {
      if (!may_move(ch, c)) continue;
      int cross = ch[c].st == ST_XRS || ch[c].st == ST_XAG;
      ddp__xreq_t *q = cross ? &qc[2 * nc++] : &qn[2 * nn++];
      DDP_TRY(pipe_post(xn, xc, &ch[c], es, tn, tx, q));
      moved[nm++] = c;
    }
    DDP_TRY(xn->xp->wait(xn, 2 * nn, qn));
    DDP_TRY(xc->xp->wait(xc, 2 * nc, qc));
    for (int i = 0; i < nm; i++) {
      pipe_chunk_t *k = &ch[moved[i]];
      DDP_TRY(pipe_done(xn, xc, k, dt, op, tn, tx));
      if (k->st == ST_DONE) left--;
    }
  }
  return DDP_OK;
}

static ddp_status_t hier_run(ddp__ctx_t *x, const ddp__ar_t *a) {
  ddp__comm_t *c = x->c;
  const ddp__coll_shape_t *sh = x->shape;
  size_t es = ddp_dtype_size(a->dtype);
  int n = c->local_size, me = c->local_rank;
  ddp__ctx_t xc = *x; /* the cross-node group of this local rank */
  xc.grp = &sh->g_cross;
  xc.rank = sh->cross_rank;
  xc.size = sh->cross_size;
  xc.world_of = sh->cross_world;
  ddp__ctx_t xn = *x; /* the node group (point-to-point path) */
  xn.grp = &sh->g_node;
  xn.rank = me;
  xn.size = n;
  xn.world_of = NULL;
  int shm = !sh->shm_disabled;
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
    if (!shm) {
      int nk = pipe_chunks(x, n, xc.size, m, es);
      if (nk > 1) {
        st = pipe_run(&xn, &xc, sb, rb, m, nk, a->dtype, a->op);
        continue;
      }
    }
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
