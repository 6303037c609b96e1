/* What the device transports and runners share below the runners: pinned and device buffers
 * that grow, and host waits on device events under the DDP_TIMEOUT_S watchdog. A leaf: it calls
 * the device and core layers only (the runners in devcoll/ and the CUDA-aware transport sit
 * on it). */
#include <sched.h>
#include <time.h>

#include "coll_device_internal.h"

ddp_status_t ddp__devcoll_spin(ddp__devcoll_t *dc, const char *what, const char *algo,
                               ddp_status_t (*test)(void *arg, int *done), void *arg) {
  int done = 0;
  DDP_TRY(test(arg, &done));
  if (done) return DDP_OK;
  ddp__wait_desc_t desc = {dc->c->coll ? dc->c->coll->seq : 0, what, algo, 0, -1, NULL};
  double t0 = ddp__now();
  for (unsigned spins = 1;; spins++) {
    DDP_TRY(test(arg, &done));
    if (done) return DDP_OK;
    if ((spins & 63) == 0) DDP_TRY(ddp__deadline_check(dc->c, t0, &desc));
    if (spins < 256) {
      sched_yield();
    } else {
      struct timespec ts = {0, 20000}; /* 20 us: a copy or kernel, not a busy core */
      nanosleep(&ts, NULL);
    }
  }
}

typedef struct {
  ddp__device_t *d;
  ddp_event_t *ev;
} event_arg_t;

static ddp_status_t event_done(void *arg, int *done) {
  event_arg_t *a = arg;
  return a->d->impl->event_query(a->d, a->ev, done);
}

ddp_status_t ddp__devcoll_wait(ddp__devcoll_t *dc, ddp_event_t *ev, const char *what) {
  event_arg_t a = {dc->d, ev};
  return ddp__devcoll_spin(dc, what, "device-event", event_done, &a);
}

ddp_status_t ddp__devcoll_pinned(ddp__devcoll_t *dc, void **buf, size_t *have, size_t want) {
  if (*buf && *have >= want) return DDP_OK;
  ddp__device_t *d = dc->d;
  if (*buf) {
    DDP_TRY(d->impl->host_free(d, *buf));
    *buf = NULL;
    *have = 0;
  }
  DDP_TRY(d->impl->host_alloc(d, want ? want : 64, buf));
  *have = want;
  return DDP_OK;
}

ddp_status_t ddp__devcoll_devbuf(ddp__devcoll_t *dc, void **buf, size_t *have, size_t want) {
  if (*buf && *have >= want) return DDP_OK;
  ddp__device_t *d = dc->d;
  if (*buf) {
    DDP_TRY(d->impl->dev_free(d, *buf));
    *buf = NULL;
    *have = 0;
  }
  DDP_TRY(d->impl->dev_alloc(d, want ? want : 64, buf));
  *have = want;
  return DDP_OK;
}
