/* Algorithm `shm`: intra-node allreduce through memory every rank of the node maps.
 *
 * A per-communicator node-shared segment (the transport's seg_alloc over the node group, created
 * on first use) gives
 * each rank a control block (barrier counter, buffer descriptors) and a staging area of two
 * halves. Each rank publishes where its input and its result live: inside a ddp_alloc pool
 * window (zero-copy: peers read the user's buffer directly) or in its staging area (copy-in).
 *  - Small messages: every rank copies its input to staging, one barrier, and every rank
 *    reduces all inputs itself in rank order (same expression everywhere: identical bits).
 *    The halves alternate between calls, so no second barrier is needed.
 *  - Larger ones, in chunks: barrier; rank r reduces slice r of the chunk from every peer's
 *    input into its result location; barrier; every rank copies the other slices from their
 *    owners' result locations. Each slice is reduced once, so all ranks hold the same bits.
 * The segment, its flags and barriers are the node-shared segment transport's
 * (transports/coll_xport_shm.c); the large case is allreduce_shm_large.c, the shared pieces
 * shm_pieces.c. */
#include <string.h>

#include "shm.h"

/* Tiny: data and flag share a cache line; one line transfer per peer. The two slots alternate:
 * slot k is rewritten two calls later, after every peer has tagged the call in between, so
 * none of them still reads it. */
static ddp_status_t shm_tiny(ddp__ctx_t *x, ddp__shm_t *s, const ddp__ar_t *a) {
  size_t bytes = a->count * ddp_dtype_size(a->dtype);
  uint64_t seq = ++s->tiny_seq;
  int slot = (int)(seq & 1);
  ddp__shm_tiny_t *mine = &s->ctrl[s->me]->tiny[slot];
  memcpy(mine->data, a->send, bytes);
  ddp__shm_flag_post(s->ctrl[s->me], &mine->tag, seq);
  for (int q = 0; q < s->n; q++) {
    ddp__shm_tiny_t *t = &s->ctrl[q]->tiny[slot];
    if (q != s->me) DDP_TRY(ddp__shm_wait_flag(x, s->ctrl[q], &t->tag, seq));
    s->in[q] = t->data;
  }
  ddp__shm_reduce_n(a->recv, s->in, s->n, 0, a->count, a->dtype, a->op);
  return DDP_OK;
}

/* Small: everyone reduces everything, in rank order. */
static ddp_status_t shm_small(ddp__ctx_t *x, ddp__shm_t *s, const ddp__ar_t *a) {
  size_t bytes = a->count * ddp_dtype_size(a->dtype);
  size_t h = (s->flip++ & 1) * DDP__SHM_HALF_BYTES;
  memcpy(s->stage[s->me] + h, a->send, bytes);
  DDP_TRY(ddp__shm_barrier(x, s));
  for (int q = 0; q < s->n; q++) s->in[q] = s->stage[q] + h;
  ddp__shm_reduce_n(a->recv, s->in, s->n, 0, a->count, a->dtype, a->op);
  return DDP_OK;
}

static const char *shm_supports(const ddp__ctx_t *x, const ddp__ar_t *a) {
  (void)a;
  if (x->mem != DDP_MEM_HOST) return "needs host memory";
  if (x->shape->shm_disabled) return "node-shared memory windows do not work here";
  if (x->c->nodes != 1) return "needs every rank on one node (use hier across nodes)";
  return NULL;
}

static ddp_status_t shm_run(ddp__ctx_t *x, const ddp__ar_t *a) {
  if (x->size == 1) {
    ddp__copy_host(a->recv, a->send, a->count * ddp_dtype_size(a->dtype));
    return DDP_OK;
  }
  ddp__shm_t *s = NULL;
  DDP_TRY(ddp__shm_get(x, &s));
  size_t bytes = a->count * ddp_dtype_size(a->dtype);
  if (bytes <= DDP__SHM_TINY_BYTES) return shm_tiny(x, s, a);
  if (bytes <= DDP__SHM_SMALL_BYTES) return shm_small(x, s, a);
  return ddp__shm_large(x, s, a);
}

const ddp__algo_t ddp__algo_shm = {"shm", DDP_ALGO_SHM, shm_supports, shm_run};
