/* Copy bandwidth of the machine and the memory traffic model of the allreduce algorithms
 * (membw.h; the model is explained in docs/collectives.md, "The memory bound"). */
#include "membw.h"

#include <stdlib.h>
#include <string.h>

#include "train_util.h"

#define MEMBW_DEFAULT_BYTES ((size_t)128 << 20)
#define MEMBW_TRY(expr)                     \
  do {                                      \
    ddp_status_t membw_st_ = (expr);        \
    if (membw_st_ != DDP_OK) return membw_st_; \
  } while (0)

#define MEMBW_PIECE_BYTES ((size_t)256 << 10)

/* Best time of `reps` rounds of two copies of `bytes`: one memcpy of the whole buffer (glibc
 * streams that size with non-temporal stores) and memcpy piece by piece of 256 KB (ordinary
 * stores, as the algorithms' kernels do). Neither is always the faster: on the measured VM the
 * whole copy ran at 12-18 GB/s and the pieces at 12-19, by turns. With `together`, every rank
 * starts each copy at a barrier and the slowest rank's time counts (collective then). */
static ddp_status_t best_copy(ddp_comm_t *comm, char *dst, const char *src, size_t bytes, int reps,
                              int together, double *best) {
  *best = 0.0;
  for (int k = 0; k < 2 * reps; k++) {
    if (together) MEMBW_TRY(ddp_barrier(comm));
    double t0 = train_now();
    if (k % 2 == 0) memcpy(dst, src, bytes);
    else
      for (size_t o = 0; o < bytes; o += MEMBW_PIECE_BYTES)
        memcpy(dst + o, src + o, bytes - o < MEMBW_PIECE_BYTES ? bytes - o : MEMBW_PIECE_BYTES);
    double dt = train_now() - t0;
    if (together) MEMBW_TRY(ddp_allreduce(comm, DDP_IN_PLACE, &dt, 1, DDP_F64, DDP_MAX, NULL));
    if (k == 0 || dt < *best) *best = dt;
  }
  return DDP_OK;
}

ddp_status_t membw_measure(ddp_comm_t *comm, size_t bytes, int reps, membw_t *out) {
  if (!comm || !out || reps < 1) return DDP_EINVAL;
  if (bytes == 0) bytes = MEMBW_DEFAULT_BYTES;
  int rank = 0, size = 1;
  MEMBW_TRY(ddp_comm_rank(comm, &rank));
  MEMBW_TRY(ddp_comm_size(comm, &size));
  char *src = malloc(bytes), *dst = malloc(bytes);
  int64_t fail = !src || !dst;
  ddp_status_t st = ddp_allreduce(comm, DDP_IN_PLACE, &fail, 1, DDP_I64, DDP_MAX, NULL);
  if (st == DDP_OK && fail) st = DDP_ENOMEM;
  double one = 0.0, all = 0.0;
  if (st == DDP_OK) {
    /* Touch every page first, so no page fault is timed. */
    memset(src, 0x5a, bytes);
    memset(dst, 0, bytes);
    st = ddp_barrier(comm);
  }
  if (st == DDP_OK && rank == 0) st = best_copy(comm, dst, src, bytes, reps, 0, &one);
  if (st == DDP_OK) st = ddp_broadcast(comm, &one, 1, DDP_F64, 0, NULL);
  if (st == DDP_OK) st = best_copy(comm, dst, src, bytes, reps, 1, &all);
  free(src);
  free(dst);
  if (st != DDP_OK) return st;
  out->bytes = bytes;
  out->single_gbs = one > 0.0 ? (double)bytes / one / 1e9 : 0.0;
  out->all_gbs = all > 0.0 ? (double)bytes / all / 1e9 : 0.0;
  out->ranks = size;
  ddp_comm_info_t info;
  out->local = ddp_comm_info(comm, &info) == DDP_OK ? info.local_size : size;
  return DDP_OK;
}

/* Reduce-scatter + allgather over point to point (ring; the MPI's large-message schedule),
 * in place, per rank over p ranks: p-1 steps each move n/p. Reduce-scatter step: read the
 * peer's chunk (single copy into a cache-resident segment), read this rank's chunk, write
 * the sum back: 2 reads + 1 write of n/p. Allgather step: read the peer's chunk, write it
 * here: 1 + 1. Total 5 (p-1)/p n. */
static double rs_ag_traffic(double n, int p) { return p > 1 ? 5.0 * (p - 1) / p * n : 0.0; }

double membw_allreduce_traffic(const char *algo, size_t bytes, int np, int local, int inplace,
                               int pooled) {
  if (!algo || np < 1) return -1.0;
  double n = (double)bytes;
  int L = local > 0 && local <= np ? local : np, nodes = (np + L - 1) / L;
  /* Out of place, the point-to-point algorithms (and Open MPI's blocking call) first copy
   * send to recv: n read + n written. */
  double copy = inplace ? 0.0 : 2.0 * n;
  if (!strcmp(algo, "shm")) {
    /* Rank r reduces slice r (n/p) of every rank's input: reads p slices = n; writes its
     * result slice and pushes it, still in cache, to the p-1 peers' results: writes n.
     * Pool buffers (zero copy) and private ones pulled and pushed by cross-memory attach
     * move the same bytes; in or out of place alike. */
    return np > 1 ? 2.0 * n : copy;
  }
  if (!strcmp(algo, "ring") || !strcmp(algo, "mpi") || !strcmp(algo, "raw"))
    return copy + rs_ag_traffic(n, np);
  if (!strcmp(algo, "rhd")) {
    /* Rabenseifner over p' = the largest power of two <= p. Halving levels exchange
     * n/2 + n/4 + ... = n (p'-1)/p': the received half lands in a scratch of the piece's size
     * (not cache-resident for large n), so per byte exchanged: read the peer's, write scratch,
     * read scratch and own, write own = 5; doubling levels: read the peer's, write own = 2.
     * A folded rank (p not a power of two) also sends or receives the whole vector and its
     * result: about 3n more on the busier rank of a pair. */
    int pof2 = 1;
    while (pof2 * 2 <= np) pof2 *= 2;
    double t = pof2 > 1 ? 7.0 * (pof2 - 1) / pof2 * n : 0.0;
    if (pof2 != np) t += 3.0 * n;
    return copy + t;
  }
  if (!strcmp(algo, "hier")) {
    /* Node reduce-scatter through shm (read n, write n/L), every local rank allreduces its
     * slice n/L with its peers on the other nodes (as ring), node allgather (read and write
     * (L-1)/L n). Private buffers are staged: the slices peers read are copied in
     * ((L-1)/L n read and written) and this rank's result slice is copied out (n/L). */
    double t = n + n / L + 2.0 * (L - 1) / L * n + rs_ag_traffic(n / L, nodes);
    if (!pooled) t += 2.0 * (L - 1) / L * n + 2.0 * n / L;
    return t; /* out of place it reads send directly: no copy */
  }
  return -1.0;
}

double membw_bound_us(const membw_t *m, double traffic) {
  if (!m || m->all_gbs <= 0.0 || traffic < 0.0) return 0.0;
  return traffic / (2.0 * m->all_gbs * 1e9) * 1e6;
}

double membw_percent(const membw_t *m, const char *algo, size_t bytes, int inplace, int pooled,
                     double time_us) {
  double t = membw_allreduce_traffic(algo, bytes, m ? m->ranks : 0, m ? m->local : 0, inplace, pooled);
  double bound = membw_bound_us(m, t);
  return bound > 0.0 && time_us > 0.0 ? 100.0 * bound / time_us : -1.0;
}
