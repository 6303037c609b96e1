/* Bucket memory of the reducer: allocation (node-shared pool, malloc, or device memory through
 * the public device API), zeroing, copies, and the fp16/bf16 hook's conversions. Every memory
 * operation of the reducer goes through here, so a memory kind is added in one place. */
#include <stdlib.h>
#include <string.h>

#include "../collectives/coll_internal.h"
#include "ddp_device.h"
#include "reducer_internal.h"

const char *ddp__rbuf_unsupported(ddp_comm_t *comm, ddp_mem_t mem) {
  if (mem == DDP_MEM_HOST) return NULL;
  if (mem == DDP_MEM_CUDA && ddp_device_available(comm)) return NULL;
  return "device-memory (DDP_MEM_CUDA) parameters need a device on this communicator (none is "
         "bound; DDP_DEVICE_EMULATE=1 emulates one)";
}

ddp_status_t ddp__rbuf_alloc(ddp_comm_t *comm, ddp__comm_t *c, ddp_mem_t mem, size_t bytes,
                             int want_pool, void *stream, ddp__rbuf_t *out) {
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

ddp_status_t ddp__rbuf_zero(ddp_comm_t *comm, ddp_mem_t mem, void *ptr, size_t bytes, void *stream) {
  if (!bytes) return DDP_OK;
  if (mem == DDP_MEM_CUDA) return ddp_memset_async(comm, ptr, 0, bytes, stream);
  memset(ptr, 0, bytes);
  return DDP_OK;
}

ddp_status_t ddp__rbuf_copy(ddp_comm_t *comm, ddp_mem_t mem, void *dst, const void *src, size_t bytes,
                            void *stream) {
  if (!bytes || dst == src) return DDP_OK;
  if (mem == DDP_MEM_CUDA) return ddp_memcpy_async(comm, dst, src, bytes, stream);
  memcpy(dst, src, bytes);
  return DDP_OK;
}

ddp_status_t ddp__rbuf_sync(ddp_comm_t *comm, ddp_mem_t mem, void *stream) {
  if (mem != DDP_MEM_CUDA) return DDP_OK;
  return ddp_stream_synchronize(comm, stream);
}

/* The hooks convert the whole gradient twice per iteration, on the compute thread: they must
 * run at memory speed. F16C does f32 <-> f16 in hardware (chosen at run time; the build does
 * not assume it); bf16 is a branch-free rounding loop the compiler vectorises. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define DDP__HAVE_F16C_PATH 1
__attribute__((target("avx,f16c"))) static void f32_to_f16_f16c(uint16_t *dst, const float *src,
                                                                size_t count, float scale) {
  size_t i = 0;
  __m256 s = _mm256_set1_ps(scale);
  for (; i + 8 <= count; i += 8) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(src + i), s);
    _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < count; i++) dst[i] = ddp__f32_to_f16(src[i] * scale);
}
__attribute__((target("avx,f16c"))) static void f16_to_f32_f16c(float *dst, const uint16_t *src,
                                                                size_t count) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
  for (; i < count; i++) dst[i] = ddp__f16_to_f32(src[i]);
}
/* cpuid leaf 1 (ECX bit 29 F16C, 28 AVX, 27 OSXSAVE) and the OS saving YMM state (XGETBV),
 * rather than __builtin_cpu_supports("f16c"), which clang 14 does not know. */
static int have_f16c(void) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
  if (!((c >> 29) & 1u) || !((c >> 28) & 1u) || !((c >> 27) & 1u)) return 0;
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  (void)hi;
  return (lo & 6u) == 6u;
}
#else
#define DDP__HAVE_F16C_PATH 0
#endif

static void f32_to_bf16_loop(uint16_t *restrict dst, const float *restrict src, size_t count,
                             float scale) {
  for (size_t i = 0; i < count; i++) {
    float f = src[i] * scale;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    uint32_t nan = (u & 0x7fffffffu) > 0x7f800000u;
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    dst[i] = (uint16_t)(nan ? ((u >> 16) | 0x40u) : rounded);
  }
}

static void bf16_to_f32_loop(float *restrict dst, const uint16_t *restrict src, size_t count) {
  for (size_t i = 0; i < count; i++) {
    uint32_t u = (uint32_t)src[i] << 16;
    memcpy(&dst[i], &u, sizeof u);
  }
}

ddp_status_t ddp__rbuf_compress(ddp_comm_t *comm, ddp_mem_t mem, void *dst_half, float *src,
                                size_t count, float scale, ddp_dtype_t half, void *stream) {
  if (mem == DDP_MEM_CUDA) {
    if (scale != 1.0f) DDP_TRY(ddp_device_scale_async(comm, src, count, DDP_F32, scale, stream));
    return ddp_device_convert_async(comm, dst_half, half, src, DDP_F32, count, stream);
  }
  uint16_t *d = dst_half;
  if (half == DDP_BF16) {
    f32_to_bf16_loop(d, src, count, scale);
    return DDP_OK;
  }
#if DDP__HAVE_F16C_PATH
  if (have_f16c()) {
    f32_to_f16_f16c(d, src, count, scale);
    return DDP_OK;
  }
#endif
  for (size_t i = 0; i < count; i++) d[i] = ddp__f32_to_f16(src[i] * scale);
  return DDP_OK;
}

ddp_status_t ddp__rbuf_decompress(ddp_comm_t *comm, ddp_mem_t mem, float *dst, const void *src_half,
                                  size_t count, ddp_dtype_t half, void *stream) {
  if (mem == DDP_MEM_CUDA) return ddp_device_convert_async(comm, dst, DDP_F32, src_half, half, count, stream);
  if (half == DDP_BF16) {
    bf16_to_f32_loop(dst, src_half, count);
    return DDP_OK;
  }
#if DDP__HAVE_F16C_PATH
  if (have_f16c()) {
    f16_to_f32_f16c(dst, src_half, count);
    return DDP_OK;
  }
#endif
  ddp__f16_to_f32_n(dst, src_half, count);
  return DDP_OK;
}
