/* The allreduce algorithms on a simulated cluster (SimGrid SMPI): one simulated process per
 * rank runs the library's real code path (ddp_allreduce with a named algorithm, the
 * simulation mode of ddp_internal.h), or MPI_Allreduce itself ("smpi": the algorithm SMPI was
 * told with --cfg=smpi/allreduce:NAME). Prints one JSON line per (algorithm, size) on rank 0:
 * the simulated time of one call (the slowest rank's, median of the repetitions).
 *   smpirun ... sim_allreduce -a ring,rhd,hier,auto,smpi -s 4096,67108864 [-r 3] [-c]
 * -c: private buffers filled by (rank, index) and an exact check of the result (slower:
 *     real memory and real reduction work); without it the buffers are SMPI_SHARED_MALLOC
 *     (one copy shared by all ranks, contents meaningless) so 1024 ranks fit in memory, and
 *     the library skips its local reduce/copy work (MPIDDP_SIM_NOCOMPUTE; it is charged no
 *     simulated time in either case: run.sh sets smpi/simulate-computation:no). */
#include <mpi.h>
#include <smpi/smpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp.h"

#define MAX_LIST 32

static int split(char *s, char **out) {
  int n = 0;
  for (char *t = strtok(s, ","); t && n < MAX_LIST; t = strtok(NULL, ",")) out[n++] = t;
  return n;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  char algos_s[256] = "ring,rhd,auto", sizes_s[512] = "4096,1048576";
  int reps = 3, check = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-a") && i + 1 < argc) snprintf(algos_s, sizeof algos_s, "%s", argv[++i]);
    else if (!strcmp(argv[i], "-s") && i + 1 < argc) snprintf(sizes_s, sizeof sizes_s, "%s", argv[++i]);
    else if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-c")) check = 1;
  }
  if (reps < 1 || reps > 100) reps = 3;
  /* Shared buffers carry no data: the library skips its local reduce/copy work (no simulated
   * time either way, only the host's CPU; coll_comm.c). */
  if (!check) setenv("MPIDDP_SIM_NOCOMPUTE", "1", 1);
  ddp_comm_t *comm = NULL;
  if (ddp_init(&argc, &argv, MPI_COMM_NULL, &comm) != DDP_OK) {
    fprintf(stderr, "sim_allreduce: ddp_init: %s\n", ddp_last_error());
    return 1;
  }
  ddp_comm_info_t info;
  ddp_comm_info(comm, &info);
  char *algos[MAX_LIST], *sizes[MAX_LIST];
  int na = split(algos_s, algos), ns = split(sizes_s, sizes), failures = 0;
  for (int s = 0; s < ns; s++) {
    size_t bytes = strtoull(sizes[s], NULL, 10);
    size_t count = bytes / sizeof(float);
    if (count < 1) continue;
    float *buf = check ? malloc(count * sizeof(float)) : SMPI_SHARED_MALLOC(count * sizeof(float));
    /* SMPI's own algorithms get a separate (shared) send buffer, not MPI_IN_PLACE: for in place
     * SMPI copies the vector into a private, zero-filled temporary first (smpi_pmpi_coll.cpp,
     * 3.32), real memory that 256 ranks x 64 MB cannot afford. Out of place, SMPI skips the
     * copies of messages from shared buffers, so rab_rdb's own temporary is never written.
     * The algorithms see the same arguments either way (in place, they get the copy). */
    float *sendbuf = check ? NULL : SMPI_SHARED_MALLOC(count * sizeof(float));
    for (int a = 0; a < na; a++) {
      double t[100];
      ddp_coll_opts_t o;
      ddp_coll_opts_default(&o);
      int smpi = !strcmp(algos[a], "smpi");
      const char *chosen = "MPI_Allreduce";
      if (!smpi && (ddp_algo_parse(algos[a], &o.algo) != DDP_OK ||
                    ddp_allreduce_choice(comm, buf, count, DDP_F32, &o, &chosen) != DDP_OK)) {
        if (info.rank == 0)
          printf("{\"ranks\":%d,\"algo\":\"%s\",\"bytes\":%zu,\"skipped\":\"%s\"}\n", info.size,
                 algos[a], bytes, ddp_last_error());
        continue;
      }
      int bad = 0;
      for (int r = 0; r < reps; r++) {
        if (check)
          for (size_t k = 0; k < count; k++) buf[k] = (float)((info.rank + 1) * (int)(k % 7));
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        int st = smpi ? MPI_Allreduce(check ? MPI_IN_PLACE : sendbuf, buf, (int)count, MPI_FLOAT,
                                      MPI_SUM, MPI_COMM_WORLD)
                      : ddp_allreduce(comm, DDP_IN_PLACE, buf, count, DDP_F32, DDP_SUM, &o);
        double dt = MPI_Wtime() - t0;
        if (st != 0) bad++;
        MPI_Allreduce(&dt, &t[r], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (check) {
          float sum = (float)(info.size * (info.size + 1) / 2);
          for (size_t k = 0; k < count; k++)
            if (buf[k] != sum * (float)(k % 7)) {
              bad++;
              break;
            }
        }
      }
      MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
      failures += bad;
      qsort(t, (size_t)reps, sizeof t[0], cmp_double);
      double med = t[reps / 2];
      if (info.rank == 0)
        printf("{\"ranks\":%d,\"nodes\":%d,\"algo\":\"%s\",\"chose\":\"%s\",\"bytes\":%zu,\"time_s\":%.9g,"
               "\"busbw_GBps\":%.6g,\"checked\":%d,\"wrong\":%d}\n",
               info.size, info.nodes, algos[a], chosen, bytes, med,
               info.size > 1 ? 2.0 * (info.size - 1) / info.size * (double)bytes / med / 1e9 : 0.0,
               check, bad);
      fflush(stdout);
    }
    if (check) free(buf);
    else {
      SMPI_SHARED_FREE(buf);
      SMPI_SHARED_FREE(sendbuf);
    }
  }
  ddp_finalize(&comm);
  return failures ? 1 : 0;
}
