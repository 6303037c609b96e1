// CUDA kernels of the device layer: element-wise reduce (every dtype, sum/min/max/prod),
// scale (multiply, or divide exactly like the host's avg), f32 <-> f16/bf16 conversion and the
// inf/nan check for dynamic loss scaling. Memory-bound: 16-byte vector loads when aligned,
// grid-stride loops, f16/bf16 computed in f32 and rounded to nearest even.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#define DDP_KAPI extern "C" __attribute__((visibility("hidden")))

namespace {

// Must match ddp_dtype_t / ddp_op_t in ddp_types.h.
enum { T_F32 = 0, T_F64, T_F16, T_BF16, T_I32, T_I64, T_U8 };
enum { O_SUM = 0, O_AVG, O_MIN, O_MAX, O_PROD };

template <class S, class C>
struct Plain {
  typedef S storage;
  typedef C compute;
  __device__ static C load(S v) { return (C)v; }
  __device__ static S store(C v) { return (S)v; }
};
struct Half {
  typedef uint16_t storage;
  typedef float compute;
  __device__ static float load(uint16_t v) { return __half2float(__ushort_as_half(v)); }
  __device__ static uint16_t store(float v) { return __half_as_ushort(__float2half_rn(v)); }
};
struct BHalf {
  typedef uint16_t storage;
  typedef float compute;
  __device__ static float load(uint16_t v) { return __bfloat162float(__ushort_as_bfloat16(v)); }
  __device__ static uint16_t store(float v) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
  }
};
typedef Plain<float, float> F32;
typedef Plain<double, double> F64;
typedef Plain<int32_t, int32_t> I32;
typedef Plain<int64_t, int64_t> I64;
typedef Plain<uint8_t, unsigned> U8;

template <int OP, class C>
__device__ __forceinline__ C apply(C a, C b) {
  if (OP == O_SUM) return a + b;
  if (OP == O_PROD) return a * b;
  if (OP == O_MIN) return b < a ? b : a;
  return b > a ? b : a;
}

template <class Tr, int OP>
__global__ void k_reduce(typename Tr::storage *dst, const typename Tr::storage *src, size_t n,
                         int vec) {
  typedef typename Tr::storage S;
  const int V = 16 / sizeof(S);
  size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t nv = vec ? n / V : 0;
  for (size_t i = tid; i < nv; i += stride) {
    union {
      uint4 u;
      S s[16 / sizeof(S)];
    } a, b;
    a.u = reinterpret_cast<const uint4 *>(dst)[i];
    b.u = reinterpret_cast<const uint4 *>(src)[i];
#pragma unroll
    for (int k = 0; k < V; k++) a.s[k] = Tr::store(apply<OP>(Tr::load(a.s[k]), Tr::load(b.s[k])));
    reinterpret_cast<uint4 *>(dst)[i] = a.u;
  }
  for (size_t i = nv * V + tid; i < n; i += stride)
    dst[i] = Tr::store(apply<OP>(Tr::load(dst[i]), Tr::load(src[i])));
}

template <class Tr>
__global__ void k_scale(typename Tr::storage *buf, size_t n, double factor, int divide) {
  typedef typename Tr::compute C;
  C f = (C)factor;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    C v = Tr::load(buf[i]);
    buf[i] = Tr::store(divide ? v / f : v * f);
  }
}

template <class In, class Out>
__global__ void k_convert(typename Out::storage *dst, const typename In::storage *src, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = Out::store((float)In::load(src[i]));
}

template <class Tr>
__global__ void k_nonfinite(const typename Tr::storage *buf, size_t n, int *flag) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  int bad = 0;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    bad |= !isfinite((double)Tr::load(buf[i]));
  if (bad) *flag = 1;  // every writer writes 1: the race is benign
}

const int THREADS = 256;

unsigned blocks_for(size_t work) {
  size_t b = (work + THREADS - 1) / THREADS;
  if (b > 8192) b = 8192;  // grid-stride beyond this: enough to fill any current GPU
  return b ? (unsigned)b : 1u;
}

// Each launcher returns cudaGetLastError() after its launch: the launch's own error, provided
// no earlier call on this thread left one behind. The device layer clears every error it
// handles (runtime/device/device_cuda.c, including cudaEventQuery's cudaErrorNotReady), so a stale
// error here can only come from the application's own unchecked calls on this thread.
template <class Tr>
int launch_reduce(void *dst, const void *src, size_t n, int op, cudaStream_t s) {
  typedef typename Tr::storage S;
  const size_t V = 16 / sizeof(S);
  int vec = ((uintptr_t)dst % 16 == 0) && ((uintptr_t)src % 16 == 0);
  unsigned g = blocks_for(vec ? n / V + V : n);
  S *d = (S *)dst;
  const S *r = (const S *)src;
  switch (op) {
    case O_SUM: k_reduce<Tr, O_SUM><<<g, THREADS, 0, s>>>(d, r, n, vec); break;
    case O_MIN: k_reduce<Tr, O_MIN><<<g, THREADS, 0, s>>>(d, r, n, vec); break;
    case O_MAX: k_reduce<Tr, O_MAX><<<g, THREADS, 0, s>>>(d, r, n, vec); break;
    case O_PROD: k_reduce<Tr, O_PROD><<<g, THREADS, 0, s>>>(d, r, n, vec); break;
    default: return (int)cudaErrorInvalidValue;
  }
  return (int)cudaGetLastError();
}

template <class Tr>
int launch_scale(void *buf, size_t n, double factor, int divide, cudaStream_t s) {
  k_scale<Tr><<<blocks_for(n), THREADS, 0, s>>>((typename Tr::storage *)buf, n, factor, divide);
  return (int)cudaGetLastError();
}

template <class Tr>
int launch_nonfinite(const void *buf, size_t n, int *flag, cudaStream_t s) {
  k_nonfinite<Tr><<<blocks_for(n), THREADS, 0, s>>>((const typename Tr::storage *)buf, n, flag);
  return (int)cudaGetLastError();
}

}  // namespace

DDP_KAPI int ddp__cuda_reduce(void *dst, const void *src, size_t count, int dtype, int op,
                              void *stream) {
  cudaStream_t s = (cudaStream_t)stream;
  switch (dtype) {
    case T_F32: return launch_reduce<F32>(dst, src, count, op, s);
    case T_F64: return launch_reduce<F64>(dst, src, count, op, s);
    case T_F16: return launch_reduce<Half>(dst, src, count, op, s);
    case T_BF16: return launch_reduce<BHalf>(dst, src, count, op, s);
    case T_I32: return launch_reduce<I32>(dst, src, count, op, s);
    case T_I64: return launch_reduce<I64>(dst, src, count, op, s);
    case T_U8: return launch_reduce<U8>(dst, src, count, op, s);
  }
  return (int)cudaErrorInvalidValue;
}

DDP_KAPI int ddp__cuda_scale(void *buf, size_t count, int dtype, double factor, int divide,
                             void *stream) {
  cudaStream_t s = (cudaStream_t)stream;
  switch (dtype) {
    case T_F32: return launch_scale<F32>(buf, count, factor, divide, s);
    case T_F64: return launch_scale<F64>(buf, count, factor, divide, s);
    case T_F16: return launch_scale<Half>(buf, count, factor, divide, s);
    case T_BF16: return launch_scale<BHalf>(buf, count, factor, divide, s);
    case T_I32: return launch_scale<I32>(buf, count, factor, divide, s);
    case T_I64: return launch_scale<I64>(buf, count, factor, divide, s);
    case T_U8: return launch_scale<U8>(buf, count, factor, divide, s);
  }
  return (int)cudaErrorInvalidValue;
}

DDP_KAPI int ddp__cuda_convert(void *dst, int dst_dtype, const void *src, int src_dtype,
                               size_t count, void *stream) {
  cudaStream_t s = (cudaStream_t)stream;
  unsigned g = blocks_for(count);
  if (src_dtype == T_F32 && dst_dtype == T_F16)
    k_convert<F32, Half><<<g, THREADS, 0, s>>>((uint16_t *)dst, (const float *)src, count);
  else if (src_dtype == T_F32 && dst_dtype == T_BF16)
    k_convert<F32, BHalf><<<g, THREADS, 0, s>>>((uint16_t *)dst, (const float *)src, count);
  else if (src_dtype == T_F16 && dst_dtype == T_F32)
    k_convert<Half, F32><<<g, THREADS, 0, s>>>((float *)dst, (const uint16_t *)src, count);
  else if (src_dtype == T_BF16 && dst_dtype == T_F32)
    k_convert<BHalf, F32><<<g, THREADS, 0, s>>>((float *)dst, (const uint16_t *)src, count);
  else if (src_dtype == T_F32 && dst_dtype == T_F32)
    return (int)cudaMemcpyAsync(dst, src, count * sizeof(float), cudaMemcpyDeviceToDevice, s);
  else
    return (int)cudaErrorInvalidValue;
  return (int)cudaGetLastError();
}

DDP_KAPI int ddp__cuda_nonfinite(const void *buf, size_t count, int dtype, int *flag,
                                 void *stream) {
  cudaStream_t s = (cudaStream_t)stream;
  switch (dtype) {
    case T_F32: return launch_nonfinite<F32>(buf, count, flag, s);
    case T_F64: return launch_nonfinite<F64>(buf, count, flag, s);
    case T_F16: return launch_nonfinite<Half>(buf, count, flag, s);
    case T_BF16: return launch_nonfinite<BHalf>(buf, count, flag, s);
  }
  return 0;  // integers are always finite
}
