/* Which algorithm runs: allreduce selection (the names, `auto`'s one threshold table for host
 * and device memory, forcing by opts->algo or DDP_ALLREDUCE_ALGO, the public query functions).
 * Running the chosen algorithm is coll_exec.c's. */
#include <string.h>

#include "coll_internal.h"

/* Every algorithm, in the order they are listed to users (ddp_algo_t order, after auto). */
static const ddp__algo_t *const algos[] = {&ddp__algo_mpi, &ddp__algo_ring, &ddp__algo_rhd,
                                           &ddp__algo_shm, &ddp__algo_hier};
#define NALGOS (sizeof algos / sizeof algos[0])
_Static_assert(NALGOS + 1 == DDP_ALGO_COUNT, "one descriptor per ddp_algo_t but auto");

static const char *const names[] = {"auto", "mpi", "ring", "rhd", "shm", "hier", NULL};

const char *const *ddp_allreduce_algos(void) { return names; }

static const ddp__algo_t *by_id(ddp_algo_t id) {
  for (size_t i = 0; i < NALGOS; i++)
    if (algos[i]->id == id) return algos[i];
  return NULL;
}

/* `auto`: the first row whose topology matches and whose byte limit is not exceeded wins;
 * the algorithm must also accept the case, else the next matching row is tried. Rows:
 *   topo 0: any, 1: one node with shared memory, 2: several nodes, 3: device memory (the
 *   algorithms over the CUDA-aware transport; the staged one runs the host rows on pinned
 *   chunks, NCCL its own), 4: several nodes of at least 4 ranks each. */
typedef struct {
  int topo;
  size_t max_bytes; /* inclusive; SIZE_MAX = no limit */
  const ddp__algo_t *algo;
} row_t;

/* Measured on the 2-core build machine (allreduce_bench, np 2 one node; np 4 as two virtual
 * nodes of 2): shm beat MPI at every size on one node; across (virtual) nodes MPI's own
 * algorithms were as fast as rhd/hier up to a few hundred KB and hier won from 1 MB. Across
 * hosts over TCP (emulated cluster, ci/cluster/bench.sh, 2x2 and 4x1 hosts, ob1 and UCX) the
 * `mpi` algorithm (MPI_Iallreduce) ran at 0.5-0.9x the speed of MPI_Allreduce up to 4 KB
 * (8-15 us more per call, with libnbc's binomial or recursive doubling alike) while rhd, point
 * to point in the same wait loop, matched it: small messages across nodes take rhd.
 * Many nodes of 4+ ranks (topo 4), from simulated fat trees of 8-core nodes at 64-1024 ranks
 * (scale/sweep.sh, docs/scale.md): hier - every local rank carrying a slice across nodes, so
 * no rank's stream shares the node's link with 7 copies of the same bytes - was as fast as rhd
 * or faster from 1 KB up (4 KB: 10.4 vs 17.0 us at 64 ranks, 19.2 vs 30.7 us at 256; equal
 * from 1 MB, where both run the same halving pattern), and rhd only won below (8 B: 8.7 vs
 * 10.9 us). */
static const row_t table[] = {
    {3, ((size_t)256 << 10) - 1, &ddp__algo_rhd},
    {3, SIZE_MAX, &ddp__algo_ring},
    {1, SIZE_MAX, &ddp__algo_shm},
    {4, 512, &ddp__algo_rhd},
    {4, SIZE_MAX, &ddp__algo_hier}, /* needs equal node sizes, else the next matching row */
    {2, (size_t)512 << 10, &ddp__algo_rhd},
    {2, SIZE_MAX, &ddp__algo_hier}, /* needs equal node sizes, else the next matching row */
    {2, (size_t)4 << 20, &ddp__algo_mpi},
    {2, SIZE_MAX, &ddp__algo_ring},
    {0, SIZE_MAX, &ddp__algo_mpi},
};

static int topo_matches(int topo, const ddp__ctx_t *x) {
  const ddp__comm_t *c = x->c;
  switch (topo) {
    case 1: return c->nodes == 1 && !x->shape->shm_disabled;
    case 2: return c->nodes > 1;
    case 4: return c->nodes > 1 && c->local_size >= 4;
    case 3: return x->mem != DDP_MEM_HOST;
    default: return 1;
  }
}

ddp_status_t ddp__select(ddp__comm_t *c, ddp_algo_t want, const ddp__ctx_t *x, const ddp__ar_t *a,
                         const ddp__algo_t **out) {
  const char *src = "opts->algo";
  if (want == DDP_ALGO_AUTO) {
    want = c->cfg.allreduce_algo;
    src = "DDP_ALLREDUCE_ALGO";
  }
  if (want != DDP_ALGO_AUTO) {
    const ddp__algo_t *al = by_id(want);
    if (!al)
      return ddp__error(DDP_EINVAL, "%s %d is not a ddp_algo_t (valid: 0..%d)", src, (int)want,
                        DDP_ALGO_COUNT - 1);
    const char *why = al->supports(x, a);
    if (why) {
      char valid[128];
      size_t o = 0;
      valid[0] = '\0';
      for (size_t i = 0; i < NALGOS && o < sizeof valid; i++)
        if (!algos[i]->supports(x, a))
          o += (size_t)snprintf(valid + o, sizeof valid - o, "%s%s", o ? ", " : "", algos[i]->name);
      return ddp__error(DDP_EINVAL, "%s '%s' cannot run this allreduce (%zu elements of %s in %s "
                        "memory): %s; usable here: auto, %s", src, al->name, a->count,
                        ddp_dtype_name(a->dtype), ddp_mem_name(x->mem), why, valid);
    }
    *out = al;
    return DDP_OK;
  }
  size_t bytes = a->count * ddp_dtype_size(a->dtype);
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
    if (!topo_matches(table[i].topo, x) || bytes > table[i].max_bytes) continue;
    const ddp__algo_t *al = table[i].algo;
    /* Simulated (docs/scale.md): `mpi` is whatever SMPI was configured with, by default a
     * linear reduce + broadcast that no real MPI runs, so auto keeps to its own algorithms. */
    if (DDP_SIMULATED && al == &ddp__algo_mpi) continue;
    if (!al->supports(x, a)) {
      *out = al;
      return DDP_OK;
    }
  }
  if (DDP_SIMULATED) {
    *out = bytes <= ((size_t)512 << 10) ? &ddp__algo_rhd : &ddp__algo_ring;
    return DDP_OK;
  }
  *out = &ddp__algo_mpi;
  return DDP_OK;
}

ddp_status_t ddp_allreduce_choice(ddp_comm_t *comm, const void *buf, size_t count,
                                  ddp_dtype_t dtype, const ddp_coll_opts_t *opts,
                                  const char **name) {
  ddp__comm_t *c = NULL;
  DDP_TRY(ddp__comm_get(comm, "comm", &c));
  DDP_CHECK_ARG(name != NULL, "name is NULL");
  DDP_CHECK_ARG((int)dtype >= 0 && dtype < DDP_DTYPE_COUNT, "dtype %d is not a ddp_dtype_t",
                (int)dtype);
  ddp_mem_t mem = opts ? opts->mem : DDP_MEM_HOST;
  DDP_CHECK_ARG((int)mem >= 0 && mem < DDP_MEM_COUNT, "opts->mem %d is not a ddp_mem_t", (int)mem);
  if (mem != DDP_MEM_HOST) {
    *name = "device";
    return DDP_OK;
  }
  ddp_algo_t want = opts ? opts->algo : DDP_ALGO_AUTO;
  DDP_CHECK_ARG((unsigned)want < DDP_ALGO_COUNT, "opts->algo %d is not a ddp_algo_t (valid: 0..%d)",
                (int)want, DDP_ALGO_COUNT - 1);
  ddp__ctx_t x;
  ddp__ctx_world(&x, c, "allreduce", count * ddp_dtype_size(dtype), -1);
  ddp__ar_t a = {buf, (void *)buf, count, dtype, DDP_SUM};
  const ddp__algo_t *al = NULL;
  DDP_TRY(ddp__select(c, want, &x, &a, &al));
  *name = al->name;
  return DDP_OK;
}
