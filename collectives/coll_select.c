/* Allreduce algorithm selection: the names, `auto`'s threshold table, forcing by
 * opts->algo or DDP_ALLREDUCE_ALGO, and the public query functions. */
#include <string.h>

#include "coll_internal.h"

/* Every algorithm, in the order they are listed to users. */
static const ddp__algo_t *const algos[] = {&ddp__algo_mpi, &ddp__algo_ring, &ddp__algo_rhd,
                                           &ddp__algo_shm, &ddp__algo_hier};
#define NALGOS (sizeof algos / sizeof algos[0])

static const char *const names[] = {"auto", "mpi", "ring", "rhd", "shm", "hier", NULL};

const char *const *ddp_allreduce_algos(void) { return names; }

static void valid_list(char *buf, size_t cap) {
  size_t o = (size_t)snprintf(buf, cap, "auto");
  for (size_t i = 0; i < NALGOS && o < cap; i++)
    o += (size_t)snprintf(buf + o, cap - o, ", %s", algos[i]->name);
}

static const ddp__algo_t *by_name(const char *name) {
  for (size_t i = 0; i < NALGOS; i++)
    if (!strcmp(algos[i]->name, name)) return algos[i];
  return NULL;
}

/* `auto`: the first row whose topology matches and whose byte limit is not exceeded wins;
 * the algorithm must also accept the case, else the next matching row is tried. Rows:
 *   topo 0: any, 1: one node with shared memory, 2: several nodes. */
typedef struct {
  int topo;
  size_t max_bytes; /* inclusive; SIZE_MAX = no limit */
  const char *algo;
} row_t;

/* Measured on the 2-core build machine (allreduce_bench, np 2 one node; np 4 as two virtual
 * nodes of 2): shm beat MPI at every size on one node; across (virtual) nodes MPI's own
 * algorithms were as fast as rhd/hier up to a few hundred KB and hier won from 1 MB. Across
 * hosts over TCP (emulated cluster, ci/cluster/bench.sh, 2x2 and 4x1 hosts, ob1 and UCX) the
 * `mpi` algorithm (MPI_Iallreduce) ran at 0.5-0.9x the speed of MPI_Allreduce up to 4 KB
 * (8-15 us more per call, with libnbc's binomial or recursive doubling alike) while rhd, point
 * to point in the same wait loop, matched it: small messages across nodes take rhd. */
static const row_t table[] = {
    {1, SIZE_MAX, "shm"},
    {2, (size_t)512 << 10, "rhd"},
    {2, SIZE_MAX, "hier"},       /* needs equal node sizes, else the next matching row */
    {2, (size_t)4 << 20, "mpi"},
    {2, SIZE_MAX, "ring"},
    {0, SIZE_MAX, "mpi"},
};

static int topo_matches(int topo, const ddp__ctx_t *x) {
  const ddp__comm_t *c = x->c;
  switch (topo) {
    case 1: return c->nodes == 1 && !x->cs->shm_disabled;
    case 2: return c->nodes > 1;
    default: return 1;
  }
}

ddp_status_t ddp__select(ddp__comm_t *c, const char *want, const ddp__ctx_t *x, const ddp__ar_t *a,
                         const ddp__algo_t **out) {
  const char *src = "opts->algo";
  if (!want || !*want || !strcmp(want, "auto")) {
    want = c->cfg.allreduce_algo;
    src = "DDP_ALLREDUCE_ALGO";
  }
  char valid[128];
  if (want && *want && strcmp(want, "auto") != 0) {
    const ddp__algo_t *al = by_name(want);
    if (!al) {
      valid_list(valid, sizeof valid);
      return ddp__error(DDP_EINVAL, "%s '%s' is not an allreduce algorithm (valid: %s)", src, want,
                        valid);
    }
    const char *why = al->supports(x, a);
    if (why) {
      size_t o = 0;
      valid[0] = '\0';
      for (size_t i = 0; i < NALGOS && o < sizeof valid; i++)
        if (!algos[i]->supports(x, a))
          o += (size_t)snprintf(valid + o, sizeof valid - o, "%s%s", o ? ", " : "", algos[i]->name);
      return ddp__error(DDP_EINVAL, "%s '%s' cannot run this allreduce (%zu elements of %s): %s; "
                        "usable here: auto, %s", src, want, a->count, ddp_dtype_name(a->dtype), why,
                        valid);
    }
    *out = al;
    return DDP_OK;
  }
  size_t bytes = a->count * ddp_dtype_size(a->dtype);
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
    if (!topo_matches(table[i].topo, x) || bytes > table[i].max_bytes) continue;
    const ddp__algo_t *al = by_name(table[i].algo);
    if (al && !al->supports(x, a)) {
      *out = al;
      return DDP_OK;
    }
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
  ddp__ctx_t x;
  ddp__ctx_world(&x, c, "allreduce", count * ddp_dtype_size(dtype), -1);
  ddp__ar_t a = {buf, (void *)buf, count, dtype, DDP_SUM};
  const ddp__algo_t *al = NULL;
  DDP_TRY(ddp__select(c, opts ? opts->algo : NULL, &x, &a, &al));
  *name = al->name;
  return DDP_OK;
}
