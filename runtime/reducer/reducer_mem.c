/* Bucket memory of the reducer: allocation (node-shared pool, malloc, or device memory through
 * the public device API), zeroing, copies, and the fp16/bf16 hook's conversions. Every memory
 * operation of the reducer goes through here, so a memory kind is added in one place. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kernels_internal.h"
#include "ddp_device.h"
#include "reducer_internal.h"

const char *ddp__rbuf_unsupported(ddp_comm_t *comm, ddp_mem_t mem) {
  if (mem == DDP_MEM_HOST) return NULL;
  if (mem == DDP_MEM_CUDA && ddp_device_available(comm)) return NULL;
  return "device-memory (DDP_MEM_CUDA) parameters need a device on this communicator (none is "
         "bound; DDP_DEVICE_EMULATE=1 emulates one)";
}

ddp_status_t ddp__rbuf_alloc(ddp_comm_t *comm, ddp__comm_t *c, ddp_mem_t mem, size_t bytes,
                             int want_pool, ddp_stream_t *stream, ddp__rbuf_t *out) {
  memset(out, 0, sizeof *out);
  out->mem = mem;
  out->bytes = bytes;
  size_t alloc = bytes ? bytes : 64;
  if (mem == DDP_MEM_CUDA) {
    DDP_TRY(ddp_device_malloc(comm, alloc, &out->ptr));
    ddp_status_t st = ddp_memset_async(comm, out->ptr, 0, alloc, stream);
    if (st == DDP_OK) st = ddp_stream_synchronize(comm, stream);
    if (st != DDP_OK) {
      ddp_device_free(comm, out->ptr);
      out->ptr = NULL;
    }
    return st;
  }
  if (want_pool && c->shm_ok && c->local_size > 1) {
    DDP_TRY(ddp_alloc(comm, alloc, &out->ptr));
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
  if (b->mem == DDP_MEM_CUDA) ddp_device_free(comm, b->ptr);
  else if (b->pooled) ddp_free(comm, b->ptr);
  else free(b->ptr);
  b->ptr = NULL;
}

ddp_status_t ddp__rbuf_zero(ddp_comm_t *comm, ddp_mem_t mem, void *ptr, size_t bytes, ddp_stream_t *stream) {
  if (!bytes) return DDP_OK;
  if (mem == DDP_MEM_CUDA) return ddp_memset_async(comm, ptr, 0, bytes, stream);
  memset(ptr, 0, bytes);
  return DDP_OK;
}

ddp_status_t ddp__rbuf_copy(ddp_comm_t *comm, ddp_mem_t mem, void *dst, const void *src, size_t bytes,
                            ddp_stream_t *stream) {
  if (!bytes || dst == src) return DDP_OK;
  if (mem == DDP_MEM_CUDA) return ddp_memcpy_async(comm, dst, src, bytes, stream);
  memcpy(dst, src, bytes);
  return DDP_OK;
}

size_t ddp__rbuf_release(ddp_mem_t mem, int pooled, void *ptr, size_t bytes) {
  if (mem != DDP_MEM_HOST || !bytes) return 0;
  long pg = sysconf(_SC_PAGESIZE);
  size_t page = pg > 0 ? (size_t)pg : 4096;
  uintptr_t a = ((uintptr_t)ptr + page - 1) & ~(uintptr_t)(page - 1);
  uintptr_t e = ((uintptr_t)ptr + bytes) & ~(uintptr_t)(page - 1);
  if (e <= a) return 0;
  /* Node-shared pages belong to the shared segment: MADV_DONTNEED would only unmap them from
   * this process (the memory stays used, and keeps its contents); MADV_REMOVE frees them.
   * Private pages: MADV_DONTNEED frees them and they come back zero-filled. */
#ifdef MADV_REMOVE
  if (pooled && madvise((void *)a, e - a, MADV_REMOVE) == 0) return e - a;
#endif
  if (!pooled && madvise((void *)a, e - a, MADV_DONTNEED) == 0) return e - a;
  return 0;
}

ddp_status_t ddp__rbuf_sync(ddp_comm_t *comm, ddp_mem_t mem, ddp_stream_t *stream) {
  if (mem != DDP_MEM_CUDA) return DDP_OK;
  return ddp_stream_synchronize(comm, stream);
}

/* The hooks convert the whole gradient twice per iteration, on the compute thread: the
 * collectives' conversion kernels run at memory speed (F16C chosen at run time, vectorised
 * bf16 rounding) and fold the 1/world scale into the same pass. */
ddp_status_t ddp__rbuf_compress(ddp_comm_t *comm, ddp_mem_t mem, void *dst_half, float *src,
                                size_t count, float scale, ddp_dtype_t half, ddp_stream_t *stream) {
  if (mem == DDP_MEM_CUDA) {
    if (scale != 1.0f) DDP_TRY(ddp_device_scale_async(comm, src, count, DDP_F32, scale, stream));
    return ddp_device_convert_async(comm, dst_half, half, src, DDP_F32, count, stream);
  }
  if (half == DDP_BF16)
    ddp__f32_to_bf16_scaled_n(dst_half, src, count, scale);
  else
    ddp__f32_to_f16_scaled_n(dst_half, src, count, scale);
  return DDP_OK;
}

ddp_status_t ddp__rbuf_decompress(ddp_comm_t *comm, ddp_mem_t mem, float *dst, const void *src_half,
                                  size_t count, ddp_dtype_t half, ddp_stream_t *stream) {
  if (mem == DDP_MEM_CUDA) return ddp_device_convert_async(comm, dst, DDP_F32, src_half, half, count, stream);
  if (half == DDP_BF16)
    ddp__bf16_to_f32_n(dst, src_half, count);
  else
    ddp__f16_to_f32_n(dst, src_half, count);
  return DDP_OK;
}
