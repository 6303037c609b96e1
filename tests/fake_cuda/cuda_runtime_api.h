/* A fake of the part of the CUDA runtime API that runtime/device/device_cuda.c, device_probe.c and
 * collectives/transports/coll_nccl.c use, for the unit tests of their error handling without a GPU
 * (tests/cuda_fake.c; controls in fake_cuda.h). It keeps the runtime's per-thread last error:
 * a failing call sets it, cudaGetLastError returns and clears it, cudaPeekAtLastError returns
 * it, and cudaEventQuery on an unfinished event sets cudaErrorNotReady, as the real runtime
 * does. Not a CUDA implementation: memory is host memory, work runs at once. */
#ifndef DDP_FAKE_CUDA_RUNTIME_API_H
#define DDP_FAKE_CUDA_RUNTIME_API_H

#include <stddef.h>

typedef enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInsufficientDriver = 35,
  cudaErrorInvalidDevice = 101,
  cudaErrorNotReady = 600,
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchFailure = 719,
  cudaErrorInvalidConfiguration = 9
} cudaError_t;

typedef struct fake_cuda_stream *cudaStream_t;
typedef struct fake_cuda_event *cudaEvent_t;

enum cudaMemoryType {
  cudaMemoryTypeUnregistered = 0,
  cudaMemoryTypeHost = 1,
  cudaMemoryTypeDevice = 2,
  cudaMemoryTypeManaged = 3
};
struct cudaPointerAttributes {
  enum cudaMemoryType type;
  int device;
  void *devicePointer, *hostPointer;
};
struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  int major, minor;
};
enum cudaMemcpyKind { cudaMemcpyHostToHost = 0, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                      cudaMemcpyDeviceToDevice, cudaMemcpyDefault };
#define cudaStreamNonBlocking 0x01
#define cudaEventDisableTiming 0x02
typedef void (*cudaHostFn_t)(void *userData);

const char *cudaGetErrorString(cudaError_t e);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaSetDevice(int dev);
cudaError_t cudaGetDevice(int *dev);
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int dev);
cudaError_t cudaDeviceGetPCIBusId(char *buf, int len, int dev);
cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaMallocHost(void **p, size_t bytes);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventQuery(cudaEvent_t e);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind k,
                            cudaStream_t s);
cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t s);
cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *arg);

#endif
