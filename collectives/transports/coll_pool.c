/* The node-shared memory pool: ddp_alloc / ddp_free. Each allocation is one
 * MPI_Win_allocate_shared window over the node; every rank maps every peer's segment, so the
 * shm algorithm reads a peer's buffer directly when both sides' buffers come from here.
 * Windows get the same id on every rank of the node (creation order), which is how a buffer's
 * location is named to peers: (id, offset). */
#include <stdlib.h>
#include <string.h>

#include "coll_state.h"

static void win_destroy(ddp__pool_win_t *w) {
  if (w->win != MPI_WIN_NULL) MPI_Win_free(&w->win);
  free(w->peer_base);
  free(w);
}

/* Every rank of the node learns whether any failed; returns st or DDP_EMISMATCH. */
static ddp_status_t node_agree(MPI_Comm comm, ddp_status_t st, const char *what) {
  int mine = st != DDP_OK, any = 0;
  int rc = MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, comm);
  if (rc != MPI_SUCCESS) return ddp__mpi_error(rc, "MPI_Allreduce (pool agreement)");
  if (st != DDP_OK) return st;
  if (any) return ddp__error(DDP_EMISMATCH, "%s failed on another rank of the node", what);
  return DDP_OK;
}

ddp_status_t ddp_alloc(ddp_comm_t *comm, size_t bytes, void **ptr) {
  ddp__comm_t *c = NULL;
  DDP_TRY(ddp__comm_get(comm, "comm", &c));
  DDP_CHECK_ARG(ptr != NULL, "ptr is NULL");
  DDP_CHECK_ARG(bytes > 0, "bytes is 0");
  DDP_CHECK_ARG(bytes <= ((size_t)1 << 46), "bytes %zu is too large for a shared window", bytes);
  ddp__coll_t *cs = c->coll;
  if (cs->shape.shm_disabled)
    return ddp__error(DDP_ENOTSUP, "ddp_alloc: node-shared memory windows do not work here "
                                   "(MPI_Win_allocate_shared failed at start-up)");
  /* Same size on every rank keeps offsets meaningful across ranks. */
  unsigned long long mine[2] = {bytes, ~(unsigned long long)bytes}, all[2] = {0, 0};
  DDP_MPI(MPI_Allreduce(mine, all, 2, MPI_UNSIGNED_LONG_LONG, MPI_MAX, cs->poolcomm));
  if (all[0] != bytes || ~all[1] != bytes)
    return ddp__error(DDP_EINVAL, "ddp_alloc: bytes %zu differs across the node's ranks (they "
                                  "must all allocate the same size, in the same order)", bytes);
  size_t seg = (bytes + 4095) & ~(size_t)4095;
  /* Segments may start anywhere: 64 spare bytes let every rank hand out 64-byte aligned
   * memory (the same offset in every process: mappings are page aligned). */
  ddp__pool_win_t *w = calloc(1, sizeof *w);
  char **peers = calloc((size_t)c->local_size, sizeof *peers);
  ddp_status_t st = (w && peers) ? DDP_OK : ddp__error(DDP_ENOMEM, "ddp_alloc: out of memory");
  if (w) w->win = MPI_WIN_NULL;
  st = node_agree(cs->poolcomm, st, "ddp_alloc bookkeeping");
  if (st != DDP_OK) {
    free(w);
    free(peers);
    return st;
  }
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "alloc_shared_noncontig", "true");
  void *base = NULL;
  int rc = MPI_Win_allocate_shared((MPI_Aint)(seg + 64), 1, info, cs->poolcomm, &base, &w->win);
  MPI_Info_free(&info);
  if (rc != MPI_SUCCESS) {
    w->win = MPI_WIN_NULL;
    free(peers);
    free(w);
    return ddp__mpi_error(rc, "MPI_Win_allocate_shared (ddp_alloc)");
  }
  w->base = ddp__align64(base);
  w->bytes = seg;
  w->peer_base = peers;
  for (int q = 0; q < c->local_size; q++) {
    MPI_Aint sz = 0;
    int du = 0;
    void *pb = NULL;
    rc = MPI_Win_shared_query(w->win, q, &sz, &du, &pb);
    if (rc != MPI_SUCCESS) {
      win_destroy(w);
      return ddp__mpi_error(rc, "MPI_Win_shared_query (ddp_alloc)");
    }
    peers[q] = ddp__align64(pb);
  }
  pthread_mutex_lock(&cs->pool_mu);
  w->id = cs->pool_next_id++;
  w->next = cs->pool;
  cs->pool = w;
  pthread_mutex_unlock(&cs->pool_mu);
  *ptr = w->base;
  return DDP_OK;
}

ddp_status_t ddp_free(ddp_comm_t *comm, void *ptr) {
  ddp__comm_t *c = NULL;
  DDP_TRY(ddp__comm_get(comm, "comm", &c));
  DDP_CHECK_ARG(ptr != NULL, "ptr is NULL");
  ddp__coll_t *cs = c->coll;
  pthread_mutex_lock(&cs->pool_mu);
  ddp__pool_win_t **pp = &cs->pool;
  while (*pp && (*pp)->base != (char *)ptr) pp = &(*pp)->next;
  ddp__pool_win_t *w = *pp;
  if (w) *pp = w->next;
  pthread_mutex_unlock(&cs->pool_mu);
  DDP_CHECK_ARG(w != NULL, "ptr %p was not returned by ddp_alloc on this communicator (or was "
                "already freed)", ptr);
  int rc = MPI_Win_free(&w->win);
  w->win = MPI_WIN_NULL;
  win_destroy(w);
  if (rc != MPI_SUCCESS) return ddp__mpi_error(rc, "MPI_Win_free (ddp_free)");
  return DDP_OK;
}

void ddp__pool_free_all(ddp__coll_t *cs) {
  /* Windows are freed in creation order on every rank (the list is newest first). */
  while (cs->pool) {
    ddp__pool_win_t **pp = &cs->pool;
    while ((*pp)->next) pp = &(*pp)->next;
    ddp__pool_win_t *w = *pp;
    *pp = NULL;
    win_destroy(w);
  }
}

int ddp__pool_find(ddp__coll_t *cs, const void *p, size_t bytes, uint64_t *id, size_t *offset) {
  int found = 0;
  uintptr_t a = (uintptr_t)p;
  pthread_mutex_lock(&cs->pool_mu);
  for (ddp__pool_win_t *w = cs->pool; w; w = w->next) {
    uintptr_t b = (uintptr_t)w->base;
    if (a >= b && a - b <= w->bytes && bytes <= w->bytes - (a - b)) {
      *id = w->id;
      *offset = a - b;
      found = 1;
      break;
    }
  }
  pthread_mutex_unlock(&cs->pool_mu);
  return found;
}

ddp__pool_win_t *ddp__pool_by_id(ddp__coll_t *cs, uint64_t id) {
  ddp__pool_win_t *r = NULL;
  pthread_mutex_lock(&cs->pool_mu);
  for (ddp__pool_win_t *w = cs->pool; w; w = w->next)
    if (w->id == id) {
      r = w;
      break;
    }
  pthread_mutex_unlock(&cs->pool_mu);
  return r;
}
