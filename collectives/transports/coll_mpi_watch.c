/* The watch over blocking MPI_Allreduce calls of the host transport (coll_mpi_coll.c): a
 * thread per communicator that keeps the DDP_TIMEOUT_S guarantee while the caller's thread
 * sits inside the MPI library's own blocking call.
 *
 * While the executing thread sits in MPI_Allreduce it publishes a token (unique per call) and
 * a copy of its wait description, with release stores only (no locked instruction, no system
 * call: the overhead must stay within a few percent of an 8-byte MPI_Allreduce). The watch
 * thread wakes every WATCH_PERIOD_S; once the same token has been in flight for
 * WATCH_ANSWER_AFTER_S it takes a consistent snapshot of the description (seqlock: re-read the
 * token after the fields) and calls ddp__deadline_check with it, which answers the stall
 * inspector and, past DDP_TIMEOUT_S, reports and ends the job (abort mode; return mode never
 * blocks). The deadline fires up to WATCH_PERIOD_S late. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "xport_mpi.h"

#define WATCH_PERIOD_S 0.05
#define WATCH_ANSWER_AFTER_S 0.25 /* as the guard's own waits: answer probes after this */


/* 1 and a copy of the description if `token` is still the call in flight. */
static int watch_snapshot(ddp__mpi_watch_t *w, uint64_t token, ddp__wait_desc_t *d) {
  /* Acquire loads: the re-read of the token cannot move before them, and a field already
   * written by the next call (release store, after cur went back to 0) makes that re-read
   * see the token gone. */
  d->seq = atomic_load_explicit(&w->d_seq, memory_order_acquire);
  d->coll = atomic_load_explicit(&w->d_coll, memory_order_acquire);
  d->algo = atomic_load_explicit(&w->d_algo, memory_order_acquire);
  d->bytes = atomic_load_explicit(&w->d_bytes, memory_order_acquire);
  d->tag = atomic_load_explicit(&w->d_tag, memory_order_acquire);
  d->peers = NULL;
  return atomic_load_explicit(&w->cur, memory_order_acquire) == token;
}

static void *watch_main(void *arg) {
  ddp__mpi_watch_t *w = arg;
  uint64_t seen = 0;
  double t_seen = 0;
  pthread_mutex_lock(&w->mu);
  while (!w->stop) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += (long)(WATCH_PERIOD_S * 1e9);
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&w->cv, &w->mu, &ts);
    if (w->stop) break;
    uint64_t v = atomic_load_explicit(&w->cur, memory_order_acquire);
    double now = ddp__now();
    if (v == 0 || v != seen) { /* idle, or a call not seen before */
      seen = v;
      t_seen = now;
      continue;
    }
    ddp__wait_desc_t d;
    if (now - t_seen < WATCH_ANSWER_AFTER_S || !watch_snapshot(w, v, &d)) continue;
    pthread_mutex_unlock(&w->mu);
    (void)ddp__deadline_check(w->c, t_seen, &d); /* past the deadline: does not return */
    pthread_mutex_lock(&w->mu);
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

ddp__mpi_watch_t *ddp__mpi_watch_get(ddp__coll_t *cs) {
  if (cs->mpi_watch) return cs->mpi_watch;
  if (cs->mpi_watch_failed) return NULL;
  ddp__mpi_watch_t *w = calloc(1, sizeof *w);
  pthread_condattr_t ca;
  int ok = w != NULL && pthread_condattr_init(&ca) == 0;
  if (ok) {
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    w->c = cs->c;
    atomic_init(&w->cur, 0);
    if (pthread_create(&w->thread, NULL, watch_main, w) != 0) {
      pthread_mutex_destroy(&w->mu);
      pthread_cond_destroy(&w->cv);
      ok = 0;
    }
  }
  if (!ok) {
    free(w);
    cs->mpi_watch_failed = 1;
    DDP_LOG(cs->c, DDP_LOG_INFO, "mpi algorithm: no watch thread, MPI_Iallreduce for every call");
    return NULL;
  }
  cs->mpi_watch = w;
  return w;
}

void ddp__coll_mpi_watch_stop(ddp__coll_t *cs) {
  ddp__mpi_watch_t *w = cs->mpi_watch;
  if (!w) return;
  pthread_mutex_lock(&w->mu);
  w->stop = 1;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
  pthread_join(w->thread, NULL);
  pthread_mutex_destroy(&w->mu);
  pthread_cond_destroy(&w->cv);
  free(w);
  cs->mpi_watch = NULL;
}
