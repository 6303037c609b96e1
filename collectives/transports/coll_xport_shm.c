/* The node-shared segment transport (coll_shm.h): the segment and control blocks, cross-memory
 * attach, flags and barriers, buffer locations. Barriers are flat counters in shared memory. A
 * rank waiting for a peer's counter spins briefly, then sleeps in the kernel on the counter
 * itself (a shared futex, woken by the peer that bumps it), bounded by the DDP_TIMEOUT_S
 * watchdog: a wait costs no CPU beyond its spin, so a progress thread waiting for a slow peer
 * does not take cycles from its own rank's backward pass when every core is busy. */
#include <errno.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "coll_shm.h"
#include "coll_state.h"

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

ddp_status_t ddp__shm_get(ddp__ctx_t *x, ddp__shm_t **out) {
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
  xn.grp = &cs->shape.g_node;
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
  ddp_status_t st = x->xp->seg_alloc(&xn, DDP__SHM_CTRL_BYTES + 2 * DDP__SHM_HALF_BYTES + 64, &s->seg, bases);
  if (st == DDP_OK) {
    s->xp = x->xp;
    memset(ddp__align64(bases[s->me]), 0, DDP__SHM_CTRL_BYTES);
    for (int q = 0; q < s->n; q++) {
      s->ctrl[q] = ddp__align64(bases[q]);
      s->stage[q] = (char *)s->ctrl[q] + DDP__SHM_CTRL_BYTES;
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
ddp_status_t ddp__shm_cma_write(ddp__shm_t *s, int q, uint64_t remote, const void *local,
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
ddp_status_t ddp__shm_cma_read(ddp__shm_t *s, int q, uint64_t remote, void *local, size_t bytes) {
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
void ddp__shm_flag_post(ddp__shm_ctrl_t *mine, _Atomic uint64_t *flag, uint64_t v) {
  atomic_store(flag, v);
  if (atomic_load(&mine->sleepers) != 0)
    syscall(SYS_futex, low32(flag), FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

/* Waits until *flag >= target, where `owner` is the peer's control block holding the flag.
 * Spins first (the peer is usually a few hundred nanoseconds away on another core; how long:
 * see DDP__SHM_SPIN_S), then sleeps on the flag in the kernel until the peer posts it. The
 * sleep wakes up every DDP__SHM_WATCH_S to run the watchdog (the DDP_TIMEOUT_S deadline,
 * answering the stall inspector's probes). */
ddp_status_t ddp__shm_wait_flag(ddp__ctx_t *x, ddp__shm_ctrl_t *owner, _Atomic uint64_t *flag,
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

ddp_status_t ddp__shm_barrier(ddp__ctx_t *x, ddp__shm_t *s) {
  uint64_t e = ++s->epoch;
  ddp__shm_flag_post(s->ctrl[s->me], &s->ctrl[s->me]->arrive, e);
  for (int q = 0; q < s->n; q++)
    if (q != s->me) DDP_TRY(ddp__shm_wait_flag(x, s->ctrl[q], &s->ctrl[q]->arrive, e));
  return DDP_OK;
}

/* Where `p` (bytes long) lives: a pool window or staging. */
ddp__shm_loc_t ddp__shm_locate(const ddp__ctx_t *x, const void *p, size_t bytes) {
  ddp__coll_t *cs = x->cs;
  ddp__shm_loc_t l = {DDP__SHM_LOC_STAGE, 0};
  uint64_t id = 0;
  size_t off = 0;
  if (cs->pool && ddp__pool_find(cs, p, bytes, &id, &off)) l.id = id, l.off = off;
  return l;
}

/* Resolves rank q's published location into this process's address space (NULL: staging). */
ddp_status_t ddp__shm_resolve(const ddp__ctx_t *x, int q, ddp__shm_loc_t l, char **out) {
  ddp__coll_t *cs = x->cs;
  *out = NULL;
  if (l.id == DDP__SHM_LOC_STAGE) return DDP_OK;
  ddp__pool_win_t *w = ddp__pool_by_id(cs, l.id);
  if (!w)
    return ddp__error(DDP_EINTERNAL, "shm: local rank %d uses pool window %llu, unknown here "
                      "(ddp_alloc/ddp_free calls differ between the node's ranks?)", q,
                      (unsigned long long)l.id);
  *out = w->peer_base[q] + l.off;
  return DDP_OK;
}
