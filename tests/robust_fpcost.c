/* Cost of DDP_CHECK=1 collective fingerprints: the same allreduce on two communicators of one
 * run, one created without DDP_CHECK and one with DDP_CHECK=1, measured in alternating rounds
 * (median of rounds), at sizes from 8 B to 4 MB. Prints a table and writes JSON.
 *   robust_fpcost [rounds] [json-file]      (rounds default 7; 1 for a smoke test) */
#include <stdlib.h>
#include <string.h>

#include "ddp_test.h"

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Mean seconds per allreduce over iters calls (after a barrier; max over ranks). */
static double time_one(ddp_comm_t *comm, float *buf, size_t count, int iters) {
  MPI_Comm w;
  ddp_comm_mpi(comm, DDP_COMM_WORLD, &w);
  MPI_Barrier(w);
  double t0 = MPI_Wtime();
  for (int i = 0; i < iters; i++)
    if (ddp_allreduce(comm, DDP_IN_PLACE, buf, count, DDP_F32, DDP_SUM, NULL) != DDP_OK) {
      fprintf(stderr, "allreduce: %s\n", ddp_last_error());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  double t = (MPI_Wtime() - t0) / iters, tmax = t;
  MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, w);
  return tmax;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 7;
  const char *json = argc > 2 ? argv[2] : NULL;
  if (rounds < 1) rounds = 1;
  unsetenv("DDP_CHECK");
  ddp_comm_t *plain = NULL, *checked = NULL;
  if (ddp_init(&argc, &argv, MPI_COMM_NULL, &plain) != DDP_OK) {
    fprintf(stderr, "ddp_init: %s\n", ddp_last_error());
    return 1;
  }
  setenv("DDP_CHECK", "1", 1); /* read by ddp_comm_create: the second communicator checks */
  CHECK_OK(ddp_comm_create(MPI_COMM_WORLD, &checked));
  int rank = 0, size = 1;
  ddp_comm_rank(plain, &rank);
  ddp_comm_size(plain, &size);
  const size_t sizes[] = {8, 4096, 65536, (size_t)4 << 20};
  const int iters_for[] = {2000, 1000, 200, 10};
  size_t ns = sizeof sizes / sizeof sizes[0];
  float *buf = calloc(sizes[ns - 1] / 4, sizeof *buf);
  double res[4][2];
  for (size_t s = 0; s < ns; s++) {
    size_t count = sizes[s] / 4;
    int iters = rounds == 1 ? (iters_for[s] / 20 > 0 ? iters_for[s] / 20 : 1) : iters_for[s];
    double *tp = calloc((size_t)rounds, sizeof *tp), *tc = calloc((size_t)rounds, sizeof *tc);
    time_one(plain, buf, count, iters / 10 + 1); /* warm-up both */
    time_one(checked, buf, count, iters / 10 + 1);
    for (int r = 0; r < rounds; r++) {
      tp[r] = time_one(plain, buf, count, iters);
      tc[r] = time_one(checked, buf, count, iters);
    }
    qsort(tp, (size_t)rounds, sizeof *tp, cmp_d);
    qsort(tc, (size_t)rounds, sizeof *tc, cmp_d);
    res[s][0] = tp[rounds / 2];
    res[s][1] = tc[rounds / 2];
    free(tp);
    free(tc);
  }
  /* The buffer holds sums of zeros: still zero, so the runs did not drift into inf/nan. */
  size_t bad = 0;
  for (size_t i = 0; i < sizes[ns - 1] / 4; i++) bad += buf[i] != 0.0f;
  CHECK(bad == 0, "%zu non-zero elements", bad);
  /* The second communicator really checks (a rank-dependent count is refused), the first not
   * (with equal counts it must simply work). */
  if (size > 1)
    CHECK_ST(ddp_allreduce(checked, DDP_IN_PLACE, buf, 4 + (size_t)rank, DDP_F32, DDP_SUM, NULL),
             DDP_EMISMATCH);
  CHECK_OK(ddp_allreduce(plain, DDP_IN_PLACE, buf, 4, DDP_F32, DDP_SUM, NULL));
  if (rank == 0) {
    printf("# DDP_CHECK=1 fingerprint cost: allreduce f32 sum in place, np %d, algo auto, median of %d rounds\n",
           size, rounds);
    printf("# %10s %14s %14s %12s %8s\n", "bytes", "plain_us", "DDP_CHECK_us", "extra_us", "ratio");
    for (size_t s = 0; s < ns; s++)
      printf("  %10zu %14.2f %14.2f %12.2f %8.2f\n", sizes[s], res[s][0] * 1e6, res[s][1] * 1e6,
             (res[s][1] - res[s][0]) * 1e6, res[s][1] / res[s][0]);
    if (json) {
      FILE *f = fopen(json, "w");
      if (f) {
        fprintf(f, "{\"np\":%d,\"rounds\":%d,\"results\":[", size, rounds);
        for (size_t s = 0; s < ns; s++)
          fprintf(f, "%s{\"bytes\":%zu,\"plain_us\":%.3f,\"check_us\":%.3f,\"ratio\":%.4f}",
                  s ? "," : "", sizes[s], res[s][0] * 1e6, res[s][1] * 1e6, res[s][1] / res[s][0]);
        fprintf(f, "]}\n");
        fclose(f);
      } else {
        CHECK(0, "cannot write %s", json);
      }
    }
  }
  free(buf);
  CHECK_OK(ddp_comm_destroy(&checked));
  int rc = ddp_test_finish("robust_fpcost");
  ddp_finalize(&plain);
  return rc;
}
