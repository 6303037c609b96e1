/* GPU binding and capability probe at communicator creation: cudaSetDevice before anything else
 * touches CUDA, on the GPU given by DDP_DEVICE or else by the rank's index among the ranks of
 * its real host (virtual nodes, DDP_RANKS_PER_NODE, do not change which GPU a rank gets); the
 * PCI bus ids of the host's ranks compared (two ranks on one GPU rule NCCL out, and every rank
 * learns it at once instead of in a failing ncclCommInitRank); whether MPI can take device
 * pointers. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "device_internal.h"

#if DDP__CUDA_BACKEND
#include <cuda_runtime_api.h>
#endif
#if DDP_HAVE_MPI_EXT_CUDA
#include <mpi-ext.h>
#endif

/* The ranks of this rank's real host: the node communicator, unless nodes are virtual. */
static ddp_status_t host_comm(ddp__comm_t *c, MPI_Comm *host) {
  *host = c->node;
  if (c->virtual_nodes)
    DDP_MPI(MPI_Comm_split_type(c->world, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, host));
  DDP_MPI(MPI_Comm_rank(*host, &c->host_rank));
  return DDP_OK;
}

#if DDP__CUDA_BACKEND
/* What each rank tells the others of its host. */
typedef struct {
  int rank, device;
  char busid[32];
} gpu_slot_t;

/* Which ranks share a GPU with another rank of their host: an identical verdict and text on
 * every rank (c->gpu_shared, c->gpu_shared_reason), since every rank must refuse NCCL alike. */
static ddp_status_t compare_gpus(ddp__comm_t *c, MPI_Comm host) {
  int hsize = 0;
  DDP_MPI(MPI_Comm_size(host, &hsize));
  gpu_slot_t mine, *all = calloc((size_t)hsize, sizeof *all);
  if (!all) return ddp__error(DDP_ENOMEM, "device probe: out of memory");
  memset(&mine, 0, sizeof mine);
  mine.rank = c->rank;
  mine.device = c->device;
  snprintf(mine.busid, sizeof mine.busid, "%s", c->gpu_busid);
  int rc = MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, host);
  if (rc != MPI_SUCCESS) {
    free(all);
    return ddp__mpi_error(rc, "MPI_Allgather (GPU bus ids)");
  }
  int partner = -1;
  for (int i = 0; i < hsize && partner < 0; i++)
    if (all[i].rank != c->rank && mine.busid[0] && !strcmp(all[i].busid, mine.busid))
      partner = all[i].rank;
  free(all);
  int v[2] = {partner >= 0, partner >= 0 ? c->rank : INT_MAX}, r[2] = {0, 0};
  DDP_MPI(MPI_Allreduce(&v[0], &r[0], 1, MPI_INT, MPI_SUM, c->world));
  DDP_MPI(MPI_Allreduce(&v[1], &r[1], 1, MPI_INT, MPI_MIN, c->world));
  c->gpu_shared = r[0];
  if (r[0] == 0) return DDP_OK;
  char text[sizeof c->gpu_shared_reason];
  snprintf(text, sizeof text,
           "%d of %d ranks share their GPU with another rank of the same host (rank %d and "
           "rank %d on cuda:%d, PCI %s); NCCL needs one GPU per rank: start one rank per GPU, "
           "or use transport 'staged'", r[0], c->size, c->rank, partner, c->device, c->gpu_busid);
  DDP_MPI(MPI_Bcast(text, (int)sizeof text, MPI_CHAR, r[1], c->world));
  snprintf(c->gpu_shared_reason, sizeof c->gpu_shared_reason, "%s", text);
  return DDP_OK;
}

/* Binds this rank's GPU; *why says why there is none. */
static ddp_status_t bind_gpu(ddp__comm_t *c, char *why, size_t cap) {
  if (c->cfg.device == -2) {
    snprintf(why, cap, "DDP_DEVICE=none");
    return DDP_OK;
  }
  int n = 0;
  /* Without a driver cudaGetDeviceCount fails ("driver version is insufficient"): that means
   * no device, not an error (cleared, so no later call reports it). */
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    snprintf(why, cap, "no CUDA device visible (cudaGetDeviceCount: %s)", cudaGetErrorString(e));
    n = 0;
  } else if (n == 0) {
    snprintf(why, cap, "no CUDA device visible");
  }
  c->gpu_count = n;
  if (n == 0) return DDP_OK;
  if (c->cfg.device >= n)
    return ddp__error(DDP_ECONFIG, "DDP_DEVICE='%d' is invalid (allowed: 0..%d or 'none')",
                      c->cfg.device, n - 1);
  int dev = c->cfg.device >= 0 ? c->cfg.device : c->host_rank % n;
  e = cudaSetDevice(dev);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return ddp__error(DDP_ECUDA, "cudaSetDevice(%d) failed: %s", dev, cudaGetErrorString(e));
  }
  c->device = dev;
  if (cudaDeviceGetPCIBusId(c->gpu_busid, (int)sizeof c->gpu_busid, dev) != cudaSuccess) {
    (void)cudaGetLastError();
    snprintf(c->gpu_busid, sizeof c->gpu_busid, "device-%d", dev); /* still comparable */
  }
  return DDP_OK;
}
#endif

ddp_status_t ddp__device_probe(ddp__comm_t *c) {
  c->gpu_count = 0;
  c->device = -1;
  c->gpu_shared = 0;
  c->gpu_busid[0] = '\0';
  c->gpu_shared_reason[0] = '\0';
  MPI_Comm host = MPI_COMM_NULL;
  DDP_TRY(host_comm(c, &host));
  char why[160] = "this library was built without CUDA";
  ddp_status_t st = DDP_OK;
#if DDP__CUDA_BACKEND
  st = bind_gpu(c, why, sizeof why);
  /* Every rank of the host takes part, also one that failed or has no GPU ("" bus id). */
  ddp_status_t cmp = compare_gpus(c, host);
  if (st == DDP_OK) st = cmp;
#endif
  if (host != c->node) MPI_Comm_free(&host);
  DDP_TRY(st);
  if (c->cfg.require_gpu && c->device < 0)
    return ddp__error(DDP_ENOTSUP, "DDP_REQUIRE_GPU=1 but no CUDA device is bound: %s", why);
  /* CUDA-aware MPI: the MPI extension where the header has it, the environment overrides. */
  int aware = 0;
  const char *reason;
#if DDP_HAVE_MPI_EXT_CUDA && defined(MPIX_CUDA_AWARE_SUPPORT)
  aware = MPIX_Query_cuda_support();
  reason = aware ? "MPIX_Query_cuda_support() returned 1" : "MPIX_Query_cuda_support() returned 0 (MPI built without CUDA)";
#else
  reason = "mpi-ext.h has no MPIX_CUDA_AWARE_SUPPORT: assumed not CUDA-aware";
#endif
  if (c->cfg.cuda_aware >= 0) {
    aware = c->cfg.cuda_aware;
    reason = aware ? "DDP_CUDA_AWARE=1 (forced)" : "DDP_CUDA_AWARE=0 (forced)";
  }
  c->cuda_aware = aware;
  snprintf(c->cuda_aware_reason, sizeof c->cuda_aware_reason, "%s", reason);
  return DDP_OK;
}
