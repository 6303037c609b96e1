/* Algorithm `rhd`: recursive doubling for small messages (log2 p exchanges of the whole
 * vector: latency-optimal), Rabenseifner above (recursive-halving reduce-scatter, then
 * recursive-doubling allgather: bandwidth-optimal). A non-power-of-two p folds the first
 * 2*(p - p') ranks pairwise first: the even one hands its vector to the odd one, sits out and
 * gets the result at the end.
 * Bitwise identity across ranks: in recursive doubling both partners compute
 * (lower rank's value) op (higher rank's value); in Rabenseifner each element is reduced by
 * one rank per level and then copied. */
#include "rhd.h"

#define SMALL_BYTES ((size_t)32 << 10)
#define TAG_FOLD 0x5301
#define TAG_RD 0x5302
#define TAG_RS 0x5303
#define TAG_AG 0x5304
#define TAG_UNFOLD 0x5305
#define PIECE_BYTES ((size_t)1 << 31)

static int real_rank(const ddp__rhd_t *f, int nr) { return nr < f->rem ? nr * 2 + 1 : nr + f->rem; }

static ddp_status_t send_only(ddp__ctx_t *x, const void *b, size_t bytes, int peer, int tag) {
  ddp__xreq_t q;
  DDP_TRY(x->xp->isend(x, b, bytes, peer, tag, &q));
  return x->xp->wait(x, 1, &q);
}

static ddp_status_t recv_only(ddp__ctx_t *x, void *b, size_t bytes, int peer, int tag) {
  ddp__xreq_t q;
  DDP_TRY(x->xp->irecv(x, b, bytes, peer, tag, &q));
  return x->xp->wait(x, 1, &q);
}

/* Fold: afterwards f->newrank >= 0 on the pof2 ranks that take part, -1 on those that sit out. */
static ddp_status_t fold(ddp__ctx_t *x, char *buf, size_t count, ddp_dtype_t dtype, ddp_op_t op,
                         ddp__rhd_t *f, void **tmp) {
  int p = x->size, r = x->rank;
  size_t bytes = count * ddp_dtype_size(dtype);
  f->pof2 = 1;
  while (f->pof2 * 2 <= p) f->pof2 *= 2;
  f->rem = p - f->pof2;
  f->lo = f->hi = 0;
  f->lvl = 0;
  DDP_TRY(x->xp->scratch(x, 2, bytes, tmp));
  if (r < 2 * f->rem) {
    if (r % 2 == 0) {
      DDP_TRY(send_only(x, buf, bytes, r + 1, TAG_FOLD));
      f->newrank = -1;
    } else {
      DDP_TRY(recv_only(x, *tmp, bytes, r - 1, TAG_FOLD));
      DDP_TRY(x->xp->reduce(x, buf, *tmp, count, dtype, op));
      f->newrank = r / 2;
    }
  } else {
    f->newrank = r - f->rem;
  }
  return DDP_OK;
}

static ddp_status_t unfold(ddp__ctx_t *x, char *buf, size_t bytes, const ddp__rhd_t *f) {
  int r = x->rank;
  if (r < 2 * f->rem) {
    if (r % 2 == 0) DDP_TRY(recv_only(x, buf, bytes, r + 1, TAG_UNFOLD));
    else DDP_TRY(send_only(x, buf, bytes, r - 1, TAG_UNFOLD));
  }
  return DDP_OK;
}

/* Recursive halving, nearest partner first (as MPICH's Rabenseifner): the largest exchange
 * (half the vector) stays between neighbouring ranks, usually on one node, and only the small
 * late pieces cross the network. The lower partner keeps the lower half. Ranges per level are
 * remembered for the allgather that retraces them. One level is a step: post the exchange,
 * wait, finish it (ddp__rhd_halve_post/_done), so hier can run levels of several pieces at
 * once. */
static void halve_ranges(const ddp__rhd_t *f, int *peer, size_t *klo, size_t *khi, size_t *slo,
                         size_t *shi) {
  int pn = f->newrank ^ (1 << f->lvl);
  size_t lo = f->lo, hi = f->hi, mid = lo + (hi - lo) / 2;
  *peer = real_rank(f, pn);
  if (f->newrank < pn) *klo = lo, *khi = mid, *slo = mid, *shi = hi;
  else *klo = mid, *khi = hi, *slo = lo, *shi = mid;
}

static ddp_status_t post_exchange(ddp__ctx_t *x, const void *sb, size_t sbytes, void *rb,
                                  size_t rbytes, int peer, int tag, ddp__xreq_t q[2]) {
  ddp__xreq_init(&q[0]);
  ddp__xreq_init(&q[1]);
  DDP_TRY(x->xp->irecv(x, rb, rbytes, peer, tag, &q[0]));
  return x->xp->isend(x, sb, sbytes, peer, tag, &q[1]);
}

static ddp_status_t exchange(ddp__ctx_t *x, const void *sb, size_t sbytes, void *rb,
                             size_t rbytes, int peer, int tag) {
  ddp__xreq_t q[2];
  DDP_TRY(post_exchange(x, sb, sbytes, rb, rbytes, peer, tag, q));
  return x->xp->wait(x, 2, q);
}

void ddp__rhd_begin(ddp__rhd_t *f, int rank, int size, size_t count) {
  f->pof2 = size, f->rem = 0, f->newrank = rank;
  f->lo = 0, f->hi = count, f->lvl = 0;
}

ddp_status_t ddp__rhd_halve_post(ddp__ctx_t *x, char *buf, size_t es, const ddp__rhd_t *f,
                                 void *tmp, ddp__xreq_t q[2]) {
  int peer;
  size_t klo, khi, slo, shi; /* kept, sent */
  halve_ranges(f, &peer, &klo, &khi, &slo, &shi);
  return post_exchange(x, buf + slo * es, (shi - slo) * es, tmp, (khi - klo) * es, peer, TAG_RS,
                       q);
}

ddp_status_t ddp__rhd_halve_done(ddp__ctx_t *x, char *buf, ddp_dtype_t dtype, ddp_op_t op,
                                 ddp__rhd_t *f, const void *tmp) {
  int peer;
  size_t klo, khi, slo, shi;
  halve_ranges(f, &peer, &klo, &khi, &slo, &shi);
  DDP_TRY(x->xp->reduce(x, buf + klo * ddp_dtype_size(dtype), tmp, khi - klo, dtype, op));
  f->los[f->lvl] = f->lo, f->his[f->lvl] = f->hi;
  f->lo = klo, f->hi = khi;
  f->lvl++;
  return DDP_OK;
}

static ddp_status_t halving(ddp__ctx_t *x, char *buf, size_t count, ddp_dtype_t dtype,
                            ddp_op_t op, ddp__rhd_t *f, char *tmp) {
  size_t es = ddp_dtype_size(dtype);
  f->lo = 0, f->hi = count, f->lvl = 0;
  while ((1 << f->lvl) < f->pof2) {
    ddp__xreq_t q[2];
    DDP_TRY(ddp__rhd_halve_post(x, buf, es, f, tmp, q));
    DDP_TRY(x->xp->wait(x, 2, q));
    DDP_TRY(ddp__rhd_halve_done(x, buf, dtype, op, f, tmp));
  }
  return DDP_OK;
}

/* Recursive doubling allgather: retrace the levels (farthest partner first, smallest pieces;
 * the last, largest exchange is with the nearest partner again). */
ddp_status_t ddp__rhd_double_post(ddp__ctx_t *x, char *buf, size_t es, const ddp__rhd_t *f,
                                  ddp__xreq_t q[2]) {
  int l = f->lvl - 1, pn = f->newrank ^ (1 << l), peer = real_rank(f, pn);
  size_t plo = f->los[l], phi = f->his[l], mid = plo + (phi - plo) / 2;
  int kept_lower = f->newrank < pn;
  size_t olo = kept_lower ? mid : plo, ohi = kept_lower ? phi : mid; /* partner's part */
  return post_exchange(x, buf + f->lo * es, (f->hi - f->lo) * es, buf + olo * es,
                       (ohi - olo) * es, peer, TAG_AG, q);
}

void ddp__rhd_double_done(ddp__rhd_t *f) {
  f->lvl--;
  f->lo = f->los[f->lvl], f->hi = f->his[f->lvl];
}

static ddp_status_t doubling(ddp__ctx_t *x, char *buf, size_t es, ddp__rhd_t *f) {
  while (f->lvl > 0) {
    ddp__xreq_t q[2];
    DDP_TRY(ddp__rhd_double_post(x, buf, es, f, q));
    DDP_TRY(x->xp->wait(x, 2, q));
    ddp__rhd_double_done(f);
  }
  return DDP_OK;
}

ddp_status_t ddp__rhd_reduce_scatter(ddp__ctx_t *x, void *buf, size_t count, ddp_dtype_t dtype,
                                     ddp_op_t op, ddp__rhd_t *f) {
  void *tmp = NULL;
  DDP_TRY(fold(x, buf, count, dtype, op, f, &tmp));
  if (f->newrank >= 0) DDP_TRY(halving(x, buf, count, dtype, op, f, tmp));
  return DDP_OK;
}

ddp_status_t ddp__rhd_allgather(ddp__ctx_t *x, void *buf, size_t count, ddp_dtype_t dtype,
                                ddp__rhd_t *f) {
  size_t es = ddp_dtype_size(dtype);
  if (f->newrank >= 0) DDP_TRY(doubling(x, buf, es, f));
  return unfold(x, buf, count * es, f);
}

/* Largest vector for recursive doubling. Alpha-beta model over q = log2(pof2) levels:
 * doubling costs q (alpha + n beta), Rabenseifner 2q alpha + 2 n beta (1 - 1/pof2), so
 * doubling wins below n = alpha / (beta (q - 2)) roughly: SMALL_BYTES (measured on one machine,
 * 2-8 ranks) up to 8 ranks, shrinking with the number of levels beyond (simulated fat trees,
 * docs/scale.md: 16 KB at 256 ranks took 72 us by doubling, 41 us at 64 KB by halving). */
static size_t rd_max_bytes(int pof2) {
  int q = 0;
  while ((1 << q) < pof2) q++;
  return q <= 3 ? SMALL_BYTES : SMALL_BYTES / (size_t)(q - 2);
}

static ddp_status_t rhd_piece(ddp__ctx_t *x, char *buf, size_t count, ddp_dtype_t dtype,
                              ddp_op_t op) {
  const ddp__xport_t *xp = x->xp;
  int r = x->rank;
  size_t es = ddp_dtype_size(dtype), bytes = count * es;
  ddp__rhd_t f;
  void *tmp = NULL;
  DDP_TRY(fold(x, buf, count, dtype, op, &f, &tmp));
  if (f.newrank >= 0) {
    if (bytes <= rd_max_bytes(f.pof2) || count < (size_t)f.pof2) {
      for (int mask = 1; mask < f.pof2; mask <<= 1) {
        int peer = real_rank(&f, f.newrank ^ mask);
        DDP_TRY(exchange(x, buf, bytes, tmp, bytes, peer, TAG_RD));
        if (peer < r) {
          /* tmp = theirs(lower) op mine, then into place. */
          DDP_TRY(xp->reduce(x, tmp, buf, count, dtype, op));
          DDP_TRY(xp->copy(x, buf, tmp, bytes));
        } else {
          DDP_TRY(xp->reduce(x, buf, tmp, count, dtype, op));
        }
      }
    } else {
      DDP_TRY(halving(x, buf, count, dtype, op, &f, tmp));
      DDP_TRY(doubling(x, buf, es, &f));
    }
  }
  return unfold(x, buf, bytes, &f);
}

static const char *rhd_supports(const ddp__ctx_t *x, const ddp__ar_t *a) {
  (void)a;
  if (x->size > (1 << 30)) return "world too large";
  return NULL;
}

static ddp_status_t rhd_run(ddp__ctx_t *x, const ddp__ar_t *a) {
  size_t es = ddp_dtype_size(a->dtype);
  if (a->send != a->recv) DDP_TRY(x->xp->copy(x, a->recv, a->send, a->count * es));
  if (x->size == 1) return DDP_OK;
  size_t piece = PIECE_BYTES / es;
  for (size_t off = 0; off < a->count; off += piece) {
    size_t n = a->count - off < piece ? a->count - off : piece;
    DDP_TRY(rhd_piece(x, (char *)a->recv + off * es, n, a->dtype, a->op));
  }
  return DDP_OK;
}

const ddp__algo_t ddp__algo_rhd = {"rhd", DDP_ALGO_RHD, rhd_supports, rhd_run};
