/* Watchdog deadlines on every library wait and collective fingerprints (DDP_CHECK=1): a stall
 * ends with a report naming what was awaited and who had not answered, never a silent hang. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ddp_internal.h"

/* Up to this world size fingerprints travel point to point, so a rank that never reaches the
 * collective is named by the watchdog; above it one MPI_Iallgather (cheaper, but a stall there
 * can only say "unknown"). */
#define DDP__FP_P2P_MAX 64
#define DDP__FP_FIELDS 6
#define DDP__FP_TAG 0x6470 /* any tag: the fingerprint communicator carries nothing else */

/* Waits on MPI requests. MPI offers nothing to block on (its own waits busy-poll), and the
 * waiting rank's test calls are what moves its transfers (Open MPI's shared-memory transport
 * copies a message inside the receiver's progress call). Measured on a 2-vCPU VM: naps
 * between tests (nanosleep: 30-90 us more than asked there) made a 1 MB MPI_Iallreduce 3.4x
 * and a 64 MB one 1.15x slower, and each wake-up of a napping thread cost the compute thread
 * it preempted on the same core about 40 us (a 20 us nap loop slowed it by 67%); a thread
 * polling with sched_yield() cost that thread nothing measurable (it runs only when the core
 * is otherwise idle, or at a scheduler tick) while polling at full speed on an idle core. So
 * a wait tests for DDP__SPIN_S (a peer that arrives in step answers within microseconds),
 * then tests and yields the core until DDP__YIELD_S (longer than a 64 MB allreduce takes
 * here), and only a wait that long (a peer far behind) naps between tests: a sixteenth of the
 * time waited, within [DDP__NAP_MIN_S, DDP__NAP_MAX_S], so it stops burning an idle core and
 * oversleeps by a small fraction of its length. Oversubscribed machines spin less: the peer
 * may need this very core. */
#define DDP__SPIN_S 50e-6
#define DDP__SPIN_OVERSUB_S 5e-6
#define DDP__YIELD_S 50e-3
#define DDP__NAP_MIN_S 100e-6
#define DDP__NAP_MAX_S 1e-3

/* Stall inspector: when a wait expires without knowing which peers are missing (a wait on an
 * MPI collective request), the rank asks every other rank what it is doing. A rank that has
 * itself been waiting inside the library for more than DDP__ANSWER_AFTER_S answers with the
 * collective it waits in; ranks that do not answer within the grace period are busy outside
 * the library, stalled or dead. Up to DDP__INSPECT_MAX ranks (messages grow as P^2). */
#define DDP__ANSWER_AFTER_S 0.25
#define DDP__INSPECT_MAX 256
#define DDP__TAG_PROBE 1
#define DDP__TAG_REPLY 2

/* One probe or reply on the inspector's communicator (64 bytes, MPI_BYTE). */
typedef struct {
  int64_t nonce;   /* the prober's round; echoed in the reply */
  int64_t seq;     /* collective the sender waits in (-1: not waiting) */
  int64_t bytes;
  int64_t waited_ms;
  char coll[32];
} ddp__probe_msg_t;

struct ddp__guard {
  double spin_s;        /* DDP__SPIN_S, or DDP__SPIN_OVERSUB_S when ranks outnumber cores */
  MPI_Comm pcomm;       /* duplicate of world for the stall inspector's probes and replies */
  _Atomic int64_t nonce; /* inspector rounds started by this rank (any thread) */
  MPI_Comm fpcomm;      /* duplicate of world for fingerprints (DDP_CHECK=1 only) */
  pthread_mutex_t mu;   /* fingerprint exchanges are serialised: order = posting order */
  int broken;           /* an exchange timed out under DDP_ON_TIMEOUT=return */
  int nreq;             /* requests of the exchange in flight when it broke */
  int64_t *all;         /* size x DDP__FP_FIELDS received fingerprints */
  int64_t mine[DDP__FP_FIELDS];
  MPI_Request *reqs;    /* 2 x (size - 1) */
  int *peers;
};

ddp_status_t ddp__guard_comm_init(ddp__comm_t *c) {
  c->guard = NULL;
  /* DDP_CHECK must agree: a rank exchanging fingerprints with ranks that do not would hang.
   * So must DDP_SHM and DDP_HIER_PIPELINE: hier's ranks must all take the same path and cut
   * the vector into the same chunks; and DDP_ALLREDUCE_ALGO: ranks forced into different
   * algorithms exchange messages nobody matches. Every rank reaches this hook, so one small
   * allreduce (maxima of each value and of its negation) settles them. */
  enum { NV = 4 };
  static const char *const names[NV] = {"DDP_CHECK", "DDP_SHM", "DDP_HIER_PIPELINE",
                                        "DDP_ALLREDUCE_ALGO"};
  long long mine[NV] = {c->cfg.check ? 1 : 0, c->cfg.shm ? 1 : 0, (long long)c->cfg.hier_pipeline,
                        (long long)c->cfg.allreduce_algo};
  long long v[2 * NV], r[2 * NV];
  for (int i = 0; i < NV; i++) v[2 * i] = mine[i], v[2 * i + 1] = -mine[i];
  DDP_MPI(MPI_Allreduce(v, r, 2 * NV, MPI_LONG_LONG, MPI_MAX, c->world));
  for (int i = 0; i < NV; i++)
    if (r[2 * i] != -r[2 * i + 1]) {
      char val[32];
      if (i == NV - 1) snprintf(val, sizeof val, "%s", ddp_algo_name(c->cfg.allreduce_algo));
      else snprintf(val, sizeof val, "%lld", mine[i]);
      return ddp__error(DDP_ECONFIG, "%s differs across ranks (this rank has %s=%s): "
                                     "set it to the same value on every rank",
                        names[i], names[i], val);
    }
  struct ddp__guard *g = calloc(1, sizeof *g);
  if (!g) return ddp__error(DDP_ENOMEM, "guard: out of memory");
  g->fpcomm = MPI_COMM_NULL;
  g->pcomm = MPI_COMM_NULL;
  pthread_mutex_init(&g->mu, NULL);
  /* Ranks sharing this machine (virtual nodes may split one) against its cores. */
  int host_ranks = c->local_size;
  MPI_Comm host = MPI_COMM_NULL;
  if (MPI_Comm_split_type(c->world, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &host) ==
      MPI_SUCCESS) {
    MPI_Comm_size(host, &host_ranks);
    MPI_Comm_free(&host);
  }
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  g->spin_s = cpus > 0 && host_ranks <= cpus ? DDP__SPIN_S : DDP__SPIN_OVERSUB_S;
  int prc = c->size > 1 ? MPI_Comm_dup(c->world, &g->pcomm) : MPI_SUCCESS;
  if (prc != MPI_SUCCESS) {
    pthread_mutex_destroy(&g->mu);
    free(g);
    return ddp__mpi_error(prc, "MPI_Comm_dup (stall inspector)");
  }
  if (g->pcomm != MPI_COMM_NULL) MPI_Comm_set_errhandler(g->pcomm, MPI_ERRORS_RETURN);
  if (c->cfg.check) {
    size_t n = (size_t)c->size;
    g->all = calloc(n * DDP__FP_FIELDS, sizeof *g->all);
    g->reqs = calloc(2 * n, sizeof *g->reqs);
    g->peers = calloc(2 * n, sizeof *g->peers);
    int rc = (g->all && g->reqs && g->peers) ? MPI_Comm_dup(c->world, &g->fpcomm) : MPI_SUCCESS;
    if (!g->all || !g->reqs || !g->peers || rc != MPI_SUCCESS) {
      ddp_status_t st = rc != MPI_SUCCESS ? ddp__mpi_error(rc, "MPI_Comm_dup (fingerprints)")
                                          : ddp__error(DDP_ENOMEM, "guard: out of memory");
      free(g->all), free(g->reqs), free(g->peers);
      if (g->pcomm != MPI_COMM_NULL) MPI_Comm_free(&g->pcomm);
      pthread_mutex_destroy(&g->mu);
      free(g);
      return st;
    }
    MPI_Comm_set_errhandler(g->fpcomm, MPI_ERRORS_RETURN);
  }
  c->guard = g;
  return DDP_OK;
}

void ddp__guard_comm_fini(ddp__comm_t *c) {
  struct ddp__guard *g = c->guard;
  if (!g) return;
  if (g->broken && c->size <= DDP__FP_P2P_MAX) {
    /* Abandoned exchange: receives are cancelled; our 48-byte sends went eagerly, so their
     * requests are only released. (A pending MPI_Iallgather can be neither cancelled nor
     * freed: its request and buffers are left to MPI_Finalize / the aborting job.) */
    for (int i = 0; i < g->nreq; i++) {
      if (g->reqs[i] == MPI_REQUEST_NULL) continue;
      int flag = 0;
      MPI_Test(&g->reqs[i], &flag, MPI_STATUS_IGNORE);
      if (flag || g->reqs[i] == MPI_REQUEST_NULL) continue;
      MPI_Cancel(&g->reqs[i]);
      MPI_Request_free(&g->reqs[i]);
    }
  }
  if (g->fpcomm != MPI_COMM_NULL) MPI_Comm_free(&g->fpcomm);
  if (g->pcomm != MPI_COMM_NULL) MPI_Comm_free(&g->pcomm);
  if (g->broken && c->size > DDP__FP_P2P_MAX) {
    c->guard = NULL; /* MPI may still write into g->all: leave it rather than free it */
    return;
  }
  free(g->all);
  free(g->reqs);
  free(g->peers);
  pthread_mutex_destroy(&g->mu);
  free(g);
  c->guard = NULL;
}

/* Sorted, de-duplicated list "1,3" of the peers that had not answered. */
static void format_peers(char *buf, size_t cap, const int *peers, int n) {
  int *tmp = n > 0 ? malloc((size_t)n * sizeof *tmp) : NULL;
  buf[0] = '\0';
  if (!tmp) return;
  memcpy(tmp, peers, (size_t)n * sizeof *tmp);
  for (int i = 1; i < n; i++) /* insertion sort: n is a handful */
    for (int j = i; j > 0 && tmp[j - 1] > tmp[j]; j--) {
      int t = tmp[j];
      tmp[j] = tmp[j - 1];
      tmp[j - 1] = t;
    }
  size_t o = 0;
  for (int i = 0; i < n && o + 16 < cap; i++) {
    if (i > 0 && tmp[i] == tmp[i - 1]) continue;
    o += (size_t)snprintf(buf + o, cap - o, "%s%d", o ? "," : "", tmp[i]);
  }
  if (o + 16 >= cap && n > 0) snprintf(buf + o, cap - o, ",...");
  free(tmp);
}

/* ---- stall inspector ------------------------------------------------------------------- */
static void probe_fill(ddp__probe_msg_t *m, int64_t nonce, const ddp__wait_desc_t *d, double waited) {
  memset(m, 0, sizeof *m);
  m->nonce = nonce;
  m->seq = d ? (int64_t)d->seq : -1;
  m->bytes = d ? (int64_t)d->bytes : 0;
  m->waited_ms = (int64_t)(waited * 1e3);
  snprintf(m->coll, sizeof m->coll, "%s", d && d->coll ? d->coll : "?");
}

/* Answers every probe that has arrived with what this rank is waiting for. Called from long
 * waits only (matched probes: safe from several threads). */
static void answer_probes(ddp__comm_t *c, const ddp__wait_desc_t *d, double waited) {
  struct ddp__guard *g = c->guard;
  if (!g || g->pcomm == MPI_COMM_NULL) return;
  for (int k = 0; k < 64; k++) { /* bounded: at most one probe per peer and round */
    int flag = 0;
    MPI_Message msg;
    MPI_Status stt;
    if (MPI_Improbe(MPI_ANY_SOURCE, DDP__TAG_PROBE, g->pcomm, &flag, &msg, &stt) != MPI_SUCCESS ||
        !flag)
      return;
    ddp__probe_msg_t in, out;
    if (MPI_Mrecv(&in, (int)sizeof in, MPI_BYTE, &msg, MPI_STATUS_IGNORE) != MPI_SUCCESS) return;
    probe_fill(&out, in.nonce, d, waited);
    /* 64 bytes go eagerly: this send does not wait for the prober. */
    MPI_Send(&out, (int)sizeof out, MPI_BYTE, stt.MPI_SOURCE, DDP__TAG_REPLY, g->pcomm);
  }
}

/* Asks every other rank what it is doing and writes, into `out`, the ranks that are not
 * waiting in the same collective (the culprits) and, into `detail`, what each said. Takes at
 * most `grace` seconds. Returns the number of culprits, -1 if the inspector cannot run. */
static int inspect(ddp__comm_t *c, const ddp__wait_desc_t *d, double waited, double grace,
                   char *out, size_t outcap, char *detail, size_t detcap) {
  struct ddp__guard *g = c->guard;
  int n = c->size;
  if (!g || g->pcomm == MPI_COMM_NULL || n < 2 || n > DDP__INSPECT_MAX) return -1;
  ddp__probe_msg_t *rep = calloc((size_t)n, sizeof *rep);
  MPI_Request *rq = malloc(2 * (size_t)n * sizeof *rq), *sq = rq ? rq + n : NULL;
  int *state = calloc((size_t)n, sizeof *state); /* 0 pending, 1 same wait, 2 elsewhere */
  /* The probe goes out non-blocking: a dead or stopped peer must not hold this rank in a send.
   * Its buffer is on the heap so that an unfinished send can be abandoned safely. */
  ddp__probe_msg_t *probe = malloc(sizeof *probe);
  if (!rep || !rq || !state || !probe) {
    free(rep), free(rq), free(state), free(probe);
    return -1;
  }
  int64_t nonce = ++g->nonce;
  probe_fill(probe, nonce, d, waited);
  for (int r = 0; r < n; r++) {
    rq[r] = sq[r] = MPI_REQUEST_NULL;
    if (r == c->rank) continue;
    MPI_Irecv(&rep[r], (int)sizeof rep[r], MPI_BYTE, r, DDP__TAG_REPLY, g->pcomm, &rq[r]);
    MPI_Isend(probe, (int)sizeof *probe, MPI_BYTE, r, DDP__TAG_PROBE, g->pcomm, &sq[r]);
  }
  double t0 = ddp__now();
  int left = n - 1;
  /* Stay a little after the last reply: peers that expired at the same moment are asking us
   * too, and leaving at once would make us look silent to them. */
  double linger = grace < 0.3 ? grace : 0.3;
  while ((left > 0 || ddp__now() - t0 < linger) && ddp__now() - t0 < grace) {
    for (int r = 0; r < n; r++) {
      if (rq[r] == MPI_REQUEST_NULL) continue;
      int flag = 0;
      MPI_Test(&rq[r], &flag, MPI_STATUS_IGNORE);
      if (!flag) continue;
      if (rep[r].nonce != nonce) { /* a late reply to an earlier round: listen again */
        MPI_Irecv(&rep[r], (int)sizeof rep[r], MPI_BYTE, r, DDP__TAG_REPLY, g->pcomm, &rq[r]);
        continue;
      }
      rep[r].coll[sizeof rep[r].coll - 1] = '\0';
      state[r] = (d && rep[r].seq == (int64_t)d->seq && !strcmp(rep[r].coll, d->coll ? d->coll : "?"))
                     ? 1 : 2;
      left--;
    }
    answer_probes(c, d, waited + (ddp__now() - t0)); /* the others are asking us too */
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
  }
  for (int r = 0; r < n; r++)
    if (rq[r] != MPI_REQUEST_NULL) {
      MPI_Cancel(&rq[r]);
      MPI_Wait(&rq[r], MPI_STATUS_IGNORE);
    }
  int sends_left = 0;
  for (int r = 0; r < n; r++) {
    int flag = 1;
    if (sq[r] != MPI_REQUEST_NULL) MPI_Test(&sq[r], &flag, MPI_STATUS_IGNORE);
    if (!flag) {
      MPI_Request_free(&sq[r]); /* completes (or not) in the background */
      sends_left = 1;
    }
  }
  if (!sends_left) free(probe); /* else MPI may still read it: 64 bytes left to the job's end */
  /* Culprits: no answer, or waiting in another collective. */
  size_t o = 0, od = 0;
  int ncul = 0, nsame = 0;
  out[0] = detail[0] = '\0';
  for (int r = 0; r < n; r++) {
    if (r == c->rank || state[r] == 1) {
      nsame += r != c->rank;
      continue;
    }
    ncul++;
    if (o + 16 < outcap) o += (size_t)snprintf(out + o, outcap - o, "%s%d", o ? "," : "", r);
    if (od + 96 < detcap) {
      if (state[r] == 0)
        od += (size_t)snprintf(detail + od, detcap - od, "%srank %d did not answer within %.1f s "
                               "(busy outside mpiddp, stalled or dead)", od ? "; " : "", r, grace);
      else if (rep[r].seq < 0)
        od += (size_t)snprintf(detail + od, detcap - od, "%srank %d is not in a collective",
                               od ? "; " : "", r);
      else
        od += (size_t)snprintf(detail + od, detcap - od, "%srank %d waits in collective #%lld %s "
                               "(%lld bytes) for %.1f s", od ? "; " : "", r, (long long)rep[r].seq,
                               rep[r].coll, (long long)rep[r].bytes, (double)rep[r].waited_ms / 1e3);
    }
  }
  if (od + 64 < detcap)
    snprintf(detail + od, detcap - od, "%s%d other rank(s) wait in the same collective",
             od ? "; " : "", nsame);
  free(rep), free(rq), free(state);
  return ncul;
}

static ddp_status_t expire(ddp__comm_t *c, const ddp__wait_desc_t *d, const char *pending,
                           double waited) {
  char culprits[256] = "", detail[768] = "";
  if (!pending || !pending[0]) {
    /* Which peers are missing is not known (an MPI collective request or a spin-wait): ask. */
    double grace = c->cfg.timeout_s * 0.25;
    grace = grace < 1.0 ? 1.0 : grace > 5.0 ? 5.0 : grace;
    int ncul = inspect(c, d, waited, grace, culprits, sizeof culprits, detail, sizeof detail);
    if (ncul > 0) pending = culprits;
    else if (ncul < 0) detail[0] = '\0';
  }
  char msg[1280];
  snprintf(msg, sizeof msg,
           "watchdog: timeout after %.1f s (DDP_TIMEOUT_S=%g) waiting for collective #%llu %s "
           "(algo %s, %zu bytes, tag/bucket %d); peers that had not answered: %s%s%s%s",
           waited, c->cfg.timeout_s, d ? (unsigned long long)d->seq : 0ULL,
           d && d->coll ? d->coll : "?", d && d->algo ? d->algo : "?", d ? d->bytes : (size_t)0,
           d ? d->tag : -1, pending && pending[0] ? pending : "unknown",
           detail[0] ? " (stall inspector: " : "", detail, detail[0] ? ")" : "");
  /* Names are the library's own constants and peers are digits and commas: no escaping. */
  char args[512];
  snprintf(args, sizeof args,
           "{\"seq\":%llu,\"collective\":\"%.40s\",\"bytes\":%zu,\"tag\":%d,\"peers\":\"%.256s\"}",
           d ? (unsigned long long)d->seq : 0ULL, d && d->coll ? d->coll : "?",
           d ? d->bytes : (size_t)0, d ? d->tag : -1, pending && pending[0] ? pending : "unknown");
  ddp__timeline_event(c->timeline, 'i', "watchdog timeout", "ddp", args);
  ddp__timeline_write(c->timeline, c->world, 0); /* per-rank file: no peer is needed */
  if (!c->cfg.on_timeout_return) {
    /* One line on stderr whatever DDP_DEBUG says: the job is about to end. */
    fprintf(stderr, "%s mpiddp ABORT: %s\n", c->log.prefix, msg);
    fflush(stderr);
    if (c->log.fp && c->log.fp != stderr) ddp__log(&c->log, DDP_LOG_WARN, "ABORT: %s", msg);
    MPI_Abort(c->world, 3);
  }
  ddp__log(&c->log, DDP_LOG_WARN, "%s; returning DDP_ETIMEDOUT (DDP_ON_TIMEOUT=return)", msg);
  return ddp__error(DDP_ETIMEDOUT, "%s", msg);
}

/* Ends the "wait mpi" span of a wait that went to sleep (see ddp__wait_all). */
static ddp_status_t wait_end(ddp__comm_t *c, int slow, ddp_status_t st) {
  if (slow && c->timeline) ddp__timeline_event(c->timeline, 'E', "wait mpi", "ddp", NULL);
  return st;
}

/* MPI_Testall over the n requests with real status arrays, 64 requests at a time: MPICH's
 * MPI_STATUSES_IGNORE is the constant pointer (MPI_Status *)1, which GCC 12 reports as an
 * overflow of MPI_Testall's array parameter (-Wstringop-overflow). A chunk that completed
 * holds MPI_REQUEST_NULL from then on, so testing it again is free and says done. */
static int test_all(int n, MPI_Request *reqs, int *done) {
  enum { CHUNK = 64 };
  MPI_Status st[CHUNK];
  *done = 1;
  for (int i = 0; i < n; i += CHUNK) {
    int k = n - i < CHUNK ? n - i : CHUNK, d = 0;
    int rc = MPI_Testall(k, reqs + i, &d, st);
    if (rc != MPI_SUCCESS) return rc;
    if (!d) *done = 0;
  }
  return MPI_SUCCESS;
}

ddp_status_t ddp__wait_all(ddp__comm_t *c, int n, MPI_Request *reqs, const ddp__wait_desc_t *desc) {
  if (DDP_SIMULATED) { /* block: polling would cost simulated time (ddp_internal.h) */
    (void)desc;
    int rc = MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
    return rc == MPI_SUCCESS ? DDP_OK : ddp__mpi_error(rc, "MPI_Waitall");
  }
  double t0 = ddp__now();
  const double spin_s = c->guard ? c->guard->spin_s : DDP__SPIN_OVERSUB_S;
  unsigned spins = 0;
  int slow = 0;
  for (;;) {
    int done = 0;
    int rc = test_all(n, reqs, &done);
    if (rc != MPI_SUCCESS) return wait_end(c, slow, ddp__mpi_error(rc, "MPI_Testall"));
    if (done) return wait_end(c, slow, DDP_OK);
    if (!slow && (++spins & 15) != 0) continue;
    double waited = ddp__now() - t0;
    if (waited > DDP__ANSWER_AFTER_S) answer_probes(c, desc, waited);
    if (waited > c->cfg.timeout_s) {
      int *pend = malloc((size_t)(n > 0 ? n : 1) * sizeof *pend);
      int np = 0;
      for (int i = 0; pend && i < n; i++) {
        int flag = 0;
        if (reqs[i] == MPI_REQUEST_NULL) continue;
        MPI_Request_get_status(reqs[i], &flag, MPI_STATUS_IGNORE);
        if (!flag && desc && desc->peers && desc->peers[i] >= 0) pend[np++] = desc->peers[i];
      }
      char pending[256];
      format_peers(pending, sizeof pending, pend, np);
      free(pend);
      return wait_end(c, slow, expire(c, desc, pending, waited));
    }
    if (waited < spin_s) continue;
    if (!slow && c->timeline) ddp__timeline_event(c->timeline, 'B', "wait mpi", "ddp", NULL);
    slow = 1;
    if (waited < DDP__YIELD_S) {
      sched_yield();
      continue;
    }
    double nap = waited / 16.0;
    nap = nap < DDP__NAP_MIN_S ? DDP__NAP_MIN_S : nap > DDP__NAP_MAX_S ? DDP__NAP_MAX_S : nap;
    struct timespec ts = {0, (long)(nap * 1e9)};
    nanosleep(&ts, NULL);
  }
}

ddp_status_t ddp__deadline_check(ddp__comm_t *c, double t_start, const ddp__wait_desc_t *desc) {
  double waited = ddp__now() - t_start;
  if (waited > DDP__ANSWER_AFTER_S) answer_probes(c, desc, waited);
  if (waited <= c->cfg.timeout_s) return DDP_OK;
  return expire(c, desc, NULL, waited);
}

/* ---- fingerprints ---------------------------------------------------------------------- */
static const char *coll_name(int64_t id) {
  static const char *const names[] = {"allreduce", "broadcast", "allgather", "reduce_scatter",
                                      "barrier"};
  return (id >= 0 && id < 5) ? names[id] : "?";
}

static void pack(const ddp__coll_fp_t *fp, int64_t out[DDP__FP_FIELDS]) {
  out[0] = (int64_t)fp->seq;
  out[1] = fp->coll;
  out[2] = fp->dtype;
  out[3] = fp->op;
  out[4] = (int64_t)fp->count;
  out[5] = fp->root;
}

/* "dtype=f32" for field f of a packed fingerprint. */
static int field_text(char *buf, size_t cap, int f, const int64_t *v) {
  static const char *const fields[DDP__FP_FIELDS] = {"seq", "collective", "dtype", "op", "count",
                                                     "root"};
  switch (f) {
    case 1: return snprintf(buf, cap, "%s=%s", fields[f], coll_name(v[f]));
    case 2: return snprintf(buf, cap, "%s=%s", fields[f], v[f] < 0 ? "-" : ddp_dtype_name((ddp_dtype_t)v[f]));
    case 3: return snprintf(buf, cap, "%s=%s", fields[f], v[f] < 0 ? "-" : ddp_op_name((ddp_op_t)v[f]));
    case 0:
    case 4: return snprintf(buf, cap, "%s=%llu", fields[f], (unsigned long long)v[f]);
    default: return snprintf(buf, cap, "%s=%lld", fields[f], (long long)v[f]);
  }
}

/* Identical text on every rank (all hold every fingerprint): rank 0's fingerprint is the
 * reference, each differing rank is named with its differing fields. */
static ddp_status_t report_mismatch(ddp__comm_t *c, const int64_t *all) {
  char msg[960];
  size_t o = 0;
  const int64_t *ref = all;
  o += (size_t)snprintf(msg, sizeof msg, "DDP_CHECK: ranks disagree on collective #%llu (rank 0: %s",
                        (unsigned long long)ref[0], coll_name(ref[1]));
  for (int f = 2; f < DDP__FP_FIELDS && o < sizeof msg; f++) {
    o += (size_t)snprintf(msg + o, sizeof msg - o, " ");
    if (o < sizeof msg) o += (size_t)field_text(msg + o, sizeof msg - o, f, ref);
  }
  if (o < sizeof msg) o += (size_t)snprintf(msg + o, sizeof msg - o, ")");
  int ndiff = 0;
  for (int r = 1; r < c->size && o < sizeof msg; r++) {
    const int64_t *v = all + (size_t)r * DDP__FP_FIELDS;
    if (!memcmp(v, ref, DDP__FP_FIELDS * sizeof *v)) continue;
    ndiff++;
    o += (size_t)snprintf(msg + o, sizeof msg - o, "; rank %d has", r);
    for (int f = 0; f < DDP__FP_FIELDS && o < sizeof msg; f++) {
      if (v[f] == ref[f]) continue;
      o += (size_t)snprintf(msg + o, sizeof msg - o, " ");
      if (o < sizeof msg) o += (size_t)field_text(msg + o, sizeof msg - o, f, v);
    }
  }
  (void)ndiff;
  if (o >= sizeof msg) memcpy(msg + sizeof msg - 5, "...)", 5);
  ddp__log(&c->log, DDP_LOG_WARN, "%s", msg);
  ddp__timeline_event(c->timeline, 'i', "fingerprint mismatch", "ddp", NULL);
  return ddp__error(DDP_EMISMATCH, "%s", msg);
}

ddp_status_t ddp__guard_check(ddp__comm_t *c, const ddp__coll_fp_t *fp) {
  if (!c->cfg.check) return DDP_OK;
  struct ddp__guard *g = c->guard;
  if (!g || g->fpcomm == MPI_COMM_NULL || !fp)
    return ddp__error(DDP_EINTERNAL, "DDP_CHECK=1 but the guard is not initialised (fp %p)", (const void *)fp);
  pthread_mutex_lock(&g->mu);
  if (g->broken) {
    pthread_mutex_unlock(&g->mu);
    return ddp__error(DDP_ESTATE, "an earlier collective fingerprint exchange timed out: the "
                                  "communicator can only be aborted or destroyed");
  }
  pack(fp, g->mine);
  memcpy(g->all + (size_t)c->rank * DDP__FP_FIELDS, g->mine, sizeof g->mine);
  ddp_status_t st = DDP_OK;
  int n = 0;
  char what[48];
  snprintf(what, sizeof what, "fingerprint of %s", coll_name(fp->coll));
  ddp__wait_desc_t d = {fp->seq, what, "p2p", sizeof g->mine, -1, g->peers};
  int rc = MPI_SUCCESS;
  if (c->size <= DDP__FP_P2P_MAX) {
    for (int r = 0; r < c->size && rc == MPI_SUCCESS; r++) {
      if (r == c->rank) continue;
      g->peers[n] = r;
      rc = MPI_Irecv(g->all + (size_t)r * DDP__FP_FIELDS, DDP__FP_FIELDS, MPI_INT64_T, r,
                     DDP__FP_TAG, g->fpcomm, &g->reqs[n]);
      if (rc == MPI_SUCCESS) n++;
    }
    for (int r = 0; r < c->size && rc == MPI_SUCCESS; r++) {
      if (r == c->rank) continue;
      g->peers[n] = r;
      rc = MPI_Isend(g->mine, DDP__FP_FIELDS, MPI_INT64_T, r, DDP__FP_TAG, g->fpcomm, &g->reqs[n]);
      if (rc == MPI_SUCCESS) n++;
    }
  } else {
    d.algo = "iallgather";
    d.peers = NULL;
    rc = MPI_Iallgather(g->mine, DDP__FP_FIELDS, MPI_INT64_T, g->all, DDP__FP_FIELDS, MPI_INT64_T,
                        g->fpcomm, &g->reqs[0]);
    if (rc == MPI_SUCCESS) n = 1;
  }
  if (rc != MPI_SUCCESS) {
    /* Posting failed (MPI broken): whatever was posted cannot be waited on safely. */
    g->broken = 1;
    g->nreq = n;
    st = ddp__mpi_error(rc, "fingerprint exchange");
  } else {
    st = ddp__wait_all(c, n, g->reqs, &d);
    if (st == DDP_ETIMEDOUT) {
      g->broken = 1;
      g->nreq = n;
    }
  }
  if (st == DDP_OK) {
    for (int r = 1; r < c->size; r++)
      if (memcmp(g->all + (size_t)r * DDP__FP_FIELDS, g->all, sizeof g->mine)) {
        st = report_mismatch(c, g->all);
        break;
      }
  }
  pthread_mutex_unlock(&g->mu);
  return st;
}
