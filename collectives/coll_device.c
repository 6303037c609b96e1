/* Device-memory collectives: transport choice (CUDA-aware MPI, staged, NCCL). Placeholder
 * until the GPU layer fills it in: device buffers are not supported yet. */
#include "coll_internal.h"

ddp_status_t ddp__coll_device_run(ddp__comm_t *c, struct ddp__coll *cs,
                                  const ddp__dev_call_t *call) {
  (void)c;
  (void)cs;
  if (!call) return ddp__error(DDP_EINVAL, "device collective: call is NULL");
  return ddp__error(DDP_ENOTSUP, "device collective %d: device buffers (DDP_MEM_CUDA) are not "
                                 "supported by this build yet", (int)call->kind);
}

#include "device_internal.h"

void ddp__devcoll_free(ddp__device_t *d) { (void)d; }
