/* Algorithm `shm`: intra-node allreduce through memory every rank of the node maps.
 *
 * A per-communicator node-shared segment (the transport's seg_alloc over the node group, created
 * on first use) gives
 * each rank a control block (barrier counter, buffer descriptors) and a staging area of two
 * halves. Each rank publishes where its input and its result live: inside a ddp_alloc pool
 * window (zero-copy: peers read the user's buffer directly) or in its staging area (copy-in).
 *  - Small messages: every rank copies its input to staging, one barrier, and every rank
 *    reduces all inputs itself in rank order (same expression everywhere: identical bits).
 *    The halves alternate between calls, so no second barrier is needed.
 *  - Larger ones, in chunks: barrier; rank r reduces slice r of the chunk from every peer's
 *    input into its result location; barrier; every rank copies the other slices from their
 *    owners' result locations. Each slice is reduced once, so all ranks hold the same bits.
 * Barriers are flat counters in shared memory. A rank waiting for a peer's counter spins
 * briefly, then sleeps in the kernel on the counter itself (a shared futex, woken by the peer
 * that bumps it), bounded by the DDP_TIMEOUT_S watchdog: a wait costs no CPU beyond its spin,
 * so a progress thread waiting for a slow peer does not take cycles from its own rank's
 * backward pass when every core is busy. */
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "coll_internal.h"

#define CTRL_BYTES ((size_t)4096)
/* Spin before sleeping on a peer's flag: long enough to catch a peer that arrives in step (a
 * small allreduce between two busy-polling ranks completes in about a microsecond), short
 * enough not to take much from this rank's own compute thread when the collective runs in the
 * background (a reducer bucket during the backward pass). While a caller waits for the
 * collective with nothing else to do, its core would idle: spin up to DDP__SHM_SPIN_IDLE_S,
 * since a futex sleep and wake-up costs about 25 us per barrier on a virtual machine (futex
 * ping-pong between two processes: 52 us round trip, against 1 us spinning). Oversubscribed
 * nodes spin least: the peer may need this very core. */
#define DDP__SHM_SPIN_S 50e-6
#define DDP__SHM_SPIN_IDLE_S 1e-3
#define DDP__SHM_SPIN_OVERSUB_S 5e-6
#define DDP__SHM_WATCH_S 0.05 /* a sleeping wait runs the watchdog this often */
#define HALF_BYTES ((size_t)8 << 20)  /* one staging half */
#define SMALL_BYTES ((size_t)16 << 10) /* at or below: every rank reduces everything */
#define LOC_STAGE UINT64_MAX
#define PUSH_PIECE_BYTES ((size_t)128 << 10) /* pool push: reduce then copy while in cache */
#define CMA_PIECE_BYTES ((size_t)256 << 10) /* cross-memory attach: pull, reduce, push */
#define TINY_BYTES 48 /* at or below: the data travels in the flag's own cache line */

typedef struct {
  uint64_t id, off; /* pool window id and offset, or LOC_STAGE */
} loc_t;

typedef struct {
  _Atomic uint64_t tag; /* sequence number of the call whose data this holds */
  uint64_t pad;
  char data[TINY_BYTES];
} tiny_t;

/* The flags a rank waits on (arrive, tiny[].tag) are written by their owner only. A waiter
 * that goes to sleep counts itself in the owner's `sleepers` first, so the owner makes the
 * wake-up system call only when somebody sleeps. Futexes are 32-bit: a waiter sleeps on the
 * low half of the 64-bit counter, which changes with every increment. */
typedef struct {
  _Atomic uint64_t arrive;
  _Atomic uint32_t sleepers; /* peers blocked in the kernel on one of this block's flags */
  char pad[52];
  tiny_t tiny[2] __attribute__((aligned(64))); /* alternating calls */
  loc_t desc[2][2]; /* [slot][0 = input, 1 = result] */
  int64_t pid;      /* for cross-memory attach (process_vm_readv) */
  uint64_t va_send, va_recv; /* this rank's buffers in its own address space */
} ctrl_t;

struct ddp__shm {
  const ddp__xport_t *xp; /* owner of `seg` */
  ddp__xhandle_t seg;     /* the node-shared segment */
  int n, me;        /* local size, local rank */
  ctrl_t **ctrl;    /* n entries */
  char **stage;     /* n entries: staging area (2 halves) */
  uint64_t epoch;
  uint64_t tiny_seq;
  unsigned flip;    /* which half the next staged use takes */
  double spin_s;    /* busy-wait this long before sleeping on the flag */
  double spin_idle_s; /* ... while a caller waits for the collective with nothing else to do */
  int cma_ok;       /* every rank may process_vm_readv every other (same answer everywhere) */
  const char **src; /* n entries, per-call scratch */
  char **res;
  const char **in;  /* reduce inputs in rank order */
};

void ddp__shm_free(ddp__coll_t *cs) {
  ddp__shm_t *s = cs->shm;
  if (!s) return;
  if (s->xp && s->seg.live) s->xp->seg_free(&s->seg);
  free(s->ctrl);
  free(s->stage);
  free(s->src);
  free(s->res);
  free(s->in);
  free(s);
  cs->shm = NULL;
}

static ddp_status_t shm_get(ddp__ctx_t *x, ddp__shm_t **out) {
  ddp__coll_t *cs = x->cs;
  if (cs->shm) {
    *out = cs->shm;
    return DDP_OK;
  }
  ddp__comm_t *c = x->c;
  ddp__shm_t *s = calloc(1, sizeof *s);
  size_t n = (size_t)c->local_size;
  if (s) {
    s->ctrl = calloc(n, sizeof *s->ctrl);
    s->stage = calloc(n, sizeof *s->stage);
    s->src = calloc(n, sizeof *s->src);
    s->res = calloc(n, sizeof *s->res);
    s->in = calloc(n, sizeof *s->in);
  }
  cs->shm = s;
  if (!s || !s->ctrl || !s->stage || !s->src || !s->res || !s->in) {
    ddp__shm_free(cs);
    return ddp__error(DDP_ENOMEM, "shm: out of memory");
  }
  s->n = c->local_size;
  s->me = c->local_rank;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int fits = cpus > 0 && cs->host_ranks <= cpus;
  s->spin_s = fits ? DDP__SHM_SPIN_S : DDP__SHM_SPIN_OVERSUB_S;
  s->spin_idle_s = fits ? DDP__SHM_SPIN_IDLE_S : DDP__SHM_SPIN_OVERSUB_S;
  if (!x->xp->seg_alloc || !x->xp->barrier || !x->xp->agree_min) {
    ddp__shm_free(cs);
    return ddp__error(DDP_EINTERNAL, "shm: transport %s has no node-shared memory", x->xp->name);
  }
  ddp__ctx_t xn = *x; /* the node group */
  xn.grp = &cs->g_node;
  xn.rank = c->local_rank;
  xn.size = c->local_size;
  xn.world_of = NULL;
  void **bases = calloc(n, sizeof *bases);
  if (!bases) {
    ddp__shm_free(cs);
    return ddp__error(DDP_ENOMEM, "shm: out of memory");
  }
  /* +64: segments start wherever the transport puts them; every process aligns the same way
   * (the offset within a page is the same in every mapping). */
  ddp_status_t st = x->xp->seg_alloc(&xn, CTRL_BYTES + 2 * HALF_BYTES + 64, &s->seg, bases);
  if (st == DDP_OK) {
    s->xp = x->xp;
    memset(ddp__align64(bases[s->me]), 0, CTRL_BYTES);
    for (int q = 0; q < s->n; q++) {
      s->ctrl[q] = ddp__align64(bases[q]);
      s->stage[q] = (char *)s->ctrl[q] + CTRL_BYTES;
    }
  }
  free(bases);
  /* Every control block is zeroed before anyone's first barrier. */
  if (st == DDP_OK) st = x->xp->barrier(&xn);
  if (st != DDP_OK) {
    ddp__shm_free(cs);
    return st;
  }
  /* Cross-memory attach: can each rank read its peers' private memory (ptrace policy)?
   * Every rank tries every peer, and the node agrees on the answer. */
  s->ctrl[s->me]->pid = (int64_t)getpid();
  s->ctrl[s->me]->va_send = (uint64_t)(uintptr_t)&s->ctrl[s->me]->pid;
  st = x->xp->barrier(&xn);
  int ok = st == DDP_OK;
  for (int q = 0; q < s->n && ok; q++) {
    if (q == s->me) continue;
    int64_t v = 0;
    struct iovec l = {&v, sizeof v}, r = {(void *)(uintptr_t)s->ctrl[q]->va_send, sizeof v};
    ok = process_vm_readv((pid_t)s->ctrl[q]->pid, &l, 1, &r, 1, 0) == (ssize_t)sizeof v &&
         v == s->ctrl[q]->pid;
  }
  int all = ok;
  st = x->xp->agree_min(&xn, &all);
  if (st != DDP_OK) {
    ddp__shm_free(cs);
    return st;
  }
  s->cma_ok = all;
  DDP_LOG(c, DDP_LOG_INFO, "shm allreduce: %d local ranks, cross-memory attach %s", s->n,
          all ? "usable" : "not permitted (staging copies instead)");
  *out = s;
  return DDP_OK;
}

/* Writes `bytes` from `local` into local rank q's memory at its address `remote`. */
static ddp_status_t cma_write(ddp__shm_t *s, int q, uint64_t remote, const void *local,
                              size_t bytes) {
  const char *src = local;
  while (bytes > 0) {
    size_t n = bytes < ((size_t)1 << 30) ? bytes : ((size_t)1 << 30);
    struct iovec l = {(void *)src, n}, r = {(void *)(uintptr_t)remote, n};
    ssize_t put = process_vm_writev((pid_t)s->ctrl[q]->pid, &l, 1, &r, 1, 0);
    if (put <= 0)
      return ddp__error(DDP_EIO, "shm: process_vm_writev of %zu bytes to local rank %d failed: %s",
                        n, q, strerror(errno));
    src += put;
    remote += (uint64_t)put;
    bytes -= (size_t)put;
  }
  return DDP_OK;
}

/* Reads `bytes` of local rank q's memory at its address `remote` into `local`. */
static ddp_status_t cma_read(ddp__shm_t *s, int q, uint64_t remote, void *local, size_t bytes) {
  char *dst = local;
  while (bytes > 0) {
    size_t n = bytes < ((size_t)1 << 30) ? bytes : ((size_t)1 << 30);
    struct iovec l = {dst, n}, r = {(void *)(uintptr_t)remote, n};
    ssize_t got = process_vm_readv((pid_t)s->ctrl[q]->pid, &l, 1, &r, 1, 0);
    if (got <= 0)
      return ddp__error(DDP_EIO, "shm: process_vm_readv of %zu bytes from local rank %d failed: %s",
                        n, q, strerror(errno));
    dst += got;
    remote += (uint64_t)got;
    bytes -= (size_t)got;
  }
  return DDP_OK;
}

/* A span of this rank's reduction work on the timeline (DDP_TIMELINE), with its bytes. */
static void span(ddp__ctx_t *x, char ph, const char *name, size_t bytes) {
  if (!x->c->timeline) return;
  char args[48];
  snprintf(args, sizeof args, "{\"bytes\":%zu}", bytes);
  ddp__timeline_event(x->c->timeline, ph, name, "shm", ph == 'B' ? args : NULL);
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* The futex word of a 64-bit flag: its low half, which changes with every increment. */
static uint32_t *low32(_Atomic uint64_t *flag) {
  return (uint32_t *)(void *)flag + (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__);
}

/* Shared (not process-private) futex: the flags live in a window every local rank maps. */
static void futex_sleep(_Atomic uint64_t *flag, uint32_t seen, double max_s) {
  struct timespec ts = {(time_t)max_s, (long)((max_s - (double)(time_t)max_s) * 1e9)};
  syscall(SYS_futex, low32(flag), FUTEX_WAIT, seen, &ts, NULL, 0);
}

/* Publishes *flag = v (the owner's flag in its own block) and wakes the peers sleeping on it.
 * Sequentially consistent store then load, against the sleeper's increment then load: either
 * the sleeper sees v and does not sleep, or we see it counted and wake it (a wake that comes
 * before its futex call makes that call return at once: the value differs). */
static void flag_post(ctrl_t *mine, _Atomic uint64_t *flag, uint64_t v) {
  atomic_store(flag, v);
  if (atomic_load(&mine->sleepers) != 0)
    syscall(SYS_futex, low32(flag), FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

/* Waits until *flag >= target, where `owner` is the peer's control block holding the flag.
 * Spins first (the peer is usually a few hundred nanoseconds away on another core; how long:
 * see DDP__SHM_SPIN_S), then sleeps on the flag in the kernel until the peer posts it. The
 * sleep wakes up every DDP__SHM_WATCH_S to run the watchdog (the DDP_TIMEOUT_S deadline,
 * answering the stall inspector's probes). */
static ddp_status_t wait_flag(ddp__ctx_t *x, ctrl_t *owner, _Atomic uint64_t *flag,
                              uint64_t target) {
  if (atomic_load_explicit(flag, memory_order_acquire) >= target) return DDP_OK;
  const ddp__shm_t *s = x->cs->shm;
  const double spin_s = atomic_load_explicit(&x->cs->idle_waiters, memory_order_relaxed) > 0
                            ? s->spin_idle_s : s->spin_s;
  double t0 = ddp__now(), last = t0;
  for (unsigned spins = 1;; spins++) {
    if (atomic_load_explicit(flag, memory_order_acquire) >= target) return DDP_OK;
    if (spins & 63) {
      cpu_relax();
      continue;
    }
    if (ddp__now() - t0 > spin_s) break;
  }
  ddp__timeline_t *tl = x->c->timeline;
  if (tl) ddp__timeline_event(tl, 'B', "wait peer", "shm", NULL);
  ddp_status_t st = DDP_OK;
  for (;;) {
    atomic_fetch_add(&owner->sleepers, 1);
    uint64_t v = atomic_load(flag);
    if (v < target) futex_sleep(flag, (uint32_t)v, DDP__SHM_WATCH_S); /* returns at once if changed */
    atomic_fetch_sub(&owner->sleepers, 1);
    if (atomic_load_explicit(flag, memory_order_acquire) >= target) break;
    double now = ddp__now();
    if (now - last >= DDP__SHM_WATCH_S) {
      last = now;
      if ((st = ddp__deadline_check(x->c, t0, &x->desc)) != DDP_OK) break;
    }
  }
  if (tl) ddp__timeline_event(tl, 'E', "wait peer", "shm", NULL);
  return st;
}

static ddp_status_t barrier(ddp__ctx_t *x, ddp__shm_t *s) {
  uint64_t e = ++s->epoch;
  flag_post(s->ctrl[s->me], &s->ctrl[s->me]->arrive, e);
  for (int q = 0; q < s->n; q++)
    if (q != s->me) DDP_TRY(wait_flag(x, s->ctrl[q], &s->ctrl[q]->arrive, e));
  return DDP_OK;
}

/* Where `p` (bytes long) lives: a pool window or staging. */
static loc_t locate(ddp__coll_t *cs, const void *p, size_t bytes) {
  loc_t l = {LOC_STAGE, 0};
  uint64_t id = 0;
  size_t off = 0;
  if (cs->pool && ddp__pool_find(cs, p, bytes, &id, &off)) l.id = id, l.off = off;
  return l;
}

/* Resolves rank q's published location into this process's address space (NULL: staging). */
static ddp_status_t resolve(ddp__coll_t *cs, int q, loc_t l, char **out) {
  *out = NULL;
  if (l.id == LOC_STAGE) return DDP_OK;
  ddp__pool_win_t *w = ddp__pool_by_id(cs, l.id);
  if (!w)
    return ddp__error(DDP_EINTERNAL, "shm: local rank %d uses pool window %llu, unknown here "
                      "(ddp_alloc/ddp_free calls differ between the node's ranks?)", q,
                      (unsigned long long)l.id);
  *out = w->peer_base[q] + l.off;
  return DDP_OK;
}

/* dst = in[0] op in[1] op ... in[n-1] (dst may be one of the inputs only if it is in[0]). */
static void reduce_n(void *dst, const char *const *in, int n, size_t off, size_t count,
                     ddp_dtype_t dtype, ddp_op_t op) {
  if (count == 0) return;
  size_t es = ddp_dtype_size(dtype), b = off * es;
  if (n == 1) {
    ddp__copy_host(dst, in[0] + b, count * es);
    return;
  }
  ddp__reduce3_host(dst, in[0] + b, in[1] + b, count, dtype, op);
  for (int q = 2; q < n; q++) ddp__reduce_host(dst, in[q] + b, count, dtype, op);
}

/* This rank's slice [off, off + count) of the reduction into dst. When dst is this rank's own
 * input there (in[me] + off), the other inputs are added to it in place; otherwise all n
 * inputs are combined into dst. */
static void reduce_slice(void *dst, const char *const *in, int n, int me, size_t off,
                         size_t count, ddp_dtype_t dtype, ddp_op_t op) {
  size_t es = ddp_dtype_size(dtype);
  if ((const char *)dst == in[me] + off * es) {
    for (int q = 0; q < n; q++)
      if (q != me) ddp__reduce_host(dst, in[q] + off * es, count, dtype, op);
  } else {
    reduce_n(dst, in, n, off, count, dtype, op);
  }
}

/* Tiny: data and flag share a cache line; one line transfer per peer. The two slots alternate:
 * slot k is rewritten two calls later, after every peer has tagged the call in between, so
 * none of them still reads it. */
static ddp_status_t shm_tiny(ddp__ctx_t *x, ddp__shm_t *s, const ddp__ar_t *a) {
  size_t bytes = a->count * ddp_dtype_size(a->dtype);
  uint64_t seq = ++s->tiny_seq;
  int slot = (int)(seq & 1);
  tiny_t *mine = &s->ctrl[s->me]->tiny[slot];
  memcpy(mine->data, a->send, bytes);
  flag_post(s->ctrl[s->me], &mine->tag, seq);
  for (int q = 0; q < s->n; q++) {
    tiny_t *t = &s->ctrl[q]->tiny[slot];
    if (q != s->me) DDP_TRY(wait_flag(x, s->ctrl[q], &t->tag, seq));
    s->in[q] = t->data;
  }
  reduce_n(a->recv, s->in, s->n, 0, a->count, a->dtype, a->op);
  return DDP_OK;
}

/* Small: everyone reduces everything, in rank order. */
static ddp_status_t shm_small(ddp__ctx_t *x, ddp__shm_t *s, const ddp__ar_t *a) {
  size_t bytes = a->count * ddp_dtype_size(a->dtype);
  size_t h = (s->flip++ & 1) * HALF_BYTES;
  memcpy(s->stage[s->me] + h, a->send, bytes);
  DDP_TRY(barrier(x, s));
  for (int q = 0; q < s->n; q++) s->in[q] = s->stage[q] + h;
  reduce_n(a->recv, s->in, s->n, 0, a->count, a->dtype, a->op);
  return DDP_OK;
}

/* Private buffers everywhere, cross-memory attach allowed: rank r pulls slice r of every
 * peer's input with process_vm_readv, piece by piece into a cache-sized scratch, reduces it
 * straight into its recv and pushes the piece, still in cache, into every peer's recv with
 * process_vm_writev (slice r of any buffer is touched by rank r only, so no barrier is needed
 * in between). One copy per byte moved, as with buffers in the pool. The descriptors (pid,
 * addresses) were published by the caller's barrier. */
static ddp_status_t shm_cma(ddp__ctx_t *x, ddp__shm_t *s, const ddp__ar_t *a) {
  int me = s->me, n = s->n;
  size_t es = ddp_dtype_size(a->dtype);
  ddp__parts_t pt;
  DDP_TRY(ddp__parts_init(&pt, n, "shm"));
  size_t *o = pt.offs, *l = pt.lens;
  ddp__split(a->count, n, o, l);
  size_t piece = CMA_PIECE_BYTES / es;
  void *tmp = NULL;
  ddp_status_t st = x->xp->scratch(x, 0, piece * es, &tmp);
  char *mine = (char *)a->recv + o[me] * es;
  const char *myin = (const char *)a->send + o[me] * es;
  span(x, 'B', "cma reduce+push slice", l[me] * es);
  for (size_t off = 0; off < l[me] && st == DDP_OK; off += piece) {
    size_t m = l[me] - off < piece ? l[me] - off : piece;
    int first = a->send != a->recv; /* out of place: the first peer combines with send */
    for (int q = 0; q < n && st == DDP_OK; q++) {
      if (q == me) continue;
      st = cma_read(s, q, s->ctrl[q]->va_send + (o[me] + off) * es, tmp, m * es);
      if (st != DDP_OK) break;
      if (first) ddp__reduce3_host(mine + off * es, myin + off * es, tmp, m, a->dtype, a->op);
      else ddp__reduce_host(mine + off * es, tmp, m, a->dtype, a->op);
      first = 0;
    }
    for (int q = 0; q < n && st == DDP_OK; q++)
      if (q != me)
        st = cma_write(s, q, s->ctrl[q]->va_recv + (o[me] + off) * es, mine + off * es, m * es);
  }
  span(x, 'E', "cma reduce+push slice", l[me] * es);
  /* A rank whose transfer failed still joins the barrier, so no peer waits for it. */
  ddp_status_t bst = barrier(x, s); /* nobody leaves while a peer still uses its memory */
  if (st == DDP_OK) st = bst;
  ddp__parts_free(&pt);
  return st;
}

/* Copies the slices other ranks will read (all but `me`) of a staged chunk. */
static void copy_in_others(char *stage, const char *src, const size_t *o, const size_t *l, int me,
                           int n, size_t es) {
  size_t head = o[me] * es, tail_off = (o[me] + l[me]) * es, total = (o[n - 1] + l[n - 1]) * es;
  if (head) memcpy(stage, src, head);
  if (total > tail_off) memcpy(stage + tail_off, src + tail_off, total - tail_off);
}

/* Large: chunked reduce-scatter + allgather through the published locations. A staged input
 * only copies the slices the peers read; this rank reads its own slice from the user buffer. */
static ddp_status_t shm_large(ddp__ctx_t *x, ddp__shm_t *s, const ddp__ar_t *a) {
  ddp__coll_t *cs = x->cs;
  size_t es = ddp_dtype_size(a->dtype), bytes = a->count * es;
  int me = s->me, n = s->n;
  ctrl_t *my = s->ctrl[me];
  loc_t lin = locate(cs, a->send, bytes), lres = locate(cs, a->recv, bytes);
  if (a->send == a->recv && lin.id == LOC_STAGE) lres.id = LOC_STAGE; /* staged in place */
  my->desc[0][0] = lin;
  my->desc[0][1] = lres;
  size_t chunk = HALF_BYTES / es;
  ddp__parts_t pt;
  DDP_TRY(ddp__parts_init(&pt, n, "shm"));
  size_t *o = pt.offs, *l = pt.lens;
  my->va_send = (uint64_t)(uintptr_t)a->send;
  my->va_recv = (uint64_t)(uintptr_t)a->recv;
  /* Chunk 0's copy-in goes before the barrier that publishes the descriptors (unless cross-
   * memory attach may make it unnecessary: that is only known once all are published). */
  size_t m0 = a->count < chunk ? a->count : chunk;
  ddp__split(m0, n, o, l);
  if (lin.id == LOC_STAGE && !s->cma_ok)
    copy_in_others(s->stage[me] + (s->flip & 1) * HALF_BYTES, a->send, o, l, me, n, es);
  ddp_status_t st = barrier(x, s);
  /* Peers' bases (NULL = their staging half). */
  int any_pool = 0, any_staged = 0;
  for (int q = 0; q < n && st == DDP_OK; q++) {
    char *p = NULL;
    st = resolve(cs, q, s->ctrl[q]->desc[0][0], &p);
    s->src[q] = p;
    if (st == DDP_OK) st = resolve(cs, q, s->ctrl[q]->desc[0][1], &s->res[q]);
    any_pool |= s->src[q] != NULL || s->res[q] != NULL;
    any_staged |= s->src[q] == NULL;
  }
  /* Every rank sees the same descriptors, so every rank takes the same branch (and the same
   * number of barriers). */
  if (st == DDP_OK && s->cma_ok) {
    if (!any_pool) {
      ddp__parts_free(&pt);
      return shm_cma(x, s, a);
    }
    if (any_staged) { /* the copy-in skipped above, and a barrier after it */
      if (lin.id == LOC_STAGE)
        copy_in_others(s->stage[me] + (s->flip & 1) * HALF_BYTES, a->send, o, l, me, n, es);
      st = barrier(x, s);
    }
  }
  /* Everything in the pool: no staging limit, one pass (fewer barriers: each one waits for
   * the slowest rank, which on a shared machine may just have been preempted). Every rank
   * sees the same descriptors, so all decide alike. */
  int all_pool = 1;
  for (int q = 0; q < n; q++) all_pool &= s->src[q] != NULL && s->res[q] != NULL;
  if (all_pool && st == DDP_OK) {
    /* Push: rank r reduces slice r piece by piece into its own result and copies each piece,
     * still in cache, into every peer's result. Nobody else reads or writes slice r of any
     * buffer meanwhile (peers read their own slices), so no barrier is needed between the
     * reduction and the copies: only the final one. */
    ddp__split(a->count, n, o, l);
    size_t piece = PUSH_PIECE_BYTES / es;
    span(x, 'B', "reduce+push slice", l[me] * es);
    for (size_t off = 0; off < l[me]; off += piece) {
      size_t m = l[me] - off < piece ? l[me] - off : piece;
      size_t at = o[me] + off;
      char *dst = s->res[me] + at * es;
      reduce_slice(dst, (const char *const *)s->src, n, me, at, m, a->dtype, a->op);
      for (int q = 0; q < n; q++)
        if (q != me) ddp__copy_host(s->res[q] + at * es, dst, m * es);
    }
    span(x, 'E', "reduce+push slice", l[me] * es);
    ddp__parts_free(&pt);
    return barrier(x, s); /* nobody leaves while a peer still reads or writes its memory */
  }
  /* Staged, in HALF_BYTES chunks (chunk 0's copy-in, if any rank staged, was done above). */
  for (size_t base = 0; base < a->count && st == DDP_OK; base += chunk) {
    size_t m = a->count - base < chunk ? a->count - base : chunk;
    size_t h = (s->flip++ & 1) * HALF_BYTES;
    ddp__split(m, n, o, l);
    if (base > 0) {
      if (!s->src[me])
        copy_in_others(s->stage[me] + h, (const char *)a->send + base * es, o, l, me, n, es);
      st = barrier(x, s);
      if (st != DDP_OK) break;
    }
    /* Reduce slice `me` of the chunk from every input. */
    for (int q = 0; q < n; q++)
      s->in[q] = s->src[q] ? s->src[q] + base * es : s->stage[q] + h;
    if (!s->src[me]) s->in[me] = (const char *)a->send + base * es;
    /* The slice is reduced straight into recv (the pool location when recv is in the pool);
     * a staged result is then also copied, cache-hot, to staging for the peers. */
    char *dst = s->res[me] ? s->res[me] + (base + o[me]) * es
                           : (char *)a->recv + (base + o[me]) * es;
    span(x, 'B', "reduce slice", l[me] * es);
    reduce_slice(dst, s->in, n, me, o[me], l[me], a->dtype, a->op);
    if (!s->res[me]) ddp__copy_host(s->stage[me] + h + o[me] * es, dst, l[me] * es);
    span(x, 'E', "reduce slice", l[me] * es);
    st = barrier(x, s);
    if (st != DDP_OK) break;
    /* Gather the other slices into recv. */
    for (int q = 0; q < n; q++) {
      if (q == me) continue;
      const char *from = s->res[q] ? s->res[q] + (base + o[q]) * es : s->stage[q] + h + o[q] * es;
      char *to = (char *)a->recv + (base + o[q]) * es;
      if (from != to) ddp__copy_host(to, from, l[q] * es);
    }
  }
  ddp__parts_free(&pt);
  if (st == DDP_OK) st = barrier(x, s); /* nobody leaves while a peer still reads its memory */
  return st;
}

/* ---- phases for hier (count at most ddp__shm_chunk elements) -------------------------- */
size_t ddp__shm_chunk(ddp_dtype_t dtype) { return HALF_BYTES / ddp_dtype_size(dtype); }

ddp_status_t ddp__shm_reduce_scatter(ddp__ctx_t *x, const void *send, void *recv, size_t count,
                                     ddp_dtype_t dtype, ddp_op_t op) {
  ddp__coll_t *cs = x->cs;
  ddp__shm_t *s = NULL;
  DDP_TRY(shm_get(x, &s));
  int me = s->me, n = s->n;
  size_t es = ddp_dtype_size(dtype), bytes = count * es;
  if (bytes > HALF_BYTES)
    return ddp__error(DDP_EINTERNAL, "shm reduce-scatter of %zu bytes exceeds the %zu-byte chunk",
                      bytes, HALF_BYTES);
  ddp__parts_t pt;
  DDP_TRY(ddp__parts_init(&pt, n, "shm"));
  size_t *o = pt.offs, *l = pt.lens;
  ddp__split(count, n, o, l);
  size_t h = (s->flip++ & 1) * HALF_BYTES;
  loc_t lin = locate(cs, send, bytes);
  s->ctrl[me]->desc[0][0] = lin;
  if (lin.id == LOC_STAGE) copy_in_others(s->stage[me] + h, send, o, l, me, n, es);
  ddp_status_t st = barrier(x, s);
  for (int q = 0; q < n && st == DDP_OK; q++) {
    char *p = NULL;
    st = resolve(cs, q, s->ctrl[q]->desc[0][0], &p);
    s->in[q] = p ? p : s->stage[q] + h;
  }
  if (lin.id == LOC_STAGE) s->in[me] = send;
  if (st == DDP_OK) {
    reduce_slice((char *)recv + o[me] * es, s->in, n, me, o[me], l[me], dtype, op);
  }
  ddp__parts_free(&pt);
  return st;
}

ddp_status_t ddp__shm_allgather(ddp__ctx_t *x, void *recv, size_t count, ddp_dtype_t dtype) {
  ddp__coll_t *cs = x->cs;
  ddp__shm_t *s = NULL;
  DDP_TRY(shm_get(x, &s));
  int me = s->me, n = s->n;
  size_t es = ddp_dtype_size(dtype), bytes = count * es;
  ddp__parts_t pt;
  DDP_TRY(ddp__parts_init(&pt, n, "shm"));
  size_t *o = pt.offs, *l = pt.lens;
  ddp__split(count, n, o, l);
  size_t h = (s->flip++ & 1) * HALF_BYTES;
  loc_t lres = locate(cs, recv, bytes);
  s->ctrl[me]->desc[1][1] = lres;
  if (lres.id == LOC_STAGE)
    memcpy(s->stage[me] + h + o[me] * es, (char *)recv + o[me] * es, l[me] * es);
  ddp_status_t st = barrier(x, s);
  for (int q = 0; q < n && st == DDP_OK; q++) {
    if (q == me) continue;
    char *p = NULL;
    st = resolve(cs, q, s->ctrl[q]->desc[1][1], &p);
    const char *from = p ? p + o[q] * es : s->stage[q] + h + o[q] * es;
    if (st == DDP_OK) ddp__copy_host((char *)recv + o[q] * es, from, l[q] * es);
  }
  ddp__parts_free(&pt);
  if (st == DDP_OK) st = barrier(x, s);
  return st;
}

static const char *shm_supports(const ddp__ctx_t *x, const ddp__ar_t *a) {
  (void)a;
  if (x->mem != DDP_MEM_HOST) return "needs host memory";
  if (x->cs->shm_disabled) return "node-shared memory windows do not work here";
  if (x->c->nodes != 1) return "needs every rank on one node (use hier across nodes)";
  return NULL;
}

static ddp_status_t shm_run(ddp__ctx_t *x, const ddp__ar_t *a) {
  if (x->size == 1) {
    ddp__copy_host(a->recv, a->send, a->count * ddp_dtype_size(a->dtype));
    return DDP_OK;
  }
  ddp__shm_t *s = NULL;
  DDP_TRY(shm_get(x, &s));
  size_t bytes = a->count * ddp_dtype_size(a->dtype);
  if (bytes <= TINY_BYTES) return shm_tiny(x, s, a);
  if (bytes <= SMALL_BYTES) return shm_small(x, s, a);
  return shm_large(x, s, a);
}

const ddp__algo_t ddp__algo_shm = {"shm", DDP_ALGO_SHM, shm_supports, shm_run};
