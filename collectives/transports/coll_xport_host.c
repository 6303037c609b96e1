/* The host-memory transport: MPI point-to-point on the layer's own communicators, the MPI
 * library's own collectives (coll_mpi_coll.c), node-shared windows and the CPU reduction
 * kernels; the reference implementation of the interface in coll_internal.h. */
#include <limits.h>
#include <stdlib.h>

#include "xport_mpi.h"

#define PART_BYTES ((size_t)1 << 30)

static ddp_status_t host_post(ddp__ctx_t *x, void *buf, size_t bytes, int peer, int tag,
                              ddp__xreq_t *req, int send) {
  ddp__xreq_init(req);
  req->peer = peer;
  req->bytes = bytes;
  size_t parts = bytes == 0 ? 1 : (bytes + PART_BYTES - 1) / PART_BYTES;
  if (parts > DDP__XREQ_PARTS)
    return ddp__error(DDP_EINTERNAL, "message of %zu bytes exceeds the transport's %zu-byte limit",
                      bytes, (size_t)DDP__XREQ_PARTS * PART_BYTES);
  MPI_Comm comm = ddp__ctx_comm(x);
  MPI_Request *mr = ddp__xreq_mpi(req);
  for (size_t i = 0; i < parts; i++) {
    size_t off = i * PART_BYTES;
    int n = (int)(bytes - off < PART_BYTES ? bytes - off : PART_BYTES);
    int rc = send ? MPI_Isend((char *)buf + off, n, MPI_BYTE, peer, tag, comm, &mr[i])
                  : MPI_Irecv((char *)buf + off, n, MPI_BYTE, peer, tag, comm, &mr[i]);
    if (rc != MPI_SUCCESS) return ddp__mpi_error(rc, send ? "MPI_Isend" : "MPI_Irecv");
    req->nparts = (int)i + 1;
  }
  return DDP_OK;
}

static ddp_status_t host_isend(ddp__ctx_t *x, const void *buf, size_t bytes, int peer, int tag,
                               ddp__xreq_t *req) {
  return host_post(x, (void *)buf, bytes, peer, tag, req, 1);
}

static ddp_status_t host_irecv(ddp__ctx_t *x, void *buf, size_t bytes, int peer, int tag,
                               ddp__xreq_t *req) {
  return host_post(x, buf, bytes, peer, tag, req, 0);
}

static ddp_status_t host_wait(ddp__ctx_t *x, int n, ddp__xreq_t *reqs) {
  enum { MAXR = 64 };
  MPI_Request mr[MAXR];
  int peers[MAXR];
  int k = 0;
  for (int i = 0; i < n; i++) {
    MPI_Request *rq = ddp__xreq_mpi(&reqs[i]);
    for (int j = 0; j < reqs[i].nparts; j++) {
      if (rq[j] == MPI_REQUEST_NULL) continue;
      if (k == MAXR) {
        ddp__wait_desc_t d = x->desc;
        d.peers = peers;
        DDP_TRY(ddp__wait_all(x->c, k, mr, &d));
        k = 0;
      }
      mr[k] = rq[j];
      peers[k] = x->world_of ? x->world_of[reqs[i].peer] : reqs[i].peer; /* world ranks */
      k++;
      rq[j] = MPI_REQUEST_NULL;
    }
    reqs[i].nparts = 0;
  }
  if (k == 0) return DDP_OK;
  ddp__wait_desc_t d = x->desc;
  d.peers = peers;
  return ddp__wait_all(x->c, k, mr, &d);
}

/* Simulator sweeps over meaningless shared buffers (MPIDDP_SIM_NOCOMPUTE, coll_comm.c) skip the
 * local reduce and copy work: it costs no simulated time anyway, only the host's CPU. */
static ddp_status_t host_reduce(ddp__ctx_t *x, void *dst, const void *src, size_t count,
                                ddp_dtype_t dtype, ddp_op_t op) {
  if (DDP_SIMULATED && x->cs->sim_nocompute) return DDP_OK;
  ddp__reduce_host(dst, src, count, dtype, op);
  return DDP_OK;
}

static ddp_status_t host_copy(ddp__ctx_t *x, void *dst, const void *src, size_t bytes) {
  if (DDP_SIMULATED && x->cs->sim_nocompute) return DDP_OK;
  ddp__copy_host(dst, src, bytes);
  return DDP_OK;
}

static ddp_status_t host_scale(ddp__ctx_t *x, void *buf, size_t count, ddp_dtype_t dtype,
                               double divisor) {
  (void)x;
  ddp__scale_host(buf, count, dtype, divisor);
  return DDP_OK;
}

static ddp_status_t host_scratch(ddp__ctx_t *x, int slot, size_t bytes, void **ptr) {
  ddp__coll_t *cs = x->cs;
  if (slot < 0 || slot >= DDP__SCRATCH_SLOTS)
    return ddp__error(DDP_EINTERNAL, "scratch slot %d out of range", slot);
  if (bytes == 0) bytes = 64;
  if (cs->scratch_bytes[slot] < bytes) {
    free(cs->scratch[slot]);
    size_t want = (bytes + 4095) & ~(size_t)4095;
    cs->scratch[slot] = NULL;
    cs->scratch_bytes[slot] = 0;
    /* Simulated: plain malloc, which SMPI intercepts (smpi_helpers.h), so that sweeps with
     * --cfg=smpi/auto-shared-malloc-thresh share big scratch buffers between simulated ranks
     * (scale/sweep.sh; 256 ranks x 64 MB would not fit in memory otherwise). */
    if (DDP_SIMULATED) cs->scratch[slot] = malloc(want);
    else if (posix_memalign(&cs->scratch[slot], 64, want) != 0) cs->scratch[slot] = NULL;
    if (!cs->scratch[slot])
      return ddp__error(DDP_ENOMEM, "collective scratch buffer of %zu bytes: out of memory", want);
    cs->scratch_bytes[slot] = want;
  }
  *ptr = cs->scratch[slot];
  return DDP_OK;
}

const ddp__xport_t ddp__xport_host = {
    .name = "host",
    .isend = host_isend,
    .irecv = host_irecv,
    .wait = host_wait,
    .reduce = host_reduce,
    .copy = host_copy,
    .scale = host_scale,
    .scratch = host_scratch,
    .allreduce = ddp__mpi_allreduce,
    .bcast = ddp__mpi_bcast,
    .allgather = ddp__mpi_allgather,
    .reduce_scatter = ddp__mpi_reduce_scatter,
    .barrier = ddp__mpi_barrier,
    .agree_min = ddp__mpi_agree_min,
    .seg_alloc = ddp__mpi_seg_alloc,
    .seg_free = ddp__mpi_seg_free,
};

void ddp__coll_groups(ddp__coll_t *cs) {
  ddp__xh_set_comm(&cs->shape.g_world, cs->world);
  ddp__xh_set_comm(&cs->shape.g_node, cs->node);
  ddp__xh_set_comm(&cs->shape.g_cross, cs->cross);
}

void ddp__ctx_world(ddp__ctx_t *x, ddp__comm_t *c, const char *coll, size_t bytes, int tag) {
  x->c = c;
  x->cs = c->coll;
  x->shape = &c->coll->shape;
  x->xp = &ddp__xport_host;
  x->xstate = NULL;
  x->grp = &c->coll->shape.g_world;
  x->rank = c->rank;
  x->size = c->size;
  x->world_of = NULL;
  x->mem = DDP_MEM_HOST;
  x->desc.seq = c->coll->seq;
  x->desc.coll = coll;
  x->desc.algo = "?";
  x->desc.bytes = bytes;
  x->desc.tag = tag;
  x->desc.peers = NULL;
  x->on_caller = 0;
}
