/* Pieces of the shm algorithms (shm.h): the reductions over the node's inputs, the staged
 * copy-in, and the reduce-scatter / allgather phases hier runs on a node. */
#include <string.h>

#include "shm.h"

/* A span of this rank's reduction work on the timeline (DDP_TIMELINE), with its bytes. */
void ddp__shm_span(ddp__ctx_t *x, char ph, const char *name, size_t bytes) {
  if (!x->c->timeline) return;
  char args[48];
  snprintf(args, sizeof args, "{\"bytes\":%zu}", bytes);
  ddp__timeline_event(x->c->timeline, ph, name, "shm", ph == 'B' ? args : NULL);
}

/* dst = in[0] op in[1] op ... in[n-1] (dst may be one of the inputs only if it is in[0]). */
void ddp__shm_reduce_n(void *dst, const char *const *in, int n, size_t off, size_t count,
                     ddp_dtype_t dtype, ddp_op_t op) {
  if (count == 0) return;
  size_t es = ddp_dtype_size(dtype), b = off * es;
  if (n == 1) {
    ddp__copy_host(dst, in[0] + b, count * es);
    return;
  }
  ddp__reduce3_host(dst, in[0] + b, in[1] + b, count, dtype, op);
  for (int q = 2; q < n; q++) ddp__reduce_host(dst, in[q] + b, count, dtype, op);
}

/* This rank's slice [off, off + count) of the reduction into dst. When dst is this rank's own
 * input there (in[me] + off), the other inputs are added to it in place; otherwise all n
 * inputs are combined into dst. */
void ddp__shm_reduce_slice(void *dst, const char *const *in, int n, int me, size_t off,
                         size_t count, ddp_dtype_t dtype, ddp_op_t op) {
  size_t es = ddp_dtype_size(dtype);
  if ((const char *)dst == in[me] + off * es) {
    for (int q = 0; q < n; q++)
      if (q != me) ddp__reduce_host(dst, in[q] + off * es, count, dtype, op);
  } else {
    ddp__shm_reduce_n(dst, in, n, off, count, dtype, op);
  }
}

/* Copies the slices other ranks will read (all but `me`) of a staged chunk. */
void ddp__shm_copy_in_others(char *stage, const char *src, const size_t *o, const size_t *l, int me,
                           int n, size_t es) {
  size_t head = o[me] * es, tail_off = (o[me] + l[me]) * es, total = (o[n - 1] + l[n - 1]) * es;
  if (head) memcpy(stage, src, head);
  if (total > tail_off) memcpy(stage + tail_off, src + tail_off, total - tail_off);
}

size_t ddp__shm_chunk(ddp_dtype_t dtype) { return DDP__SHM_HALF_BYTES / ddp_dtype_size(dtype); }

ddp_status_t ddp__shm_reduce_scatter(ddp__ctx_t *x, const void *send, void *recv, size_t count,
                                     ddp_dtype_t dtype, ddp_op_t op) {
  ddp__shm_t *s = NULL;
  DDP_TRY(ddp__shm_get(x, &s));
  int me = s->me, n = s->n;
  size_t es = ddp_dtype_size(dtype), bytes = count * es;
  if (bytes > DDP__SHM_HALF_BYTES)
    return ddp__error(DDP_EINTERNAL, "shm reduce-scatter of %zu bytes exceeds the %zu-byte chunk",
                      bytes, DDP__SHM_HALF_BYTES);
  ddp__parts_t pt;
  DDP_TRY(ddp__parts_init(&pt, n, "shm"));
  size_t *o = pt.offs, *l = pt.lens;
  ddp__split(count, n, o, l);
  size_t h = (s->flip++ & 1) * DDP__SHM_HALF_BYTES;
  ddp__shm_loc_t lin = ddp__shm_locate(x, send, bytes);
  s->ctrl[me]->desc[0][0] = lin;
  if (lin.id == DDP__SHM_LOC_STAGE) ddp__shm_copy_in_others(s->stage[me] + h, send, o, l, me, n, es);
  ddp_status_t st = ddp__shm_barrier(x, s);
  for (int q = 0; q < n && st == DDP_OK; q++) {
    char *p = NULL;
    st = ddp__shm_resolve(x, q, s->ctrl[q]->desc[0][0], &p);
    s->in[q] = p ? p : s->stage[q] + h;
  }
  if (lin.id == DDP__SHM_LOC_STAGE) s->in[me] = send;
  if (st == DDP_OK) {
    ddp__shm_reduce_slice((char *)recv + o[me] * es, s->in, n, me, o[me], l[me], dtype, op);
  }
  ddp__parts_free(&pt);
  return st;
}

ddp_status_t ddp__shm_allgather(ddp__ctx_t *x, void *recv, size_t count, ddp_dtype_t dtype) {
  ddp__shm_t *s = NULL;
  DDP_TRY(ddp__shm_get(x, &s));
  int me = s->me, n = s->n;
  size_t es = ddp_dtype_size(dtype), bytes = count * es;
  ddp__parts_t pt;
  DDP_TRY(ddp__parts_init(&pt, n, "shm"));
  size_t *o = pt.offs, *l = pt.lens;
  ddp__split(count, n, o, l);
  size_t h = (s->flip++ & 1) * DDP__SHM_HALF_BYTES;
  ddp__shm_loc_t lres = ddp__shm_locate(x, recv, bytes);
  s->ctrl[me]->desc[1][1] = lres;
  if (lres.id == DDP__SHM_LOC_STAGE)
    memcpy(s->stage[me] + h + o[me] * es, (char *)recv + o[me] * es, l[me] * es);
  ddp_status_t st = ddp__shm_barrier(x, s);
  for (int q = 0; q < n && st == DDP_OK; q++) {
    if (q == me) continue;
    char *p = NULL;
    st = ddp__shm_resolve(x, q, s->ctrl[q]->desc[1][1], &p);
    const char *from = p ? p + o[q] * es : s->stage[q] + h + o[q] * es;
    if (st == DDP_OK) ddp__copy_host((char *)recv + o[q] * es, from, l[q] * es);
  }
  ddp__parts_free(&pt);
  if (st == DDP_OK) st = ddp__shm_barrier(x, s);
  return st;
}
