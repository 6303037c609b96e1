/* Collectives state on the communicator: the layer's own duplicates of the world, node and
 * cross-node communicators, the progress engine, f16/bf16 MPI types, the node-shared pool.
 * Created by comm create (collective), torn down by comm destroy (collective). Also the
 * communicator's public constructors, which pass the core the device and collectives hooks. */
#include <stdlib.h>

#include "coll_state.h"
#include "device_internal.h"

static void free_state(ddp__coll_t *cs) {
  ddp__coll_mpi_types_free(cs);
  free(cs->shape.cross_world);
  for (int i = 0; i < DDP__SCRATCH_SLOTS; i++) free(cs->scratch[i]);
  if (cs->poolcomm != MPI_COMM_NULL) MPI_Comm_free(&cs->poolcomm);
  if (cs->cross != MPI_COMM_NULL) MPI_Comm_free(&cs->cross);
  if (cs->node != MPI_COMM_NULL) MPI_Comm_free(&cs->node);
  if (cs->world != MPI_COMM_NULL) MPI_Comm_free(&cs->world);
  pthread_mutex_destroy(&cs->mu);
  pthread_mutex_destroy(&cs->exec);
  pthread_mutex_destroy(&cs->pool_mu);
  pthread_cond_destroy(&cs->cv_work);
  pthread_cond_destroy(&cs->cv_done);
  free(cs);
}

static ddp_status_t dup_comm(MPI_Comm in, MPI_Comm *out, const char *what) {
  int rc = MPI_Comm_dup(in, out);
  if (rc != MPI_SUCCESS) {
    *out = MPI_COMM_NULL;
    return ddp__mpi_error(rc, what);
  }
  MPI_Comm_set_errhandler(*out, MPI_ERRORS_RETURN);
  return DDP_OK;
}

/* World rank of each rank of the cross-node communicator, so that the watchdog names world
 * ranks when hier's cross-node step waits. Local (no communication). */
static ddp_status_t cross_world_ranks(ddp__coll_t *cs) {
  int n = cs->shape.cross_size;
  int *idx = malloc((size_t)n * sizeof *idx);
  cs->shape.cross_world = malloc((size_t)n * sizeof *cs->shape.cross_world);
  MPI_Group gc = MPI_GROUP_NULL, gw = MPI_GROUP_NULL;
  ddp_status_t st = (idx && cs->shape.cross_world) ? DDP_OK
                                              : ddp__error(DDP_ENOMEM, "collectives: out of memory");
  if (st == DDP_OK) {
    for (int i = 0; i < n; i++) idx[i] = i;
    int rc = MPI_Comm_group(cs->cross, &gc);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_group(cs->world, &gw);
    if (rc == MPI_SUCCESS) rc = MPI_Group_translate_ranks(gc, n, idx, gw, cs->shape.cross_world);
    if (rc != MPI_SUCCESS) st = ddp__mpi_error(rc, "MPI_Group_translate_ranks (cross-node ranks)");
  }
  if (gc != MPI_GROUP_NULL) MPI_Group_free(&gc);
  if (gw != MPI_GROUP_NULL) MPI_Group_free(&gw);
  free(idx);
  return st;
}

ddp_status_t ddp__coll_comm_init(ddp__comm_t *c) {
  c->coll = NULL;
  ddp__coll_t *cs = calloc(1, sizeof *cs);
  if (!cs) return ddp__error(DDP_ENOMEM, "collectives: out of memory");
  cs->c = c;
  cs->world = cs->node = cs->cross = cs->poolcomm = MPI_COMM_NULL;
  pthread_mutex_init(&cs->mu, NULL);
  pthread_mutex_init(&cs->exec, NULL);
  pthread_mutex_init(&cs->pool_mu, NULL);
  pthread_cond_init(&cs->cv_work, NULL);
  pthread_cond_init(&cs->cv_done, NULL);
  cs->shape.shm_disabled = !c->shm_ok;
  /* Simulated sweeps only (scale/sim_allreduce.c without -c): the buffers are SMPI's shared
   * allocations whose contents mean nothing, and local reduce/copy work costs no simulated
   * time, so the host transport skips it (see coll_xport_host.c). */
  if (DDP_SIMULATED) {
    const char *v = getenv("MPIDDP_SIM_NOCOMPUTE");
    cs->sim_nocompute = v && v[0] == '1';
  }
  ddp_status_t st = dup_comm(c->world, &cs->world, "MPI_Comm_dup (collectives world)");
  if (st == DDP_OK) st = dup_comm(c->node, &cs->node, "MPI_Comm_dup (collectives node)");
  if (st == DDP_OK) st = dup_comm(c->cross, &cs->cross, "MPI_Comm_dup (collectives cross)");
  if (st == DDP_OK) st = dup_comm(c->node, &cs->poolcomm, "MPI_Comm_dup (collectives pool)");
  if (st == DDP_OK) ddp__coll_groups(cs);
  if (st == DDP_OK) st = ddp__coll_mpi_types(cs);
  if (st == DDP_OK) {
    /* hier needs the same local size on every node: a world-wide fact, agreed here once. */
    int v[2] = {c->local_size, -c->local_size}, m[2] = {0, 0};
    int rc = MPI_Allreduce(v, m, 2, MPI_INT, MPI_MAX, cs->world);
    if (rc != MPI_SUCCESS) st = ddp__mpi_error(rc, "MPI_Allreduce (node sizes)");
    cs->shape.uniform_nodes = m[0] == -m[1];
    MPI_Comm_rank(cs->cross, &cs->shape.cross_rank);
    MPI_Comm_size(cs->cross, &cs->shape.cross_size);
    /* How many ranks share this machine (decides how long shared-memory waits spin). */
    MPI_Comm host = MPI_COMM_NULL;
    cs->host_ranks = c->local_size;
    if (st == DDP_OK &&
        MPI_Comm_split_type(cs->world, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &host) ==
            MPI_SUCCESS) {
      MPI_Comm_size(host, &cs->host_ranks);
      MPI_Comm_free(&host);
    }
    /* Local, after the last collective here: a failure on one rank cannot strand the others. */
    if (st == DDP_OK) st = cross_world_ranks(cs);
  }
  if (st != DDP_OK) {
    free_state(cs);
    return st;
  }
  c->coll = cs;
  return DDP_OK;
}

void ddp__coll_comm_fini(ddp__comm_t *c) {
  ddp__coll_t *cs = c->coll;
  if (cs) {
    ddp__coll_mpi_watch_stop(cs);
    ddp__coll_engine_stop(cs);
    /* After the engine stopped: it may have been running a device collective. */
    ddp__devcoll_free(cs);
    ddp__shm_free(cs);
    ddp__pool_free_all(cs);
    free_state(cs);
    c->coll = NULL;
  }
}

/* ---- the communicator's public constructors ----------------------------------------------
 * They live here, in the highest layer that keeps state on the communicator, and hand the core
 * (runtime/core/comm.c) the hooks of the layers above it, bottom to top. */
static const ddp__comm_layer_t comm_layers[] = {
    {ddp__device_probe, "device binding", ddp__device_comm_init, ddp__device_comm_fini},
    {NULL, NULL, ddp__coll_comm_init, ddp__coll_comm_fini},
};
#define NLAYERS ((int)(sizeof comm_layers / sizeof comm_layers[0]))

ddp_status_t ddp_comm_create(MPI_Comm base, ddp_comm_t **out) {
  return ddp__comm_create(base, out, comm_layers, NLAYERS);
}

ddp_status_t ddp_init(int *argc, char ***argv, MPI_Comm base, ddp_comm_t **out) {
  return ddp__init(argc, argv, base, out, comm_layers, NLAYERS);
}
