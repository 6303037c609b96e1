/* Reduce-scatter `allreduce`: an allreduce of the whole input (size * count elements) into the
 * transport's scratch slot 4, then this rank's block copied out, for transports without a
 * reduce-scatter of their own. `al` is the allreduce algorithm; op is never DDP_AVG. */
#include "coll_internal.h"

ddp_status_t ddp__reduce_scatter_allreduce(ddp__ctx_t *x, const ddp__algo_t *al,
                                           const void *send, void *recv, size_t count,
                                           ddp_dtype_t dtype, ddp_op_t op) {
  size_t es = ddp_dtype_size(dtype), total = count * (size_t)x->size;
  void *tmp = NULL;
  DDP_TRY(x->xp->scratch(x, 4, total * es, &tmp));
  ddp__ar_t a = {send, tmp, total, dtype, op};
  DDP_TRY(al->run(x, &a));
  return x->xp->copy(x, recv, (char *)tmp + (size_t)x->rank * count * es, count * es);
}
