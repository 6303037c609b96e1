/* Broadcast `tree`: binomial tree over point-to-point messages, for transports without a
 * broadcast of their own (device memory: CUDA-aware MPI, staged pinned chunks). */
#include "coll_internal.h"

#define TAG_BCAST 0x6401

ddp_status_t ddp__bcast_tree(ddp__ctx_t *x, void *buf, size_t bytes, int root) {
  int size = x->size, vr = (x->rank - root + size) % size;
  if (size == 1 || bytes == 0) return DDP_OK;
  /* Receive from the parent, then send to the children, largest first. */
  int mask = 1;
  while (mask < size) {
    if (vr & mask) {
      ddp__xreq_t q;
      DDP_TRY(x->xp->irecv(x, buf, bytes, (vr - mask + root) % size, TAG_BCAST, &q));
      DDP_TRY(x->xp->wait(x, 1, &q));
      break;
    }
    mask <<= 1;
  }
  ddp__xreq_t sq[32];
  int ns = 0;
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (vr + mask < size) {
      DDP_TRY(x->xp->isend(x, buf, bytes, (vr + mask + root) % size, TAG_BCAST, &sq[ns]));
      ns++;
    }
  }
  return x->xp->wait(x, ns, sq);
}
