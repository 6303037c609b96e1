/* Device layer hooks on the communicator (streams, staging buffers, NCCL): filled in by the
 * GPU work; host-only until then. */
#include "ddp_internal.h"

ddp_status_t ddp__device_comm_init(ddp__comm_t *c) {
  c->dev = NULL;
  return DDP_OK;
}

void ddp__device_comm_fini(ddp__comm_t *c) { c->dev = NULL; }
