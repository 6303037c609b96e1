/* Algorithm `mpi`: the transport's own allreduce (the host transport's is the MPI library's
 * MPI_Allreduce / MPI_Iallreduce under the watchdog: transports/coll_mpi_coll.c), i.e. what an
 * application calling MPI_Allreduce gets. Its body stays in the transport: choosing between
 * the blocking and the non-blocking call, chunking counts above INT_MAX and the watch are
 * about MPI handles, which an algorithm file never names (ci/check-layers.sh). */
#include "coll_internal.h"

static const char *mpi_supports(const ddp__ctx_t *x, const ddp__ar_t *a) {
  (void)a;
  if (x->mem != DDP_MEM_HOST || !x->xp->allreduce)
    return "needs host memory (MPI's own collectives do not take device buffers)";
  return NULL;
}

static ddp_status_t mpi_run(ddp__ctx_t *x, const ddp__ar_t *a) { return x->xp->allreduce(x, a); }

const ddp__algo_t ddp__algo_mpi = {"mpi", DDP_ALGO_MPI, mpi_supports, mpi_run};
