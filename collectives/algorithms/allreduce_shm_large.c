/* Algorithm `shm` above DDP__SHM_SMALL_BYTES: rank r reduces slice r of every peer's input
 * and the others copy it, in staging-sized chunks, in one pass when every buffer is in the
 * ddp_alloc pool (push), or through cross-memory attach when all are private. */
#include "shm.h"

/* Private buffers everywhere, cross-memory attach allowed: rank r pulls slice r of every
 * peer's input with process_vm_readv, piece by piece into a cache-sized scratch, reduces it
 * straight into its recv and pushes the piece, still in cache, into every peer's recv with
 * process_vm_writev (slice r of any buffer is touched by rank r only, so no barrier is needed
 * in between). One copy per byte moved, as with buffers in the pool. The descriptors (pid,
 * addresses) were published by the caller's barrier. */
ddp_status_t ddp__shm_cma(ddp__ctx_t *x, ddp__shm_t *s, const ddp__ar_t *a) {
  int me = s->me, n = s->n;
  size_t es = ddp_dtype_size(a->dtype);
  ddp__parts_t pt;
  DDP_TRY(ddp__parts_init(&pt, n, "shm"));
  size_t *o = pt.offs, *l = pt.lens;
  ddp__split(a->count, n, o, l);
  size_t piece = DDP__SHM_CMA_PIECE_BYTES / es;
  void *tmp = NULL;
  ddp_status_t st = x->xp->scratch(x, 0, piece * es, &tmp);
  char *mine = (char *)a->recv + o[me] * es;
  const char *myin = (const char *)a->send + o[me] * es;
  ddp__shm_span(x, 'B', "cma reduce+push slice", l[me] * es);
  for (size_t off = 0; off < l[me] && st == DDP_OK; off += piece) {
    size_t m = l[me] - off < piece ? l[me] - off : piece;
    int first = a->send != a->recv; /* out of place: the first peer combines with send */
    for (int q = 0; q < n && st == DDP_OK; q++) {
      if (q == me) continue;
      st = ddp__shm_cma_read(s, q, s->ctrl[q]->va_send + (o[me] + off) * es, tmp, m * es);
      if (st != DDP_OK) break;
      if (first) ddp__reduce3_host(mine + off * es, myin + off * es, tmp, m, a->dtype, a->op);
      else ddp__reduce_host(mine + off * es, tmp, m, a->dtype, a->op);
      first = 0;
    }
    for (int q = 0; q < n && st == DDP_OK; q++)
      if (q != me)
        st = ddp__shm_cma_write(s, q, s->ctrl[q]->va_recv + (o[me] + off) * es, mine + off * es, m * es);
  }
  ddp__shm_span(x, 'E', "cma reduce+push slice", l[me] * es);
  /* A rank whose transfer failed still joins the barrier, so no peer waits for it. */
  ddp_status_t bst = ddp__shm_barrier(x, s); /* nobody leaves while a peer still uses its memory */
  if (st == DDP_OK) st = bst;
  ddp__parts_free(&pt);
  return st;
}

/* Large: chunked reduce-scatter + allgather through the published locations. A staged input
 * only copies the slices the peers read; this rank reads its own slice from the user buffer. */
ddp_status_t ddp__shm_large(ddp__ctx_t *x, ddp__shm_t *s, const ddp__ar_t *a) {
  size_t es = ddp_dtype_size(a->dtype), bytes = a->count * es;
  int me = s->me, n = s->n;
  ddp__shm_ctrl_t *my = s->ctrl[me];
  ddp__shm_loc_t lin = ddp__shm_locate(x, a->send, bytes), lres = ddp__shm_locate(x, a->recv, bytes);
  if (a->send == a->recv && lin.id == DDP__SHM_LOC_STAGE) lres.id = DDP__SHM_LOC_STAGE; /* staged in place */
  my->desc[0][0] = lin;
  my->desc[0][1] = lres;
  size_t chunk = DDP__SHM_HALF_BYTES / es;
  ddp__parts_t pt;
  DDP_TRY(ddp__parts_init(&pt, n, "shm"));
  size_t *o = pt.offs, *l = pt.lens;
  my->va_send = (uint64_t)(uintptr_t)a->send;
  my->va_recv = (uint64_t)(uintptr_t)a->recv;
  /* Chunk 0's copy-in goes before the barrier that publishes the descriptors (unless cross-
   * memory attach may make it unnecessary: that is only known once all are published). */
  size_t m0 = a->count < chunk ? a->count : chunk;
  ddp__split(m0, n, o, l);
  if (lin.id == DDP__SHM_LOC_STAGE && !s->cma_ok)
    ddp__shm_copy_in_others(s->stage[me] + (s->flip & 1) * DDP__SHM_HALF_BYTES, a->send, o, l, me, n, es);
  ddp_status_t st = ddp__shm_barrier(x, s);
  /* Peers' bases (NULL = their staging half). */
  int any_pool = 0, any_staged = 0;
  for (int q = 0; q < n && st == DDP_OK; q++) {
    char *p = NULL;
    st = ddp__shm_resolve(x, q, s->ctrl[q]->desc[0][0], &p);
    s->src[q] = p;
    if (st == DDP_OK) st = ddp__shm_resolve(x, q, s->ctrl[q]->desc[0][1], &s->res[q]);
    any_pool |= s->src[q] != NULL || s->res[q] != NULL;
    any_staged |= s->src[q] == NULL;
  }
  /* Every rank sees the same descriptors, so every rank takes the same branch (and the same
   * number of barriers). */
  if (st == DDP_OK && s->cma_ok) {
    if (!any_pool) {
      ddp__parts_free(&pt);
      return ddp__shm_cma(x, s, a);
    }
    if (any_staged) { /* the copy-in skipped above, and a barrier after it */
      if (lin.id == DDP__SHM_LOC_STAGE)
        ddp__shm_copy_in_others(s->stage[me] + (s->flip & 1) * DDP__SHM_HALF_BYTES, a->send, o, l, me, n, es);
      st = ddp__shm_barrier(x, s);
    }
  }
  /* Everything in the pool: no staging limit, one pass (fewer barriers: each one waits for
   * the slowest rank, which on a shared machine may just have been preempted). Every rank
   * sees the same descriptors, so all decide alike. */
  int all_pool = 1;
  for (int q = 0; q < n; q++) all_pool &= s->src[q] != NULL && s->res[q] != NULL;
  if (all_pool && st == DDP_OK) {
    /* Push: rank r reduces slice r piece by piece into its own result and copies each piece,
     * still in cache, into every peer's result. Nobody else reads or writes slice r of any
     * buffer meanwhile (peers read their own slices), so no barrier is needed between the
     * reduction and the copies: only the final one. */
    ddp__split(a->count, n, o, l);
    size_t piece = DDP__SHM_PUSH_PIECE_BYTES / es;
    ddp__shm_span(x, 'B', "reduce+push slice", l[me] * es);
    for (size_t off = 0; off < l[me]; off += piece) {
      size_t m = l[me] - off < piece ? l[me] - off : piece;
      size_t at = o[me] + off;
      char *dst = s->res[me] + at * es;
      ddp__shm_reduce_slice(dst, (const char *const *)s->src, n, me, at, m, a->dtype, a->op);
      for (int q = 0; q < n; q++)
        if (q != me) ddp__copy_host(s->res[q] + at * es, dst, m * es);
    }
    ddp__shm_span(x, 'E', "reduce+push slice", l[me] * es);
    ddp__parts_free(&pt);
    return ddp__shm_barrier(x, s); /* nobody leaves while a peer still reads or writes its memory */
  }
  /* Staged, in DDP__SHM_HALF_BYTES chunks (chunk 0's copy-in, if any rank staged, was done above). */
  for (size_t base = 0; base < a->count && st == DDP_OK; base += chunk) {
    size_t m = a->count - base < chunk ? a->count - base : chunk;
    size_t h = (s->flip++ & 1) * DDP__SHM_HALF_BYTES;
    ddp__split(m, n, o, l);
    if (base > 0) {
      if (!s->src[me])
        ddp__shm_copy_in_others(s->stage[me] + h, (const char *)a->send + base * es, o, l, me, n, es);
      st = ddp__shm_barrier(x, s);
      if (st != DDP_OK) break;
    }
    /* Reduce slice `me` of the chunk from every input. */
    for (int q = 0; q < n; q++)
      s->in[q] = s->src[q] ? s->src[q] + base * es : s->stage[q] + h;
    if (!s->src[me]) s->in[me] = (const char *)a->send + base * es;
    /* The slice is reduced straight into recv (the pool location when recv is in the pool);
     * a staged result is then also copied, cache-hot, to staging for the peers. */
    char *dst = s->res[me] ? s->res[me] + (base + o[me]) * es
                           : (char *)a->recv + (base + o[me]) * es;
    ddp__shm_span(x, 'B', "reduce slice", l[me] * es);
    ddp__shm_reduce_slice(dst, s->in, n, me, o[me], l[me], a->dtype, a->op);
    if (!s->res[me]) ddp__copy_host(s->stage[me] + h + o[me] * es, dst, l[me] * es);
    ddp__shm_span(x, 'E', "reduce slice", l[me] * es);
    st = ddp__shm_barrier(x, s);
    if (st != DDP_OK) break;
    /* Gather the other slices into recv. */
    for (int q = 0; q < n; q++) {
      if (q == me) continue;
      const char *from = s->res[q] ? s->res[q] + (base + o[q]) * es : s->stage[q] + h + o[q] * es;
      char *to = (char *)a->recv + (base + o[q]) * es;
      if (from != to) ddp__copy_host(to, from, l[q] * es);
    }
  }
  ddp__parts_free(&pt);
  if (st == DDP_OK) st = ddp__shm_barrier(x, s); /* nobody leaves while a peer still reads its memory */
  return st;
}
