/* Collectives state on the communicator (progress engine, shared pool): filled in by the
 * collectives work. */
#include "ddp_internal.h"

ddp_status_t ddp__coll_comm_init(ddp__comm_t *c) {
  c->coll = NULL;
  return DDP_OK;
}

void ddp__coll_comm_fini(ddp__comm_t *c) { c->coll = NULL; }
