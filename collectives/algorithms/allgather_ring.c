/* Allgather `ring`: size-1 steps, each passing one rank's block to the right, for transports
 * without an allgather of their own. In place: this rank's block is already at
 * recv + rank * blk. */
#include "coll_internal.h"

#define TAG_AG 0x6402

ddp_status_t ddp__allgather_ring(ddp__ctx_t *x, void *recv, size_t blk) {
  int size = x->size, rank = x->rank;
  if (size == 1 || blk == 0) return DDP_OK;
  int right = (rank + 1) % size, left = (rank - 1 + size) % size;
  char *b = recv;
  for (int s = 0; s < size - 1; s++) {
    int sb = (rank - s + size) % size, rb = (rank - s - 1 + size) % size;
    ddp__xreq_t q[2];
    DDP_TRY(x->xp->irecv(x, b + (size_t)rb * blk, blk, left, TAG_AG, &q[0]));
    DDP_TRY(x->xp->isend(x, b + (size_t)sb * blk, blk, right, TAG_AG, &q[1]));
    DDP_TRY(x->xp->wait(x, 2, q));
  }
  return DDP_OK;
}
