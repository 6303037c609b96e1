/* Failure scenarios run by tests/robust_run.sh, which checks exit status, time and messages:
 *   wait_abort  rank 0 waits for a message rank 1 never sends (watchdog ends the job)
 *   fp_skip     DDP_CHECK=1, rank 1 skips a fingerprint exchange (watchdog names rank 1)
 *   abort       rank 1 calls ddp_abort while the others sit in a barrier
 *   kill        ring exchanges in a loop; rank 1 SIGKILLs itself at iteration 200
 *   ok          the kill loop without the kill (the script's control case)
 *   check_disagree  DDP_CHECK=1 on rank 0 only (set there between MPI_Init_thread and
 *               ddp_init, so any launcher will do): ddp_init must fail on every rank with
 *               DDP_ECONFIG instead of hanging in the first fingerprint exchange
 * Linked to the static library because it drives the guard's internal waits directly. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ddp_internal.h"

static void block_forever(MPI_Comm comm) {
  int x = 0;
  /* A receive nobody matches: only MPI_Abort or mpirun's clean-up ends it. */
  MPI_Recv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 4242, comm, MPI_STATUS_IGNORE);
}

/* Ring exchange through the guard's wait, as an algorithm would do it. */
static int ring_loop(ddp__comm_t *c, int iters, int kill_at) {
  int right = (c->rank + 1) % c->size, left = (c->rank + c->size - 1) % c->size;
  int peers[2] = {left, right};
  double sendv[256], recvv[256];
  for (int it = 0; it < iters; it++) {
    if (it == kill_at && c->rank == 1) {
      fprintf(stderr, "robust_prog: rank 1 raises SIGKILL at iteration %d\n", it);
      fflush(stderr);
      raise(SIGKILL);
    }
    for (int i = 0; i < 256; i++) sendv[i] = c->rank * 1000.0 + it + i;
    MPI_Request req[2];
    MPI_Irecv(recvv, 256, MPI_DOUBLE, left, it & 0x7fff, c->world, &req[0]);
    MPI_Isend(sendv, 256, MPI_DOUBLE, right, it & 0x7fff, c->world, &req[1]);
    ddp__wait_desc_t d = {(uint64_t)it, "ring-test", "ring", sizeof sendv, 0, peers};
    if (ddp__wait_all(c, 2, req, &d) != DDP_OK) {
      fprintf(stderr, "rank %d: wait failed: %s\n", c->rank, ddp_last_error());
      return 1;
    }
    for (int i = 0; i < 256; i++)
      if (recvv[i] != left * 1000.0 + it + i) {
        fprintf(stderr, "rank %d: wrong data at iteration %d\n", c->rank, it);
        return 1;
      }
  }
  return 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  ddp_comm_t *comm = NULL;
  if (!strcmp(mode, "check_disagree")) {
    int provided = 0, rank = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    unsetenv("DDP_CHECK");
    if (rank == 0) setenv("DDP_CHECK", "1", 1);
    const char *mine = getenv("DDP_CHECK");
    ddp_status_t st = ddp_init(&argc, &argv, MPI_COMM_WORLD, &comm);
    int ok = st == DDP_ECONFIG && strstr(ddp_last_error(), "DDP_CHECK differs across ranks");
    printf("robust_prog check_disagree (DDP_CHECK=%s): ddp_init returned %d: %s -> %s\n",
           mine ? mine : "unset", (int)st, ddp_last_error(), ok ? "PASS" : "FAIL");
    if (st == DDP_OK) ddp_finalize(&comm);
    MPI_Finalize();
    return ok ? 0 : 1;
  }
  if (ddp_init(&argc, &argv, MPI_COMM_NULL, &comm) != DDP_OK) {
    fprintf(stderr, "ddp_init: %s\n", ddp_last_error());
    return 2;
  }
  ddp__comm_t *c = comm;
  int rc = 0;
  if (c->size < 2) {
    fprintf(stderr, "robust_prog needs np >= 2\n");
    rc = 2;
  } else if (!strcmp(mode, "wait_abort")) {
    if (c->rank == 0) {
      int x = 0;
      MPI_Request req;
      int peers[1] = {1};
      MPI_Irecv(&x, 1, MPI_INT, 1, 17, c->world, &req);
      ddp__wait_desc_t d = {3, "allreduce", "ring", 4096, 2, peers};
      ddp_status_t st = ddp__wait_all(c, 1, &req, &d);
      fprintf(stderr, "robust_prog: ddp__wait_all returned %d (%s): the watchdog did not abort\n",
              (int)st, ddp_last_error());
      rc = 1;
    } else {
      block_forever(c->world);
    }
  } else if (!strcmp(mode, "fp_skip")) {
    ddp__coll_fp_t fp = {12, 0, DDP_F32, DDP_SUM, 1024, -1};
    if (c->rank != 1) {
      ddp_status_t st = ddp__guard_check(c, &fp);
      fprintf(stderr, "robust_prog: ddp__guard_check returned %d (%s): expected an abort\n", (int)st,
              ddp_last_error());
      rc = 1;
    } else {
      block_forever(c->world);
    }
  } else if (!strcmp(mode, "abort")) {
    if (c->rank == 1) {
      ddp_status_t st = ddp_abort(comm, "robust test: deliberate ddp_abort from rank 1");
      fprintf(stderr, "robust_prog: ddp_abort returned %d (%s)\n", (int)st, ddp_last_error());
      rc = 1;
    } else {
      MPI_Barrier(c->world);
      rc = 1;
    }
  } else if (!strcmp(mode, "kill") || !strcmp(mode, "ok")) {
    int kill_at = !strcmp(mode, "kill") ? 200 : -1;
    /* With the kill the loop would take minutes: only mpirun's clean-up ends it early. */
    rc = ring_loop(c, kill_at >= 0 ? 50000000 : 2000, kill_at);
    if (kill_at >= 0) {
      fprintf(stderr, "robust_prog: rank %d finished the loop although rank 1 died\n", c->rank);
      rc = 1;
    }
  } else {
    fprintf(stderr, "robust_prog: unknown mode '%s' (wait_abort, fp_skip, abort, kill, ok)\n", mode);
    rc = 2;
  }
  if (rc == 0 && c->rank == 0) printf("robust_prog %s: PASS\n", mode);
  ddp_finalize(&comm);
  return rc;
}
