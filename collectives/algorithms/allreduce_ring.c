/* Algorithm `ring`: reduce-scatter then allgather around the ring (bandwidth-optimal: each rank
 * sends and receives 2(p-1)/p of the buffer). Each step's chunk moves in segments, pipelined:
 * while segment k is reduced, segment k+1 is already on the wire. Every chunk is reduced by
 * exactly one rank and then copied around, so all ranks end with the same bits. Correct for
 * count < p (empty chunks) and counts not divisible by p. Written against the transport. */
#include <stdlib.h>

#include "coll_internal.h"

#define SEG_BYTES ((size_t)256 << 10)
#define TAG_RS 0x5201
#define TAG_AG 0x5202

void ddp__split(size_t count, int parts, size_t *offs, size_t *lens) {
  size_t base = count / (size_t)parts, extra = count % (size_t)parts, off = 0;
  for (int i = 0; i < parts; i++) {
    lens[i] = base + ((size_t)i < extra ? 1 : 0);
    offs[i] = off;
    off += lens[i];
  }
}

ddp_status_t ddp__parts_init(ddp__parts_t *p, int n, const char *who) {
  p->offs = p->stack;
  if (n > DDP__PARTS_STACK) {
    p->offs = malloc(2 * (size_t)n * sizeof *p->offs);
    if (!p->offs) return ddp__error(DDP_ENOMEM, "%s: out of memory for %d chunk offsets", who, n);
  }
  p->lens = p->offs + (n > DDP__PARTS_STACK ? n : DDP__PARTS_STACK);
  return DDP_OK;
}

void ddp__parts_free(ddp__parts_t *p) {
  if (p->offs != p->stack) free(p->offs);
  p->offs = p->lens = NULL;
}

static int mod(int a, int p) { return ((a % p) + p) % p; }

ddp_status_t ddp__ring_reduce_scatter(ddp__ctx_t *x, void *buf, const size_t *offs,
                                      const size_t *lens, ddp_dtype_t dtype, ddp_op_t op) {
  int p = x->size, r = x->rank;
  if (p == 1) return DDP_OK;
  const ddp__xport_t *xp = x->xp;
  size_t es = ddp_dtype_size(dtype);
  size_t seg = SEG_BYTES / es;
  if (seg == 0) seg = 1;
  void *tmp[2];
  DDP_TRY(xp->scratch(x, 0, seg * es, &tmp[0]));
  DDP_TRY(xp->scratch(x, 1, seg * es, &tmp[1]));
  int right = mod(r + 1, p), left = mod(r - 1, p);
  char *b = buf;
  for (int s = 0; s < p - 1; s++) {
    int sc = mod(r - s, p), rc = mod(r - s - 1, p);
    size_t sl = lens[sc], rl = lens[rc];
    size_t nseg_s = (sl + seg - 1) / seg, nseg_r = (rl + seg - 1) / seg;
    size_t nseg = nseg_s > nseg_r ? nseg_s : nseg_r;
    ddp__xreq_t rq[2], sq[2];
    for (int i = 0; i < 2; i++) ddp__xreq_init(&rq[i]), ddp__xreq_init(&sq[i]);
    /* Post segment 0. */
    if (nseg_r > 0)
      DDP_TRY(xp->irecv(x, tmp[0], (rl < seg ? rl : seg) * es, left, TAG_RS, &rq[0]));
    if (nseg_s > 0)
      DDP_TRY(xp->isend(x, b + offs[sc] * es, (sl < seg ? sl : seg) * es, right, TAG_RS, &sq[0]));
    for (size_t k = 0; k < nseg; k++) {
      int cur = (int)(k & 1), nxt = cur ^ 1;
      /* Post segment k+1 (its buffers were released by the waits of segment k-1). */
      if (k + 1 < nseg_r) {
        size_t o = (k + 1) * seg, n = rl - o < seg ? rl - o : seg;
        DDP_TRY(xp->irecv(x, tmp[nxt], n * es, left, TAG_RS, &rq[nxt]));
      }
      if (k + 1 < nseg_s) {
        DDP_TRY(xp->wait(x, 1, &sq[nxt]));
        size_t o = (k + 1) * seg, n = sl - o < seg ? sl - o : seg;
        DDP_TRY(xp->isend(x, b + (offs[sc] + o) * es, n * es, right, TAG_RS, &sq[nxt]));
      }
      if (k < nseg_r) {
        DDP_TRY(xp->wait(x, 1, &rq[cur]));
        size_t o = k * seg, n = rl - o < seg ? rl - o : seg;
        DDP_TRY(xp->reduce(x, b + (offs[rc] + o) * es, tmp[cur], n, dtype, op));
      }
    }
    DDP_TRY(xp->wait(x, 2, sq));
    DDP_TRY(xp->wait(x, 2, rq));
  }
  return DDP_OK;
}

ddp_status_t ddp__ring_allgather(ddp__ctx_t *x, void *buf, const size_t *offs, const size_t *lens,
                                 ddp_dtype_t dtype) {
  int p = x->size, r = x->rank;
  if (p == 1) return DDP_OK;
  const ddp__xport_t *xp = x->xp;
  size_t es = ddp_dtype_size(dtype);
  int right = mod(r + 1, p), left = mod(r - 1, p);
  char *b = buf;
  /* After the reduce-scatter rank r owns chunk r+1. Step s forwards chunk r+1-s and receives
   * chunk r-s; segments are posted all at once (no scratch, straight into place), but a step
   * can only forward what the previous step received, so steps stay ordered. */
  for (int s = 0; s < p - 1; s++) {
    int sc = mod(r + 1 - s, p), rc = mod(r - s, p);
    ddp__xreq_t q[2];
    ddp__xreq_init(&q[0]);
    ddp__xreq_init(&q[1]);
    DDP_TRY(xp->irecv(x, b + offs[rc] * es, lens[rc] * es, left, TAG_AG, &q[0]));
    DDP_TRY(xp->isend(x, b + offs[sc] * es, lens[sc] * es, right, TAG_AG, &q[1]));
    DDP_TRY(xp->wait(x, 2, q));
  }
  return DDP_OK;
}

static const char *ring_supports(const ddp__ctx_t *x, const ddp__ar_t *a) {
  (void)x;
  (void)a;
  return NULL;
}

/* Outer pieces keep every message within the transport's limit. */
#define PIECE_BYTES ((size_t)1 << 31)

static ddp_status_t ring_run(ddp__ctx_t *x, const ddp__ar_t *a) {
  size_t es = ddp_dtype_size(a->dtype);
  if (a->send != a->recv) DDP_TRY(x->xp->copy(x, a->recv, a->send, a->count * es));
  if (x->size == 1) return DDP_OK;
  ddp__parts_t pt;
  DDP_TRY(ddp__parts_init(&pt, x->size, "ring"));
  size_t *o = pt.offs, *l = pt.lens;
  size_t piece = PIECE_BYTES / es;
  ddp_status_t st = DDP_OK;
  for (size_t off = 0; off < a->count && st == DDP_OK; off += piece) {
    size_t n = a->count - off < piece ? a->count - off : piece;
    char *b = (char *)a->recv + off * es;
    ddp__split(n, x->size, o, l);
    st = ddp__ring_reduce_scatter(x, b, o, l, a->dtype, a->op);
    if (st == DDP_OK) st = ddp__ring_allgather(x, b, o, l, a->dtype);
  }
  ddp__parts_free(&pt);
  return st;
}

const ddp__algo_t ddp__algo_ring = {"ring", DDP_ALGO_RING, ring_supports, ring_run};
