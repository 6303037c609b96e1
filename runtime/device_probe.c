/* GPU binding and capability probe at communicator creation: cudaSetDevice(local_rank % ndev)
 * before anything else touches CUDA, and whether MPI can take device pointers. */
#include <string.h>

#include "ddp_internal.h"

#if DDP_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#if DDP_HAVE_MPI_EXT_CUDA
#include <mpi-ext.h>
#endif

ddp_status_t ddp__device_probe(ddp__comm_t *c);

ddp_status_t ddp__device_probe(ddp__comm_t *c) {
  c->gpu_count = 0;
  c->device = -1;
#if DDP_HAVE_CUDA
  if (c->cfg.device != -2) {
    int n = 0;
    /* Without a driver cudaGetDeviceCount fails ("driver version is insufficient"): that
     * means no device, not an error. */
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();
      n = 0;
    }
    c->gpu_count = n;
    if (c->cfg.device >= 0 && c->cfg.device >= n && n > 0)
      return ddp__error(DDP_ECONFIG, "DDP_DEVICE='%d' is invalid (allowed: 0..%d or 'none')",
                        c->cfg.device, n - 1);
    if (n > 0) {
      int dev = c->cfg.device >= 0 ? c->cfg.device : c->local_rank % n;
      cudaError_t e = cudaSetDevice(dev);
      if (e != cudaSuccess)
        return ddp__error(DDP_ECUDA, "cudaSetDevice(%d) failed: %s", dev, cudaGetErrorString(e));
      c->device = dev;
    }
  }
#endif
  /* CUDA-aware MPI: the MPI extension where the header has it, the environment overrides. */
  int aware = 0;
  const char *why;
#if DDP_HAVE_MPI_EXT_CUDA && defined(MPIX_CUDA_AWARE_SUPPORT)
  aware = MPIX_Query_cuda_support();
  why = aware ? "MPIX_Query_cuda_support() returned 1" : "MPIX_Query_cuda_support() returned 0 (MPI built without CUDA)";
#else
  why = "mpi-ext.h has no MPIX_CUDA_AWARE_SUPPORT: assumed not CUDA-aware";
#endif
  if (c->cfg.cuda_aware >= 0) {
    aware = c->cfg.cuda_aware;
    why = aware ? "DDP_CUDA_AWARE=1 (forced)" : "DDP_CUDA_AWARE=0 (forced)";
  }
  c->cuda_aware = aware;
  snprintf(c->cuda_aware_reason, sizeof c->cuda_aware_reason, "%s", why);
  return DDP_OK;
}
