/* Which algorithm runs: allreduce selection (the names, `auto`'s one threshold table for host
 * and device memory, forcing by opts->algo or DDP_ALLREDUCE_ALGO, the public query functions),
 * and ddp__coll_exec, which runs any collective on a transport, host or device memory alike. */
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
    case 1: return c->nodes == 1 && !x->cs->shm_disabled;
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

/* ---- running a collective ----------------------------------------------------------------- */
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
