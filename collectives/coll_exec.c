/* Runs one collective call on a transport, host or device memory alike: allreduce with the
 * algorithm chosen for it (coll_select.c), the others with the transport's own collective or
 * the algorithms over point to point. Called by the engine (host memory) and the device
 * runners (devcoll/). */
#include "coll_internal.h"

ddp_status_t ddp__allreduce_exec(ddp__ctx_t *x, const ddp__algo_t *al, const void *send,
                                 void *recv, size_t count, ddp_dtype_t dtype, ddp_op_t op) {
  if (count == 0) return DDP_OK;
  ddp__ar_t a = {send, recv, count, dtype, op == DDP_AVG ? DDP_SUM : op};
  x->desc.algo = al->name;
  DDP_TRY(al->run(x, &a));
  if (op == DDP_AVG) DDP_TRY(x->xp->scale(x, recv, count, dtype, (double)x->size));
  return DDP_OK;
}

/* Any collective: allreduce with call->algo (or the selection); broadcast, allgather,
 * reduce-scatter and barrier with the transport's own collective where it has one (the host
 * transport: the MPI library's), else the algorithm over point-to-point. */
ddp_status_t ddp__coll_exec(ddp__ctx_t *x, const ddp__call_t *call) {
  ddp_algo_t want = call->opts ? call->opts->algo : DDP_ALGO_AUTO;
  size_t n = call->count;
  if (call->kind == DDP__COLL_ALLREDUCE) { /* the hot path first */
    const ddp__algo_t *al = call->algo;
    if (!al) {
      ddp__ar_t a = {call->send, call->recv, n, call->dtype,
                     call->op == DDP_AVG ? DDP_SUM : call->op};
      DDP_TRY(ddp__select(x->c, want, x, &a, &al));
    }
    return ddp__allreduce_exec(x, al, call->send, call->recv, n, call->dtype, call->op);
  }
  const ddp__xport_t *xp = x->xp;
  size_t es = call->kind == DDP__COLL_BARRIER ? 0 : ddp_dtype_size(call->dtype);
  size_t bytes = n * es;
  switch (call->kind) {
    case DDP__COLL_ALLREDUCE: break; /* above */
    case DDP__COLL_BROADCAST:
      x->desc.algo = xp->bcast ? "mpi" : "tree";
      return xp->bcast ? xp->bcast(x, call->recv, bytes, call->root)
                       : ddp__bcast_tree(x, call->recv, bytes, call->root);
    case DDP__COLL_ALLGATHER: {
      x->desc.algo = xp->allgather ? "mpi" : "ring";
      if (xp->allgather) return xp->allgather(x, call->send, call->recv, bytes);
      DDP_TRY(xp->copy(x, (char *)call->recv + (size_t)x->rank * bytes, call->send, bytes));
      return ddp__allgather_ring(x, call->recv, bytes);
    }
    case DDP__COLL_REDUCE_SCATTER: {
      if (n == 0) return DDP_OK;
      ddp_op_t op = call->op == DDP_AVG ? DDP_SUM : call->op;
      /* Both in-place forms, told apart only off rank 0 (there they coincide), so every rank
       * takes the same path for them: MPI's (send == recv, result in the first block) and
       * NCCL's (recv = send + rank*n, result in this rank's block). */
      char *own = (char *)call->send + (size_t)x->rank * bytes;
      int inplace = call->send == call->recv || call->recv == own;
      if (inplace && want != DDP_ALGO_MPI) {
        /* The ring's reduce-scatter on the input itself, the chunks rotated so that rank r
         * ends with block r (the ring leaves chunk r+1 on rank r); its scratch is two 256 KB
         * segments, never a full-size copy. */
        x->desc.algo = "ring";
        if (x->size > 1) {
          ddp__parts_t pt;
          DDP_TRY(ddp__parts_init(&pt, x->size, "reduce_scatter"));
          for (int k = 0; k < x->size; k++) {
            pt.offs[k] = (size_t)((k + x->size - 1) % x->size) * n;
            pt.lens[k] = n;
          }
          ddp_status_t st = ddp__ring_reduce_scatter(x, (void *)call->send, pt.offs, pt.lens,
                                                     call->dtype, op);
          ddp__parts_free(&pt);
          DDP_TRY(st);
        }
        DDP_TRY(xp->copy(x, call->recv, own, bytes));
      } else if (inplace && xp->reduce_scatter) {
        /* The transport's own (MPI's) in-place form leaves the result in the first block. */
        x->desc.algo = "mpi";
        DDP_TRY(xp->reduce_scatter(x, call->send, (void *)call->send, n, call->dtype, op));
        DDP_TRY(xp->copy(x, call->recv, call->send, bytes));
      } else if (xp->reduce_scatter) {
        x->desc.algo = "mpi";
        DDP_TRY(xp->reduce_scatter(x, call->send, call->recv, n, call->dtype, op));
      } else {
        size_t total = n * (size_t)x->size;
        ddp__ar_t a = {call->send, call->recv, total, call->dtype, op};
        const ddp__algo_t *al = NULL;
        DDP_TRY(ddp__select(x->c, want, x, &a, &al));
        x->desc.algo = al->name;
        DDP_TRY(ddp__reduce_scatter_allreduce(x, al, call->send, call->recv, n, call->dtype, op));
      }
      if (call->op == DDP_AVG) DDP_TRY(xp->scale(x, call->recv, n, call->dtype, (double)x->size));
      return DDP_OK;
    }
    case DDP__COLL_BARRIER:
      x->desc.algo = "mpi";
      if (!xp->barrier)
        return ddp__error(DDP_EINTERNAL, "transport %s has no barrier", xp->name);
      return xp->barrier(x);
  }
  return ddp__error(DDP_EINTERNAL, "collective kind %d is invalid", (int)call->kind);
}
