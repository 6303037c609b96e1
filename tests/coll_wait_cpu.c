/* Waits that cost no CPU: rank 0 enters an allreduce while its peer arrives DELAY_S later
 * (sleeping meanwhile), and rank 0's CPU time over the wait (every thread of the process:
 * caller, progress thread) must stay a small part of the wait. The shm algorithm sleeps on a
 * futex after a short spin (budget SHM_BUDGET); the MPI-request paths (mpi, ring) test, yield
 * the core for 50 ms, then nap (budget MPI_BUDGET). A blocking `mpi` call is the MPI's own
 * MPI_Allreduce on the caller's thread (transports/coll_mpi_coll.c): its figure is printed, not judged. Each case blocking (the wait runs on the
 * caller's thread) and non-blocking (the progress thread waits, the caller sleeps in
 * ddp_wait), at sizes that take shm's tiny, small-chunk and large paths; results are exact
 * (integer-valued f32). With a busy-polling wait rank 0 burns a whole core: the check fails.
 * Each algorithm's first call, which sets it up with MPI's own (busy-polling) collectives, is
 * not timed. Usage: mpirun -np 2 coll_wait_cpu */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "ddp_test.h"

#define DELAY_S 0.5
#define SHM_BUDGET 0.05
#define MPI_BUDGET 0.25

static double cpu_s(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)u.ru_utime.tv_sec + 1e-6 * (double)u.ru_utime.tv_usec +
         (double)u.ru_stime.tv_sec + 1e-6 * (double)u.ru_stime.tv_usec;
}

static double wall_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* One case: returns rank 0's CPU fraction over the wait (-1 on other ranks). */
static double one(ddp_comm_t *comm, int rank, const char *algo, size_t count, int nonblocking,
                  float *buf, double delay_s) {
  for (size_t i = 0; i < count; i++) buf[i] = (float)((rank + 1) * (int)(i % 1000));
  ddp_coll_opts_t o;
  ddp_coll_opts_default(&o);
  CHECK_OK(ddp_algo_parse(algo, &o.algo));
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank != 0 && delay_s > 0.0) {
    struct timespec ts = {(time_t)delay_s, (long)((delay_s - (double)(time_t)delay_s) * 1e9)};
    nanosleep(&ts, NULL);
  }
  double w0 = wall_s(), c0 = cpu_s();
  if (nonblocking) {
    ddp_request_t *req = NULL;
    CHECK_OK(ddp_iallreduce(comm, DDP_IN_PLACE, buf, count, DDP_F32, DDP_SUM, &o, &req));
    if (req) CHECK_OK(ddp_wait(&req));
  } else {
    CHECK_OK(ddp_allreduce(comm, DDP_IN_PLACE, buf, count, DDP_F32, DDP_SUM, &o));
  }
  double frac = (cpu_s() - c0) / (wall_s() - w0);
  size_t wrong = 0;
  for (size_t i = 0; i < count; i++) wrong += buf[i] != (float)(3 * (int)(i % 1000));
  CHECK(wrong == 0, "%s, %zu floats, %s: %zu wrong elements", algo, count,
        nonblocking ? "non-blocking" : "blocking", wrong);
  return rank == 0 ? frac : -1.0;
}

static int run_wait_cpu(ddp_test_t *t) {
  ddp_comm_t *comm = t->comm;
  int rank = t->rank, size = t->size;
  CHECK(size == 2, "world size %d, this test needs 2", size);
  if (size != 2) return 0;
  const size_t counts[] = {2, 16384, 1 << 20}; /* 8 B (tiny), 64 KB, 4 MB */
  float *buf = malloc(sizeof(float) * counts[2]);
  CHECK(buf != NULL, "out of memory");
  const char *algos[] = {"shm", "mpi", "ring"};
  for (int a = 0; a < 3 && buf; a++) {
    if (!ddp_test_algo_usable(comm, algos[a])) continue;
    double budget = a == 0 ? SHM_BUDGET : MPI_BUDGET;
    /* First use sets the algorithm up with MPI's own (busy-polling) collectives: not timed. */
    one(comm, rank, algos[a], counts[2], 0, buf, 0.0);
    for (int k = 0; k < 3; k++) {
      if (a > 0 && k == 1) continue; /* the MPI paths: smallest and largest */
      for (int nb = 0; nb < 2; nb++) {
        double f = one(comm, rank, algos[a], counts[k], nb, buf, DELAY_S);
        if (rank != 0) continue;
        printf("%-4s %8zu B %-12s: rank 0 used %5.1f%% of a core while waiting %.0f ms for its peer (budget %.0f%%)\n",
               algos[a], counts[k] * sizeof(float), nb ? "non-blocking" : "blocking", 100.0 * f,
               DELAY_S * 1e3, 100.0 * budget);
        /* A blocking `mpi` call is MPI_Allreduce on the caller's thread, waiting as the MPI
         * does (Open MPI polls): printed, not judged. Every other wait is mpiddp's. */
        if (a == 1 && !nb) continue;
        CHECK(f <= budget, "%s, %zu B, %s: the wait used %.1f%% of a core (budget %.0f%%)",
              algos[a], counts[k] * sizeof(float), nb ? "non-blocking" : "blocking", 100.0 * f,
              100.0 * budget);
      }
    }
  }
  free(buf);
  return 0;
}

DDP_TEST_PROGRAM("coll_wait_cpu", DDP_TEST_CASE("wait_cpu", run_wait_cpu));
