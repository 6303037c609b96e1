/* ddp_info: the environment check to run first. Under mpirun -np N, rank 0 prints the library
 * and MPI versions, thread level, world size, nodes, the BLAS and its kernel, and one line per
 * rank (host, local rank, GPU, BLAS kernel and a one-second sgemm rate measured on all ranks at
 * once); exit code 0 when init and a barrier succeed. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "app_blas.h"
#include "app_check.h"
#include "app_opts.h"
#include "ddp.h"

static const char *level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    default: return "?";
  }
}

int main(int argc, char **argv) {
  app_blas_auto(argv); /* before MPI starts: may re-execute with a faster OpenBLAS kernel */
  double gemm_s = 1.0;
  const app_opt_t table[] = {APP_DOUBLE("--gemm-seconds", &gemm_s, 0.0, 60.0), APP_OPTS_END};
  int pr = app_opts_parse("ddp_info", table, argc, argv, stderr);
  if (pr == APP_OPTS_HELP) {
    printf("usage: mpirun -np N ddp_info [--gemm-seconds S]\n"
           "  Initialises mpiddp on every rank and prints (rank 0) the library and MPI versions,\n"
           "  the thread level, world size, nodes, shared memory, CUDA-aware MPI, NCCL, the BLAS\n"
           "  and its kernel, and one line per rank (host, node, local rank, pid, bound GPU,\n"
           "  BLAS kernel, single-thread sgemm GFLOP/s measured on all ranks at once for S\n"
           "  seconds, default 1, 0 skips it). Exit code 0 when init and a barrier succeed.\n"
           "  DDP_* environment variables apply (see README).\n");
    return 0;
  }
  if (pr != APP_OPTS_OK) return 2;
  ddp_comm_t *comm = NULL;
  APP_CHECK(ddp_init(&argc, &argv, MPI_COMM_WORLD, &comm));
  ddp_comm_info_t info;
  APP_CHECK(ddp_comm_info(comm, &info));
  MPI_Comm world;
  APP_CHECK(ddp_comm_mpi(comm, DDP_COMM_WORLD, &world));

  /* The GEMM rate with every rank computing at once: what a data-parallel step sees (ranks
   * sharing cores or memory bandwidth slow each other down). One BLAS thread per rank. */
  openblas_set_num_threads(1);
  char gflops[16] = "-";
  if (gemm_s > 0.0) {
    MPI_Barrier(world);
    double r = app_blas_sgemm_gflops(gemm_s);
    if (r > 0.0) snprintf(gflops, sizeof gflops, "%.1f", r);
  }

  /* One fixed-size row per rank, gathered to rank 0 so the table prints in rank order. */
  enum { ROW = 192 };
  char row[ROW];
  char gpu[32];
  if (info.device >= 0) snprintf(gpu, sizeof gpu, "%d of %d", info.device, info.gpu_count);
  else snprintf(gpu, sizeof gpu, "none (host mode)");
  char local[24];
  snprintf(local, sizeof local, "%d/%d", info.local_rank, info.local_size);
  const char *core = openblas_get_corename();
  snprintf(row, sizeof row, "%6d  %-24.24s %5d  %10s %8d  %-16.16s  %-12.12s %9s", info.rank,
           info.host, info.node, local, (int)getpid(), gpu, core ? core : "?", gflops);
  static char all_rows[ROW * 64];
  char *rows = info.size <= 64 ? all_rows : NULL;
  int rc = MPI_Gather(row, ROW, MPI_CHAR, rows, ROW, MPI_CHAR, 0, world);
  if (rc != MPI_SUCCESS) {
    fprintf(stderr, "ddp_info: MPI_Gather failed\n");
    return 1;
  }

  if (info.rank == 0) {
    char mpiver[256];
    APP_CHECK(ddp_mpi_library_version(mpiver, sizeof mpiver));
    printf("# mpiddp %s (CUDA %s, NCCL %s)\n", ddp_version(), DDP_HAVE_CUDA ? "built" : "not built",
           DDP_HAVE_NCCL ? "built" : "not built");
    printf("# MPI library      : %s\n", mpiver);
    printf("# thread level     : %s%s\n", level_name(info.thread_level),
           info.thread_level < MPI_THREAD_MULTIPLE ? " (MPI calls kept on one thread)" : "");
    printf("# world size       : %d\n", info.size);
    printf("# nodes            : %d%s\n", info.nodes, info.virtual_nodes ? " (virtual: DDP_RANKS_PER_NODE)" : "");
    printf("# shared memory    : %s\n", info.shm ? "yes (MPI_Win_allocate_shared works)" : "no");
    printf("# CUDA-aware MPI   : %s (%s)\n", info.cuda_aware ? "yes" : "no", info.cuda_aware_reason);
    printf("# NCCL             : %s\n", info.nccl ? "yes" : "no");
    char blas[256], cpu[160];
    app_blas_describe(blas, sizeof blas);
    app_cpu_describe(cpu, sizeof cpu);
    printf("# CPU (rank 0)     : %s\n", cpu);
    printf("# BLAS (rank 0)    : %s\n", blas);
    printf("#\n# %6s  %-24s %5s  %10s %8s  %-16s  %-12s %9s\n", "rank", "host", "node", "local/size",
           "pid", "gpu", "blas kernel", "sgemm GF/s");
    if (info.size <= 64)
      for (int r = 0; r < info.size; r++) printf("  %s\n", all_rows + (size_t)r * ROW);
    else
      printf("   (%d ranks: per-rank table shown for up to 64)\n", info.size);
  }
  /* The library's own barrier: it exercises the collectives layer and its progress engine. */
  ddp_status_t bst = ddp_barrier(comm);
  if (bst != DDP_OK) {
    fprintf(stderr, "ddp_info: barrier failed: %s\n", ddp_last_error());
    return 1;
  }
  if (info.rank == 0) {
    if (gemm_s > 0.0)
      printf("# sgemm GF/s: 64x2048 by 2048x2048 (W-DDP's hidden layer), one thread per rank, all "
             "ranks at once for %g s\n", gemm_s);
    printf("# init and barrier: OK\n");
  }
  APP_CHECK(ddp_finalize(&comm));
  return 0;
}
