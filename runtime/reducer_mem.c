/* Bucket memory of the reducer: allocation (node-shared pool or malloc), zeroing, copies and
 * the fp16/bf16 hook's conversions. Host only for now; device buckets are added here. */
#include <stdlib.h>
#include <string.h>

#include "../collectives/coll_internal.h"
#include "reducer_internal.h"

const char *ddp__rbuf_unsupported(ddp_mem_t mem) {
  if (mem == DDP_MEM_HOST) return NULL;
  return "device-memory (DDP_MEM_CUDA) parameters are not supported by the reducer yet";
}

ddp_status_t ddp__rbuf_alloc(ddp_comm_t *comm, ddp__comm_t *c, ddp_mem_t mem, size_t bytes,
                             int want_pool, void *stream, ddp__rbuf_t *out) {
  (void)stream;
  memset(out, 0, sizeof *out);
  out->mem = mem;
  out->bytes = bytes;
  if (mem != DDP_MEM_HOST) return ddp__error(DDP_ENOTSUP, "%s", ddp__rbuf_unsupported(mem));
  size_t alloc = bytes ? bytes : 64;
  if (want_pool && c->shm_ok && c->local_size > 1) {
    ddp_status_t st = ddp_alloc(comm, alloc, &out->ptr);
    if (st != DDP_OK) return st;
    out->pooled = 1;
  } else {
    alloc = (alloc + 63) & ~(size_t)63;
    out->ptr = aligned_alloc(64, alloc);
    if (!out->ptr) return ddp__error(DDP_ENOMEM, "reducer: out of memory for a %zu-byte bucket", bytes);
  }
  memset(out->ptr, 0, bytes);
  return DDP_OK;
}

void ddp__rbuf_free(ddp_comm_t *comm, ddp__rbuf_t *b) {
  if (!b->ptr) return;
  if (b->pooled) ddp_free(comm, b->ptr);
  else free(b->ptr);
  b->ptr = NULL;
}

void ddp__rbuf_zero(ddp_mem_t mem, void *ptr, size_t bytes, void *stream) {
  (void)mem;
  (void)stream;
  if (bytes) memset(ptr, 0, bytes);
}

void ddp__rbuf_copy(ddp_mem_t mem, void *dst, const void *src, size_t bytes, void *stream) {
  (void)mem;
  (void)stream;
  if (bytes && dst != src) memcpy(dst, src, bytes);
}

void ddp__rbuf_compress(ddp_mem_t mem, void *dst_half, const float *src, size_t count,
                        float scale, ddp_dtype_t half, void *stream) {
  (void)mem;
  (void)stream;
  uint16_t *d = dst_half;
  if (half == DDP_BF16)
    for (size_t i = 0; i < count; i++) d[i] = ddp__f32_to_bf16(src[i] * scale);
  else
    for (size_t i = 0; i < count; i++) d[i] = ddp__f32_to_f16(src[i] * scale);
}

void ddp__rbuf_decompress(ddp_mem_t mem, float *dst, const void *src_half, size_t count,
                          ddp_dtype_t half, void *stream) {
  (void)mem;
  (void)stream;
  if (half == DDP_BF16) ddp__bf16_to_f32_n(dst, src_half, count);
  else ddp__f16_to_f32_n(dst, src_half, count);
}
