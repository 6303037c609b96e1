/* Watchdog deadlines on every library wait and collective fingerprints (DDP_CHECK=1).
 * A first version: deadlines with a report; the robustness work extends it. */
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "ddp_internal.h"

ddp_status_t ddp__guard_comm_init(ddp__comm_t *c) {
  c->guard = NULL;
  return DDP_OK;
}

void ddp__guard_comm_fini(ddp__comm_t *c) { c->guard = NULL; }

static ddp_status_t expire(ddp__comm_t *c, const ddp__wait_desc_t *d, const char *pending) {
  char msg[768];
  snprintf(msg, sizeof msg,
           "timeout after %.1f s (DDP_TIMEOUT_S) waiting for %s #%llu (algo %s, %zu bytes, tag %d); "
           "peers not answered: %s",
           c->cfg.timeout_s, d && d->coll ? d->coll : "?", d ? (unsigned long long)d->seq : 0ULL,
           d && d->algo ? d->algo : "?", d ? d->bytes : (size_t)0, d ? d->tag : -1,
           pending && pending[0] ? pending : "unknown");
  ddp__log(&c->log, DDP_LOG_WARN, "%s", msg);
  ddp__timeline_event(c->timeline, 'i', "watchdog timeout", "ddp", NULL);
  ddp__timeline_write(c->timeline, c->world, 0);
  if (!c->cfg.on_timeout_return) {
    fprintf(stderr, "%s mpiddp ABORT: %s\n", c->log.prefix, msg);
    fflush(stderr);
    MPI_Abort(c->world, 3);
  }
  return ddp__error(DDP_ETIMEDOUT, "%s", msg);
}

ddp_status_t ddp__wait_all(ddp__comm_t *c, int n, MPI_Request *reqs, const ddp__wait_desc_t *desc) {
  double t0 = ddp__now();
  unsigned spins = 0;
  for (;;) {
    int done = 0;
    int rc = MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return ddp__mpi_error(rc, "MPI_Testall");
    if (done) return DDP_OK;
    if ((++spins & 63) == 0) {
      if (ddp__now() - t0 > c->cfg.timeout_s) {
        char pending[256] = "";
        size_t o = 0;
        for (int i = 0; i < n && o + 16 < sizeof pending; i++) {
          int flag = 0;
          if (reqs[i] == MPI_REQUEST_NULL) continue;
          MPI_Request_get_status(reqs[i], &flag, MPI_STATUS_IGNORE);
          if (!flag && desc && desc->peers)
            o += (size_t)snprintf(pending + o, sizeof pending - o, "%s%d", o ? "," : "", desc->peers[i]);
        }
        return expire(c, desc, pending);
      }
      sched_yield(); /* ranks may outnumber cores: let the peer run */
    }
  }
}

ddp_status_t ddp__deadline_check(ddp__comm_t *c, double t_start, const ddp__wait_desc_t *desc) {
  if (ddp__now() - t_start <= c->cfg.timeout_s) return DDP_OK;
  return expire(c, desc, NULL);
}

ddp_status_t ddp__guard_check(ddp__comm_t *c, const ddp__coll_fp_t *fp) {
  (void)fp;
  if (!c->cfg.check) return DDP_OK;
  return ddp__error(DDP_ENOTSUP, "DDP_CHECK=1: fingerprints not implemented yet");
}
