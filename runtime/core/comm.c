/* The communicator: MPI start-up or adoption, the world/node/cross-node communicators,
 * virtual nodes (DDP_RANKS_PER_NODE), logging, timeline, and the init/fini hooks the layers
 * above hand in (ddp__comm_layer_t; the public constructors that pass them are in
 * collectives/coll_comm.c). */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ddp_internal.h"

static const char *getenv_adapter(const char *name, void *ctx) {
  (void)ctx;
  return getenv(name);
}

static const char *thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    default: return "unknown";
  }
}

/* Every rank learns whether any rank failed, so no rank walks into the next collective
 * alone. Returns the local status, or the failing rank's status naming the failure elsewhere. */
static ddp_status_t agree(MPI_Comm comm, ddp_status_t st, const char *phase) {
  /* Status codes are negative: the minimum is a failure whenever any rank failed, so every
   * rank returns the same code (a refused destroy is DDP_EBUSY everywhere, not a mix). */
  int mine = (int)st, worst = 0;
  int rc = MPI_Allreduce(&mine, &worst, 1, MPI_INT, MPI_MIN, comm);
  if (rc != MPI_SUCCESS) return ddp__mpi_error(rc, "MPI_Allreduce (agreement)");
  if (st != DDP_OK) return st;
  if (worst != DDP_OK)
    return ddp__error((ddp_status_t)worst, "%s failed on another rank: %s (see that rank's message)",
                      phase, ddp_strerror((ddp_status_t)worst));
  return DDP_OK;
}

ddp_status_t ddp__comm_get(const ddp_comm_t *comm, const char *argname, ddp__comm_t **impl) {
  if (comm == NULL) return ddp__error(DDP_EINVAL, "%s is NULL", argname);
  if (comm->magic != DDP__COMM_MAGIC)
    return ddp__error(DDP_EINVAL, "%s (%p) is not an initialised communicator", argname, (const void *)comm);
  *impl = (ddp__comm_t *)comm;
  return DDP_OK;
}

void ddp__comm_retain(ddp__comm_t *c) { atomic_fetch_add(&c->users, 1); }
void ddp__comm_release(ddp__comm_t *c) { atomic_fetch_sub(&c->users, 1); }

static void free_comms(ddp__comm_t *c) {
  if (c->cross != MPI_COMM_NULL) MPI_Comm_free(&c->cross);
  if (c->node != MPI_COMM_NULL) MPI_Comm_free(&c->node);
  if (c->world != MPI_COMM_NULL) MPI_Comm_free(&c->world);
}

/* Node-local and cross-node communicators; when asked, virtual nodes of k consecutive ranks
 * inside each host (a virtual node never spans two hosts: its ranks must share memory). */
static ddp_status_t build_topology(ddp__comm_t *c) {
  int k = c->cfg.ranks_per_node;
  DDP_MPI(MPI_Comm_split_type(c->world, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &c->node));
  if (k > 0) {
    MPI_Comm host = c->node;
    int host_rank = 0;
    c->node = MPI_COMM_NULL;
    int rc = MPI_Comm_rank(host, &host_rank);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_split(host, host_rank / k, c->rank, &c->node);
    MPI_Comm_free(&host);
    if (rc != MPI_SUCCESS) return ddp__mpi_error(rc, "MPI_Comm_split (DDP_RANKS_PER_NODE)");
    c->virtual_nodes = 1;
  }
  MPI_Comm_set_errhandler(c->node, MPI_ERRORS_RETURN);
  DDP_MPI(MPI_Comm_rank(c->node, &c->local_rank));
  DDP_MPI(MPI_Comm_size(c->node, &c->local_size));
  DDP_MPI(MPI_Comm_split(c->world, c->local_rank, c->rank, &c->cross));
  MPI_Comm_set_errhandler(c->cross, MPI_ERRORS_RETURN);
  /* Node index and count as seen by the node leaders, shared with their node. */
  int info[2] = {0, 0};
  if (c->local_rank == 0) {
    DDP_MPI(MPI_Comm_rank(c->cross, &info[0]));
    DDP_MPI(MPI_Comm_size(c->cross, &info[1]));
  }
  DDP_MPI(MPI_Bcast(info, 2, MPI_INT, 0, c->node));
  c->node_id = info[0];
  c->nodes = info[1];
  return DDP_OK;
}

/* Can the node's ranks map each other's memory? Tried once with a tiny window. */
static void probe_shm(ddp__comm_t *c) {
  if (DDP_SIMULATED) { /* see ddp_internal.h: SMPI's shared windows are not per rank */
    c->shm_ok = 0;
    return;
  }
  /* DDP_SHM=0 on any rank of the node: nobody tries a window (collective over the node; ranks
   * that disagree are told at init by the guard, ddp__guard_comm_init). */
  int want = c->cfg.shm, all_want = 0;
  MPI_Allreduce(&want, &all_want, 1, MPI_INT, MPI_MIN, c->node);
  if (!all_want) {
    c->shm_ok = 0;
    return;
  }
  MPI_Win win = MPI_WIN_NULL;
  void *base = NULL;
  int ok = MPI_Win_allocate_shared(64, 1, MPI_INFO_NULL, c->node, &base, &win) == MPI_SUCCESS;
  if (ok) MPI_Win_free(&win);
  int all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, c->node);
  c->shm_ok = all;
}

static ddp_status_t comm_create(MPI_Comm base, int mpi_owned, ddp_comm_t **out,
                                const ddp__comm_layer_t *layers, int nlayers) {
  ddp__comm_t *c = calloc(1, sizeof *c);
  int base_size = 0;
  ddp_status_t st = DDP_OK;
  if (!c) st = ddp__error(DDP_ENOMEM, "communicator: out of memory");
  else {
    c->world = c->node = c->cross = MPI_COMM_NULL;
    c->mpi_owned = mpi_owned;
    c->device = -1;
    c->layers = layers;
    c->nlayers = nlayers;
    st = ddp__config_load(&c->cfg, getenv_adapter, NULL);
  }
  /* A launcher of another MPI installation starts N processes that each see a world of one:
   * the rank count the launcher meant (tools/mpilaunch sets it) must be MPI's. */
  int world_size = 0;
  if (st == DDP_OK && c->cfg.world_size > 0 &&
      MPI_Comm_size(MPI_COMM_WORLD, &world_size) == MPI_SUCCESS && world_size != c->cfg.world_size)
    st = ddp__error(DDP_ECONFIG,
                    "DDP_WORLD_SIZE=%d but MPI_COMM_WORLD has %d rank(s): the launcher does not "
                    "belong to the MPI library this program runs on (another installation's "
                    "mpirun/mpiexec starts every process as a job of its own)",
                    c->cfg.world_size, world_size);
  /* Agree before any further collective, so a bad value on one rank cannot strand the rest. */
  st = agree(base, st, "reading DDP_* configuration");
  if (st != DDP_OK) {
    free(c);
    return st;
  }
  (void)base_size;
  int rc = MPI_Comm_dup(base, &c->world);
  if (rc != MPI_SUCCESS) {
    free(c);
    return ddp__mpi_error(rc, "MPI_Comm_dup");
  }
  MPI_Comm_set_errhandler(c->world, MPI_ERRORS_RETURN);
  MPI_Comm_rank(c->world, &c->rank);
  MPI_Comm_size(c->world, &c->size);
  MPI_Query_thread(&c->thread_level);
  c->mpi_serialized = c->thread_level < MPI_THREAD_MULTIPLE;
  if (gethostname(c->host, sizeof c->host) != 0) strcpy(c->host, "unknown");
  c->host[sizeof c->host - 1] = '\0';

  st = build_topology(c);
  if (st == DDP_OK) st = ddp__logger_open(&c->log, &c->cfg, c->rank, c->host);
  int logger_open = (st == DDP_OK);
  if (st == DDP_OK) st = ddp__timeline_open(&c->timeline, &c->cfg, c->rank);
  st = agree(c->world, st, "communicator set-up (topology, DDP_DEBUG_FILE, DDP_TIMELINE)");
  if (st != DDP_OK) goto fail;

  probe_shm(c);
  for (int i = 0; i < nlayers; i++) {
    if (!layers[i].probe) continue;
    st = agree(c->world, layers[i].probe(c), layers[i].probe_phase);
    if (st != DDP_OK) goto fail;
  }

  int hooks = 0, guard = 0;
  while (st == DDP_OK && hooks < nlayers) {
    st = layers[hooks].init(c);
    if (st == DDP_OK) hooks++;
  }
  if (st == DDP_OK) {
    st = ddp__guard_comm_init(c);
    guard = (st == DDP_OK);
  }
  st = agree(c->world, st, "layer initialisation");
  if (st != DDP_OK) {
    if (guard) ddp__guard_comm_fini(c);
    while (hooks > 0) layers[--hooks].fini(c);
    goto fail;
  }

  if (c->mpi_serialized)
    DDP_LOG(c, DDP_LOG_INFO, "MPI provides %s, not MPI_THREAD_MULTIPLE: every MPI call stays on one thread",
            thread_level_name(c->thread_level));
  if (c->rank == 0) {
    char unknown[512];
    ddp__config_unknown(unknown, sizeof unknown);
    if (unknown[0]) DDP_LOG(c, DDP_LOG_WARN, "unknown DDP_* variables ignored: %s", unknown);
    if (c->log.level >= DDP_LOG_INFO) {
      char cfgtxt[1024];
      ddp__config_format(&c->cfg, cfgtxt, sizeof cfgtxt);
      DDP_LOG(c, DDP_LOG_INFO, "mpiddp %s: world %d, nodes %d%s, thread level %s; config: %s",
              ddp_version(), c->size, c->nodes, c->virtual_nodes ? " (virtual)" : "",
              thread_level_name(c->thread_level), cfgtxt);
    }
  }
  if (c->device < 0)
    DDP_LOG(c, DDP_LOG_INFO, "no GPU bound: host mode (%d device(s) visible)", c->gpu_count);
  else
    DDP_LOG(c, DDP_LOG_INFO, "bound to GPU %d of %d", c->device, c->gpu_count);
  c->magic = DDP__COMM_MAGIC;
  *out = c;
  return DDP_OK;

fail:
  ddp__timeline_close(c->timeline);
  if (logger_open) ddp__logger_close(&c->log);
  free_comms(c);
  free(c);
  return st;
}

ddp_status_t ddp__comm_create(MPI_Comm base, ddp_comm_t **out, const ddp__comm_layer_t *layers,
                              int nlayers) {
  DDP_CHECK_ARG(out != NULL, "comm (the address of the handle to create) is NULL");
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (!init || fin)
    return ddp__error(DDP_ESTATE, "MPI is %s: call ddp_init or MPI_Init_thread first",
                      fin ? "already finalised" : "not initialised");
  if (base == MPI_COMM_NULL) base = MPI_COMM_WORLD;
  return comm_create(base, 0, out, layers, nlayers);
}

ddp_status_t ddp__init(int *argc, char ***argv, MPI_Comm base, ddp_comm_t **out,
                       const ddp__comm_layer_t *layers, int nlayers) {
  DDP_CHECK_ARG(out != NULL, "comm (the address of the handle to create) is NULL");
  DDP_CHECK_ARG((argc == NULL) == (argv == NULL), "argc (%p) and argv (%p) must both be set or both NULL",
                (void *)argc, (void *)argv);
  int init = 0, fin = 0, provided = 0;
  MPI_Finalized(&fin);
  if (fin) return ddp__error(DDP_ESTATE, "MPI was already finalised; it cannot be initialised again");
  MPI_Initialized(&init);
  int owned = 0;
  if (!init) {
    int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) return ddp__mpi_error(rc, "MPI_Init_thread");
    owned = 1;
  }
  if (base == MPI_COMM_NULL) base = MPI_COMM_WORLD;
  ddp_status_t st = comm_create(base, owned, out, layers, nlayers);
  if (st != DDP_OK && owned) MPI_Finalize();
  return st;
}

ddp_status_t ddp_comm_destroy(ddp_comm_t **comm) {
  ddp__comm_t *c = NULL;
  if (comm == NULL || *comm == NULL) return DDP_OK;
  DDP_TRY(ddp__comm_get(*comm, "*comm", &c));
  int busy = atomic_load(&c->users);
  ddp_status_t st = busy ? ddp__error(DDP_EBUSY, "comm is still used by %d handle(s) (reducer, loader or request): destroy them first", busy)
                         : DDP_OK;
  st = agree(c->world, st, "ddp_comm_destroy");
  if (st != DDP_OK) return st;
  ddp__guard_comm_fini(c);
  for (int i = c->nlayers; i > 0; i--) c->layers[i - 1].fini(c);
  ddp_status_t wst = ddp__timeline_write(c->timeline, c->world, 1);
  ddp__timeline_close(c->timeline);
  ddp__logger_close(&c->log);
  free_comms(c);
  c->magic = 0;
  free(c);
  *comm = NULL;
  return wst;
}

ddp_status_t ddp_finalize(ddp_comm_t **comm) {
  ddp__comm_t *c = NULL;
  if (comm == NULL || *comm == NULL) return DDP_OK;
  DDP_TRY(ddp__comm_get(*comm, "*comm", &c));
  int owned = c->mpi_owned;
  ddp_status_t st = ddp_comm_destroy(comm);
  if (*comm != NULL) return st; /* refused: nothing was destroyed */
  if (owned) {
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) {
      int rc = MPI_Finalize();
      if (rc != MPI_SUCCESS && st == DDP_OK) st = ddp__mpi_error(rc, "MPI_Finalize");
    }
  }
  return st;
}

ddp_status_t ddp_comm_info(const ddp_comm_t *comm, ddp_comm_info_t *info) {
  ddp__comm_t *c = NULL;
  DDP_TRY(ddp__comm_get(comm, "comm", &c));
  DDP_CHECK_ARG(info != NULL, "info is NULL");
  ddp_comm_info_t i;
  memset(&i, 0, sizeof i);
  i.rank = c->rank;
  i.size = c->size;
  i.local_rank = c->local_rank;
  i.local_size = c->local_size;
  i.node = c->node_id;
  i.nodes = c->nodes;
  i.virtual_nodes = c->virtual_nodes;
  i.thread_level = c->thread_level;
  i.mpi_owned = c->mpi_owned;
  i.gpu_count = c->gpu_count;
  i.device = c->device;
  i.cuda_aware = c->cuda_aware;
  i.nccl = DDP_HAVE_NCCL;
  i.shm = c->shm_ok;
  snprintf(i.host, sizeof i.host, "%s", c->host);
  snprintf(i.cuda_aware_reason, sizeof i.cuda_aware_reason, "%s", c->cuda_aware_reason);
  *info = i;
  return DDP_OK;
}

ddp_status_t ddp_comm_rank(const ddp_comm_t *comm, int *rank) {
  ddp__comm_t *c = NULL;
  DDP_TRY(ddp__comm_get(comm, "comm", &c));
  DDP_CHECK_ARG(rank != NULL, "rank is NULL");
  *rank = c->rank;
  return DDP_OK;
}

ddp_status_t ddp_comm_size(const ddp_comm_t *comm, int *size) {
  ddp__comm_t *c = NULL;
  DDP_TRY(ddp__comm_get(comm, "comm", &c));
  DDP_CHECK_ARG(size != NULL, "size is NULL");
  *size = c->size;
  return DDP_OK;
}

ddp_status_t ddp_comm_mpi(const ddp_comm_t *comm, ddp_comm_kind_t kind, MPI_Comm *out) {
  ddp__comm_t *c = NULL;
  DDP_TRY(ddp__comm_get(comm, "comm", &c));
  DDP_CHECK_ARG(out != NULL, "out is NULL");
  switch (kind) {
    case DDP_COMM_WORLD: *out = c->world; return DDP_OK;
    case DDP_COMM_NODE: *out = c->node; return DDP_OK;
    case DDP_COMM_CROSS: *out = c->cross; return DDP_OK;
  }
  return ddp__error(DDP_EINVAL, "kind %d is not a ddp_comm_kind_t (WORLD=0, NODE=1, CROSS=2)", (int)kind);
}

ddp_status_t ddp_mpi_library_version(char *buf, size_t bytes) {
  DDP_CHECK_ARG(buf != NULL, "buf is NULL");
  DDP_CHECK_ARG(bytes > 0, "bytes is 0");
  char v[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  DDP_MPI(MPI_Get_library_version(v, &len));
  /* Open MPI's string ends with a newline and may span lines: keep the first line. */
  char *nl = strchr(v, '\n');
  if (nl) *nl = '\0';
  snprintf(buf, bytes, "%s", v);
  return DDP_OK;
}

ddp_status_t ddp_abort(ddp_comm_t *comm, const char *reason) {
  ddp__comm_t *c = NULL;
  DDP_TRY(ddp__comm_get(comm, "comm", &c));
  DDP_CHECK_ARG(reason != NULL, "reason is NULL");
  fprintf(stderr, "%s mpiddp ABORT: %s\n", c->log.prefix, reason);
  fflush(stderr);
  ddp__timeline_write(c->timeline, c->world, 0);
  return ddp__mpi_error(MPI_Abort(c->world, 1), "MPI_Abort");
}

static ddp_status_t timeline_event(ddp_comm_t *comm, char ph, const char *name, const char *cat,
                                   const char *args_json) {
  ddp__comm_t *c = NULL;
  DDP_TRY(ddp__comm_get(comm, "comm", &c));
  DDP_CHECK_ARG(name != NULL, "name is NULL");
  ddp__timeline_event(c->timeline, ph, name, cat, args_json);
  return DDP_OK;
}

ddp_status_t ddp_timeline_begin(ddp_comm_t *comm, const char *name, const char *cat, const char *args_json) {
  return timeline_event(comm, 'B', name, cat, args_json);
}

ddp_status_t ddp_timeline_end(ddp_comm_t *comm, const char *name, const char *cat, const char *args_json) {
  return timeline_event(comm, 'E', name, cat, args_json);
}

ddp_status_t ddp_timeline_instant(ddp_comm_t *comm, const char *name, const char *cat, const char *args_json) {
  return timeline_event(comm, 'i', name, cat, args_json);
}

ddp_status_t ddp_timeline_flush(ddp_comm_t *comm) {
  ddp__comm_t *c = NULL;
  DDP_TRY(ddp__comm_get(comm, "comm", &c));
  return ddp__timeline_write(c->timeline, c->world, 1);
}

/* The public logging call: here, beside ddp__comm_get, so that log.c (which comm.c opens)
 * calls nothing of comm.c back. */
ddp_status_t ddp_log(const ddp_comm_t *comm, ddp_log_level_t level, const char *fmt, ...) {
  ddp__comm_t *c = NULL;
  DDP_TRY(ddp__comm_get(comm, "comm", &c));
  DDP_CHECK_ARG(level >= DDP_LOG_NONE && level <= DDP_LOG_TRACE, "level %d is not a ddp_log_level_t", (int)level);
  DDP_CHECK_ARG(fmt != NULL, "fmt is NULL");
  va_list ap;
  va_start(ap, fmt);
  ddp__logv(&c->log, level, fmt, ap);
  va_end(ap);
  return DDP_OK;
}
