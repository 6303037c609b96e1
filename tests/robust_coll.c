/* Failure scenarios through the public collectives, run by tests/robust_run.sh or as
 * plain MPI tests:
 *   mismatch     DDP_CHECK=1: ranks call collectives that differ in count, dtype, op, root or
 *                kind; every rank gets DDP_EMISMATCH naming the ranks and fields, and matched
 *                collectives afterwards give exact results (a normal pass/fail test)
 *   hang_abort   rank 1 skips the 3rd allreduce (tag 7) and sleeps: the watchdog ends the job
 *   hang_return  same with DDP_ON_TIMEOUT=return: ddp_wait returns DDP_ETIMEDOUT, the program
 *                prints it and ends the job with ddp_abort
 *   desync       rank 1 calls a broadcast where the others call their 3rd allreduce: the
 *                stall inspector names rank 1 and what it waits in
 *   kill         blocking and non-blocking allreduces in a loop; rank 1 SIGKILLs itself at
 *                iteration 300: mpirun must end the job, non-zero, within 30 s
 *   stall        the same loop, but rank 1 stops itself with SIGSTOP (a hung rank that mpirun
 *                does not see die): the watchdog must end the job and name rank 1
 *   ok           the kill loop without the kill (control) */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ddp_test.h"

static int rank_, size_;

static int finalize_after_timeout_; /* hang_finalize: no ddp_abort, everybody finalizes */
static int use_bcast_;              /* the hang is in a broadcast (an MPI request) */

static void sleep_forever(void) {
  if (finalize_after_timeout_) {
    sleep(6); /* past the others' deadline and inspection, then leave normally */
    return;
  }
  for (;;) sleep(1000); /* only MPI_Abort / mpirun's clean-up ends this rank */
}

/* Expects DDP_EMISMATCH from a call on every rank, with the message containing each needle;
 * rank 0 prints the message once (the test log shows it). */
#define EXPECT_MISMATCH(call, ...)                                                        \
  do {                                                                                    \
    ddp_status_t st_ = (call);                                                            \
    CHECK(st_ == DDP_EMISMATCH, "%s returned %s: %s", #call, ddp_strerror(st_), ddp_last_error()); \
    const char *needles_[] = {__VA_ARGS__, NULL};                                         \
    for (int k_ = 0; needles_[k_]; k_++) CHECK_MSG(needles_[k_]);                          \
    if (rank_ == 0) printf("rank 0: %s -> DDP_EMISMATCH: %s\n", #call, ddp_last_error());  \
  } while (0)

/* A matched allreduce with exact integer data still works after a mismatch. */
static void check_allreduce_ok(ddp_comm_t *comm, size_t n) {
  int32_t *b = malloc(n * sizeof *b);
  for (size_t i = 0; i < n; i++) b[i] = (int32_t)(rank_ * 3 + (int)(i % 97));
  CHECK_OK(ddp_allreduce(comm, DDP_IN_PLACE, b, n, DDP_I32, DDP_SUM, NULL));
  size_t bad = 0;
  for (size_t i = 0; i < n; i++)
    bad += b[i] != (int32_t)(3 * size_ * (size_ - 1) / 2 + size_ * (int)(i % 97));
  CHECK(bad == 0, "allreduce after a mismatch: %zu of %zu wrong", bad, n);
  free(b);
}

static void run_mismatch(ddp_comm_t *comm) {
  int last = size_ - 1;
  char buf[64];
  float f[64] = {0};
  double d[64] = {0};
  /* count: rank 1 sends 16 elements, the others 32 */
  size_t n = rank_ == 1 ? 16 : 32;
  snprintf(buf, sizeof buf, "rank 1 has count=16");
  EXPECT_MISMATCH(ddp_allreduce(comm, DDP_IN_PLACE, f, n, DDP_F32, DDP_SUM, NULL),
                  "DDP_CHECK: ranks disagree on collective #", "rank 0: allreduce dtype=f32 op=sum count=32", buf);
  check_allreduce_ok(comm, 1000);
  /* dtype on the last rank */
  snprintf(buf, sizeof buf, "rank %d has dtype=f64", last);
  if (rank_ == last)
    EXPECT_MISMATCH(ddp_allreduce(comm, DDP_IN_PLACE, d, 8, DDP_F64, DDP_SUM, NULL), buf, "dtype=f32");
  else
    EXPECT_MISMATCH(ddp_allreduce(comm, DDP_IN_PLACE, f, 8, DDP_F32, DDP_SUM, NULL), buf, "dtype=f32");
  /* op, non-blocking: the status arrives through ddp_wait */
  ddp_request_t *rq = NULL;
  CHECK_OK(ddp_iallreduce(comm, DDP_IN_PLACE, f, 8, DDP_F32, rank_ == 1 ? DDP_MAX : DDP_SUM, NULL, &rq));
  EXPECT_MISMATCH(ddp_wait(&rq), "rank 1 has op=max", "op=sum");
  CHECK(rq == NULL, "ddp_wait must clear the request");
  /* broadcast root */
  snprintf(buf, sizeof buf, "rank %d has root=%d", last, last);
  EXPECT_MISMATCH(ddp_broadcast(comm, f, 4, DDP_F32, rank_ == last ? last : 0, NULL),
                  "rank 0: broadcast", buf);
  /* a different collective altogether */
  if (rank_ == 1)
    EXPECT_MISMATCH(ddp_broadcast(comm, f, 4, DDP_F32, 0, NULL), "rank 1 has collective=broadcast");
  else
    EXPECT_MISMATCH(ddp_allreduce(comm, DDP_IN_PLACE, f, 4, DDP_F32, DDP_SUM, NULL),
                    "rank 1 has collective=broadcast");
  /* every rank differs: each is named */
  size_t mine = 10 + (size_t)rank_;
  EXPECT_MISMATCH(ddp_allreduce(comm, DDP_IN_PLACE, f, mine, DDP_F32, DDP_SUM, NULL), "rank 1 has count=11");
  for (int r = 2; r < size_; r++) {
    snprintf(buf, sizeof buf, "rank %d has count=%d", r, 10 + r);
    CHECK_MSG(buf);
  }
  check_allreduce_ok(comm, 100003);
  CHECK_OK(ddp_barrier(comm));
}

/* 128 KB by default; ROBUST_HANG_COUNT=n uses n floats (the tiny-message paths must time
 * out too: robust_coll_hang_small_np3 forces the mpi algorithm on 8 bytes). ROBUST_LATE_MS=t:
 * the last rank enters allreduce #3 t ms late, so that when the first rank's deadline
 * expires, the last one is still inside its own wait and can only answer the stall inspector
 * from there (for the mpi algorithm: from the watch thread, the caller being in MPI_Allreduce). */
#define HANG_N 32768

static void run_hang(ddp_comm_t *comm, int use_return, int desync) {
  static float b[HANG_N];
  const char *hc = getenv("ROBUST_HANG_COUNT");
  int n = hc ? atoi(hc) : HANG_N;
  if (n < 1 || n > HANG_N) n = HANG_N;
  ddp_coll_opts_t o;
  ddp_coll_opts_default(&o);
  o.tag = 7;
  for (int it = 0; it < 3; it++) {
    for (int i = 0; i < n; i++) b[i] = (float)(rank_ + i % 1000);
    if (it == 2 && rank_ == 1 && desync) {
      fprintf(stderr, "robust_coll: rank 1 calls a broadcast instead of allreduce #3\n");
      ddp_status_t st = ddp_broadcast(comm, b, n, DDP_F32, 0, &o);
      fprintf(stderr, "robust_coll: rank 1: the broadcast returned %s: %s\n", ddp_strerror(st),
              ddp_last_error());
      return;
    }
    const char *late = getenv("ROBUST_LATE_MS");
    if (it == 2 && late && size_ > 2 && rank_ == size_ - 1) usleep((useconds_t)atoi(late) * 1000);
    if (it == 2 && rank_ == 1) {
      fprintf(stderr, "robust_coll: rank 1 skips allreduce #3 and sleeps\n");
      sleep_forever();
      return;
    }
    ddp_request_t *rq = NULL;
    if (use_bcast_) /* rooted at the rank that skips: a broadcast need not synchronise (an
                       eager root may finish without its receivers), but nobody can receive
                       data the root never sends, whatever the MPI */
      CHECK_OK(ddp_ibroadcast(comm, b, n, DDP_F32, 1, &o, &rq));
    else
      CHECK_OK(ddp_iallreduce(comm, DDP_IN_PLACE, b, n, DDP_F32, DDP_SUM, &o, &rq));
    ddp_status_t st = ddp_wait(&rq);
    if (st != DDP_OK) {
      fprintf(stderr, "robust_coll: rank %d: ddp_wait returned %s: %s\n", rank_, ddp_strerror(st),
              ddp_last_error());
      if (use_return && st == DDP_ETIMEDOUT && !finalize_after_timeout_) {
        char why[96];
        snprintf(why, sizeof why, "robust_coll: rank %d gives up after DDP_ETIMEDOUT", rank_);
        ddp_abort(comm, why);
      }
      return;
    }
  }
  fprintf(stderr, "robust_coll: rank %d: allreduce #3 completed although rank 1 skipped it\n", rank_);
}

static int run_loop(ddp_comm_t *comm, int kill_at, int sig) {
  size_t max_n = 64 * 1024;
  int32_t *b = malloc(max_n * sizeof *b);
  int iters = kill_at >= 0 ? 100000000 : 600;
  for (int it = 0; it < iters; it++) {
    if (it == kill_at && rank_ == 1) {
      fprintf(stderr, "robust_coll: rank 1 raises %s at iteration %d\n",
              sig == SIGKILL ? "SIGKILL" : "SIGSTOP", it);
      fflush(stderr);
      raise(sig);
    }
    size_t n = (size_t)1 << (4 + it % 13); /* 16 .. 64K elements */
    for (size_t i = 0; i < n; i++) b[i] = (int32_t)((size_t)rank_ + i + (size_t)it);
    ddp_status_t st;
    if (it % 2) {
      ddp_request_t *rq = NULL;
      st = ddp_iallreduce(comm, DDP_IN_PLACE, b, n, DDP_I32, DDP_SUM, NULL, &rq);
      if (st == DDP_OK) st = ddp_wait(&rq);
    } else {
      st = ddp_allreduce(comm, DDP_IN_PLACE, b, n, DDP_I32, DDP_SUM, NULL);
    }
    if (st != DDP_OK) {
      fprintf(stderr, "robust_coll: rank %d: allreduce failed at iteration %d: %s\n", rank_, it,
              ddp_last_error());
      free(b);
      return 1;
    }
    for (size_t i = 0; i < n; i++)
      if (b[i] != (int32_t)((size_t)size_ * (i + (size_t)it) + (size_t)(size_ * (size_ - 1) / 2))) {
        fprintf(stderr, "robust_coll: rank %d: wrong result at iteration %d index %zu\n", rank_, it, i);
        free(b);
        return 1;
      }
  }
  free(b);
  return 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  ddp_comm_t *comm = NULL;
  if (ddp_init(&argc, &argv, MPI_COMM_NULL, &comm) != DDP_OK) {
    fprintf(stderr, "ddp_init: %s\n", ddp_last_error());
    return 2;
  }
  ddp_comm_rank(comm, &rank_);
  ddp_comm_size(comm, &size_);
  int rc = 0;
  if (size_ < 2) {
    fprintf(stderr, "robust_coll needs np >= 2\n");
    rc = 2;
  } else if (!strcmp(mode, "mismatch")) {
    run_mismatch(comm);
    rc = ddp_test_finish("robust_coll mismatch");
  } else if (!strcmp(mode, "hang_finalize") || !strcmp(mode, "hang_finalize_bcast")) {
    use_bcast_ = !strcmp(mode, "hang_finalize_bcast");
    /* DDP_ON_TIMEOUT=return, then every rank finalizes: the abandoned collective must not
     * hang ddp_finalize. */
    finalize_after_timeout_ = 1;
    run_hang(comm, 1, 0);
    fprintf(stderr, "robust_coll: rank %d finalizes\n", rank_);
    rc = 0;
  } else if (!strcmp(mode, "hang_abort") || !strcmp(mode, "hang_return") ||
             !strcmp(mode, "desync")) {
    run_hang(comm, !strcmp(mode, "hang_return"), !strcmp(mode, "desync"));
    rc = 1; /* reaching this line means the job did not end */
  } else if (!strcmp(mode, "kill") || !strcmp(mode, "stall") || !strcmp(mode, "ok")) {
    int kill_at = strcmp(mode, "ok") ? 300 : -1;
    rc = run_loop(comm, kill_at, !strcmp(mode, "stall") ? SIGSTOP : SIGKILL);
    if (kill_at >= 0) {
      fprintf(stderr, "robust_coll: rank %d finished the loop although rank 1 died\n", rank_);
      rc = 1;
    }
    if (rc == 0 && rank_ == 0) printf("robust_coll %s: PASS\n", mode);
  } else {
    fprintf(stderr, "robust_coll: unknown mode '%s' (mismatch, hang_abort, hang_return, hang_finalize[_bcast], desync, kill, stall, ok)\n", mode);
    rc = 2;
  }
  ddp_finalize(&comm);
  return rc;
}
