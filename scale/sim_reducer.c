/* W-DDP's bucket schedule on a simulated cluster (SimGrid SMPI): predicted scaling efficiency
 * against the reducer's bucket cap.
 *   smpirun ... sim_reducer [-c 1,5,25,100] [-g 72] [-b 64] [-f 1]
 * The model (docs/scale.md): the MLP 784-2048-2048-2048-10 (f32, 40 MB of gradients), batch b
 * per rank; a layer's backward costs 4 b in out flops (gradients of weights and inputs), its
 * forward 2 b in out, at g GFLOP/s (72: one core's OpenBLAS sgemm on the build machine). The
 * parameters are bucketed as the reducer does (backward order, the first bucket capped at
 * -f MB, the others at the cap; a parameter never split); a bucket is ready when its last
 * layer's backward ends. Each bucket's allreduce is the library's own call (ddp_allreduce,
 * auto) timed on the simulated network here, one call per bucket size (slowest rank); the
 * buckets then run one after another on the communication stream, overlapping the rest of
 * the backward pass (the progress engine's order): start = max(ready, previous end).
 * Step = forward + max(backward, last bucket's end); efficiency = compute / step.
 * Prints one JSON line per (cap, compute rate) on rank 0. Buffers are SMPI_SHARED_MALLOC (no
 * data; the library skips its local work, as sim_allreduce without -c). */
#include <mpi.h>
#include <smpi/smpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp.h"

#define MAX_LIST 16
#define NLAYERS 4
#define MAX_BUCKETS 64

static const int dims[NLAYERS + 1] = {784, 2048, 2048, 2048, 10};

static int split_d(char *s, double *out) {
  int n = 0;
  for (char *t = strtok(s, ","); t && n < MAX_LIST; t = strtok(NULL, ",")) out[n++] = atof(t);
  return n;
}

/* Simulated time of one ddp_allreduce of `bytes` (auto), the slowest rank's. */
static double time_allreduce(ddp_comm_t *comm, float *buf, size_t bytes) {
  double dt, t;
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  ddp_allreduce(comm, DDP_IN_PLACE, buf, bytes / sizeof(float), DDP_F32, DDP_SUM, NULL);
  dt = MPI_Wtime() - t0;
  MPI_Allreduce(&dt, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return t;
}

int main(int argc, char **argv) {
  char caps_s[128] = "1,2,5,10,25,50,100", rates_s[128] = "72";
  int batch = 64;
  double first_mb = 1.0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-c") && i + 1 < argc) snprintf(caps_s, sizeof caps_s, "%s", argv[++i]);
    else if (!strcmp(argv[i], "-g") && i + 1 < argc) snprintf(rates_s, sizeof rates_s, "%s", argv[++i]);
    else if (!strcmp(argv[i], "-b") && i + 1 < argc) batch = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-f") && i + 1 < argc) first_mb = atof(argv[++i]);
  }
  setenv("MPIDDP_SIM_NOCOMPUTE", "1", 1);
  ddp_comm_t *comm = NULL;
  if (ddp_init(&argc, &argv, MPI_COMM_NULL, &comm) != DDP_OK) {
    fprintf(stderr, "sim_reducer: ddp_init: %s\n", ddp_last_error());
    return 1;
  }
  ddp_comm_info_t info;
  ddp_comm_info(comm, &info);
  double caps[MAX_LIST], rates[MAX_LIST];
  int nc = split_d(caps_s, caps), nr = split_d(rates_s, rates);
  /* Parameters in backward order: layer L's bias, then its weight; both ready when L's
   * backward ends. */
  size_t pbytes[2 * NLAYERS];
  int player[2 * NLAYERS], np = 0;
  size_t total = 0;
  for (int l = NLAYERS - 1; l >= 0; l--) {
    pbytes[np] = (size_t)dims[l + 1] * 4, player[np++] = l;
    pbytes[np] = (size_t)dims[l] * dims[l + 1] * 4, player[np++] = l;
    total += (size_t)(dims[l] + 1) * dims[l + 1] * 4;
  }
  float *buf = SMPI_SHARED_MALLOC(total);
  for (int c = 0; c < nc; c++) {
    /* Buckets: greedy in backward order; the first capped at first_mb. */
    size_t bbytes[MAX_BUCKETS];
    int blast[MAX_BUCKETS], nb = 0; /* blast: the last (lowest) layer whose backward it waits for */
    size_t cur = 0;
    for (int p = 0; p < np; p++) {
      size_t cap = (size_t)((nb == 0 ? first_mb : caps[c]) * 1048576.0);
      if (cur > 0 && cur + pbytes[p] > cap && nb < MAX_BUCKETS - 1) {
        bbytes[nb] = cur, nb++;
        cur = 0;
      }
      cur += pbytes[p];
      blast[nb] = player[p];
    }
    bbytes[nb++] = cur;
    double tb[MAX_BUCKETS];
    for (int b = 0; b < nb; b++) tb[b] = time_allreduce(comm, buf, bbytes[b]);
    for (int g = 0; g < nr; g++) {
      double flops_s = rates[g] * 1e9, fwd = 0, t = 0, done[NLAYERS], comm_end = 0, comm_sum = 0;
      for (int l = NLAYERS - 1; l >= 0; l--) {
        double f = (double)batch * dims[l] * dims[l + 1];
        fwd += 2 * f / flops_s;
        t += 4 * f / flops_s;
        done[l] = t;
      }
      for (int b = 0; b < nb; b++) {
        double start = done[blast[b]] > comm_end ? done[blast[b]] : comm_end;
        comm_end = start + tb[b];
        comm_sum += tb[b];
      }
      double bwd = t, step = fwd + (bwd > comm_end ? bwd : comm_end);
      if (info.rank == 0)
        printf("{\"ranks\":%d,\"nodes\":%d,\"cap_mb\":%g,\"first_mb\":%g,\"gflops\":%g,\"batch\":%d,"
               "\"buckets\":%d,\"compute_ms\":%.4f,\"allreduce_ms\":%.4f,\"exposed_ms\":%.4f,"
               "\"step_ms\":%.4f,\"efficiency\":%.4f}\n",
               info.size, info.nodes, caps[c], first_mb, rates[g], batch, nb, (fwd + bwd) * 1e3,
               comm_sum * 1e3, (step - fwd - bwd) * 1e3, step * 1e3, (fwd + bwd) / step);
      fflush(stdout);
    }
  }
  SMPI_SHARED_FREE(buf);
  ddp_finalize(&comm);
  return 0;
}
