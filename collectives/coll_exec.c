/* Runs one collective call on a transport, host or device memory alike: allreduce with the
 * algorithm chosen for it (coll_select.c), the others with the transport's own collective or
 * the algorithms over point to point. Called by the engine (host memory) and the device
 * runners (devcoll/). */
#include "coll_internal.h"

/* Any collective: allreduce with call->algo (the selection only for device memory); broadcast, allgather,
 * reduce-scatter and barrier with the transport's own collective where it has one (the host
 * transport: the MPI library's), else the algorithm over point-to-point. */
ddp_status_t ddp__coll_exec(ddp__ctx_t *x, const ddp__call_t *call) {
  if (call->kind == DDP__COLL_ALLREDUCE) { /* the hot path first */
    const ddp__algo_t *al = call->algo;
    if (!al) DDP_TRY(ddp__select(x->c, call->opts.algo, x, &call->a, &al));
    return ddp__allreduce_run(x, al, &call->a, call->avg);
  }
  ddp_algo_t want = call->opts.algo;
  size_t n = call->a.count;
  const ddp__xport_t *xp = x->xp;
  size_t es = call->kind == DDP__COLL_BARRIER ? 0 : ddp_dtype_size(call->a.dtype);
  size_t bytes = n * es;
  switch (call->kind) {
    case DDP__COLL_ALLREDUCE: break; /* above */
    case DDP__COLL_BROADCAST:
      x->desc.algo = xp->bcast ? "mpi" : "tree";
      return xp->bcast ? xp->bcast(x, call->a.recv, bytes, call->root)
                       : ddp__bcast_tree(x, call->a.recv, bytes, call->root);
    case DDP__COLL_ALLGATHER: {
      x->desc.algo = xp->allgather ? "mpi" : "ring";
      if (xp->allgather) return xp->allgather(x, call->a.send, call->a.recv, bytes);
      DDP_TRY(xp->copy(x, (char *)call->a.recv + (size_t)x->rank * bytes, call->a.send, bytes));
      return ddp__allgather_ring(x, call->a.recv, bytes);
    }
    case DDP__COLL_REDUCE_SCATTER: {
      if (n == 0) return DDP_OK;
      ddp_op_t op = call->a.op;
      /* Both in-place forms, told apart only off rank 0 (there they coincide), so every rank
       * takes the same path for them: MPI's (send == recv, result in the first block) and
       * NCCL's (recv = send + rank*n, result in this rank's block). */
      char *own = (char *)call->a.send + (size_t)x->rank * bytes;
      int inplace = call->a.send == call->a.recv || call->a.recv == own;
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
          ddp_status_t st = ddp__ring_reduce_scatter(x, (void *)call->a.send, pt.offs, pt.lens,
                                                     call->a.dtype, op);
          ddp__parts_free(&pt);
          DDP_TRY(st);
        }
        DDP_TRY(xp->copy(x, call->a.recv, own, bytes));
      } else if (inplace && xp->reduce_scatter) {
        /* The transport's own (MPI's) in-place form leaves the result in the first block. */
        x->desc.algo = "mpi";
        DDP_TRY(xp->reduce_scatter(x, call->a.send, (void *)call->a.send, n, call->a.dtype, op));
        DDP_TRY(xp->copy(x, call->a.recv, call->a.send, bytes));
      } else if (xp->reduce_scatter) {
        x->desc.algo = "mpi";
        DDP_TRY(xp->reduce_scatter(x, call->a.send, call->a.recv, n, call->a.dtype, op));
      } else {
        size_t total = n * (size_t)x->size;
        ddp__ar_t a = {call->a.send, call->a.recv, total, call->a.dtype, op};
        const ddp__algo_t *al = NULL;
        DDP_TRY(ddp__select(x->c, want, x, &a, &al));
        x->desc.algo = al->name;
        DDP_TRY(ddp__reduce_scatter_allreduce(x, al, call->a.send, call->a.recv, n, call->a.dtype, op));
      }
      if (call->avg) DDP_TRY(xp->scale(x, call->a.recv, n, call->a.dtype, (double)x->size));
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
