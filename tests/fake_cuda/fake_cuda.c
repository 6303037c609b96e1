/* The fake CUDA runtime, kernel launchers and NCCL behind the headers of this folder (see
 * there). The launchers end as device_kernels.cu's do, `return cudaGetLastError()` after the
 * launch, so a stale error left by an earlier call shows up as a failed launch, as on a GPU. */
#include "fake_cuda.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- CUDA runtime ---------------------------------------------------------------------------- */
static _Thread_local cudaError_t last_error = cudaSuccess;
static _Thread_local int current_device = 0;
static int ndev = -1;
static cudaError_t sticky = cudaSuccess;
static char fail_fn[64];
static cudaError_t fail_err = cudaSuccess;
int fake_cuda_launches = 0;

struct fake_cuda_stream {
  int dummy;
};
struct fake_cuda_event {
  int pending;
};

typedef struct alloc {
  void *p;
  size_t bytes;
  int device; /* -1: pinned host */
  struct alloc *next;
} alloc_t;
static alloc_t *allocs;

void fake_cuda_set_devices(int n) { ndev = n; }
void fake_cuda_event_pending(cudaEvent_t e, int pending) { e->pending = pending; }
void fake_cuda_fail_next(const char *fn, cudaError_t e) {
  snprintf(fail_fn, sizeof fail_fn, "%s", fn);
  fail_err = e;
}
void fake_cuda_sticky(cudaError_t e) { sticky = e; }
int fake_cuda_current_device(void) { return current_device; }

/* Every entry starts here: a sticky error, or an injected failure of this function. */
static cudaError_t enter(const char *fn) {
  if (sticky != cudaSuccess) return last_error = sticky;
  if (fail_fn[0] && !strcmp(fail_fn, fn)) {
    fail_fn[0] = '\0';
    return last_error = fail_err;
  }
  return cudaSuccess;
}
#define ENTER(fn)                        \
  do {                                   \
    cudaError_t e_ = enter(fn);          \
    if (e_ != cudaSuccess) return e_;    \
  } while (0)

const char *cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
  }
  return "unknown error";
}

cudaError_t cudaGetLastError(void) {
  cudaError_t e = last_error;
  if (sticky == cudaSuccess) last_error = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError(void) { return last_error; }

cudaError_t cudaGetDeviceCount(int *n) {
  ENTER("cudaGetDeviceCount");
  if (ndev < 0) return last_error = cudaErrorInsufficientDriver;
  *n = ndev;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int dev) {
  ENTER("cudaSetDevice");
  if (dev < 0 || dev >= ndev) return last_error = cudaErrorInvalidDevice;
  current_device = dev;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int *dev) {
  *dev = current_device;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int dev) {
  ENTER("cudaGetDeviceProperties");
  if (dev < 0 || dev >= ndev) return last_error = cudaErrorInvalidDevice;
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "Fake GPU %d", dev);
  p->totalGlobalMem = (size_t)1 << 30;
  p->major = 9;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetPCIBusId(char *buf, int len, int dev) {
  ENTER("cudaDeviceGetPCIBusId");
  if (dev < 0 || dev >= ndev) return last_error = cudaErrorInvalidDevice;
  snprintf(buf, (size_t)len, "0000:%02X:00.0", 0x10 + dev);
  return cudaSuccess;
}

static cudaError_t track(void **p, size_t bytes, int device) {
  alloc_t *a = calloc(1, sizeof *a);
  void *m = malloc(bytes ? bytes : 1);
  if (!a || !m) {
    free(a);
    free(m);
    return last_error = cudaErrorMemoryAllocation;
  }
  a->p = m;
  a->bytes = bytes;
  a->device = device;
  a->next = allocs;
  allocs = a;
  *p = m;
  return cudaSuccess;
}
static cudaError_t untrack(void *p) {
  for (alloc_t **pp = &allocs; *pp; pp = &(*pp)->next) {
    if ((*pp)->p == p) {
      alloc_t *a = *pp;
      *pp = a->next;
      free(a->p);
      free(a);
      return cudaSuccess;
    }
  }
  return last_error = cudaErrorInvalidValue;
}
cudaError_t cudaMalloc(void **p, size_t bytes) {
  ENTER("cudaMalloc");
  return track(p, bytes, current_device);
}
cudaError_t cudaFree(void *p) {
  ENTER("cudaFree");
  return untrack(p);
}
cudaError_t cudaMallocHost(void **p, size_t bytes) {
  ENTER("cudaMallocHost");
  return track(p, bytes, -1);
}
cudaError_t cudaFreeHost(void *p) {
  ENTER("cudaFreeHost");
  return untrack(p);
}
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p) {
  ENTER("cudaPointerGetAttributes");
  for (alloc_t *x = allocs; x; x = x->next) {
    if ((const char *)p >= (const char *)x->p && (const char *)p < (const char *)x->p + x->bytes) {
      memset(a, 0, sizeof *a);
      a->type = x->device < 0 ? cudaMemoryTypeHost : cudaMemoryTypeDevice;
      a->device = x->device < 0 ? current_device : x->device;
      return cudaSuccess;
    }
  }
  return last_error = cudaErrorInvalidValue; /* as older runtimes answer for plain host memory */
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) {
  (void)flags;
  ENTER("cudaStreamCreateWithFlags");
  *s = calloc(1, sizeof **s);
  return *s ? cudaSuccess : (last_error = cudaErrorMemoryAllocation);
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  ENTER("cudaStreamDestroy");
  free(s);
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  (void)s;
  ENTER("cudaStreamSynchronize");
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags) {
  (void)flags;
  ENTER("cudaEventCreateWithFlags");
  *e = calloc(1, sizeof **e);
  return *e ? cudaSuccess : (last_error = cudaErrorMemoryAllocation);
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  ENTER("cudaEventDestroy");
  free(e);
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  (void)e;
  (void)s;
  ENTER("cudaEventRecord");
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags) {
  (void)s;
  (void)e;
  (void)flags;
  ENTER("cudaStreamWaitEvent");
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  (void)e;
  ENTER("cudaEventSynchronize");
  return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
  ENTER("cudaEventQuery");
  /* "Not ready" is reported and also recorded as the thread's last error (the trap). */
  if (e->pending) return last_error = cudaErrorNotReady;
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind k,
                            cudaStream_t s) {
  (void)k;
  (void)s;
  ENTER("cudaMemcpyAsync");
  memmove(dst, src, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t s) {
  (void)s;
  ENTER("cudaMemsetAsync");
  memset(dst, value, bytes);
  return cudaSuccess;
}
cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *arg) {
  (void)s;
  ENTER("cudaLaunchHostFunc");
  fn(arg);
  return cudaSuccess;
}

/* ---- kernel launchers (device_kernels.cu's interface) ---------------------------------------- */
static int launch(void) {
  fake_cuda_launches++;
  /* A kernel launch reports a failure only through the thread's last error. */
  if (sticky != cudaSuccess) last_error = sticky;
  else if (fail_fn[0] && !strcmp(fail_fn, "launch")) {
    fail_fn[0] = '\0';
    last_error = fail_err;
  }
  return (int)cudaGetLastError();
}
int ddp__cuda_reduce(void *dst, const void *src, size_t count, int dtype, int op, void *stream);
int ddp__cuda_scale(void *buf, size_t count, int dtype, double factor, int divide, void *stream);
int ddp__cuda_convert(void *dst, int dst_dtype, const void *src, int src_dtype, size_t count,
                      void *stream);
int ddp__cuda_nonfinite(const void *buf, size_t count, int dtype, int *flag, void *stream);
int ddp__cuda_reduce(void *dst, const void *src, size_t count, int dtype, int op, void *stream) {
  (void)dst, (void)src, (void)count, (void)dtype, (void)op, (void)stream;
  return launch();
}
int ddp__cuda_scale(void *buf, size_t count, int dtype, double factor, int divide, void *stream) {
  (void)buf, (void)count, (void)dtype, (void)factor, (void)divide, (void)stream;
  return launch();
}
int ddp__cuda_convert(void *dst, int dst_dtype, const void *src, int src_dtype, size_t count,
                      void *stream) {
  (void)dst, (void)dst_dtype, (void)src, (void)src_dtype, (void)count, (void)stream;
  return launch();
}
int ddp__cuda_nonfinite(const void *buf, size_t count, int dtype, int *flag, void *stream) {
  (void)buf, (void)count, (void)dtype, (void)flag, (void)stream;
  return launch();
}

/* ---- NCCL -------------------------------------------------------------------------------------- */
fake_nccl_script_t fake_nccl;
static MPI_Comm data_comm = MPI_COMM_NULL;
static char nccl_last[256];

struct fake_nccl_comm {
  int rank, nranks, blocking;
  int polls_left;     /* ncclInProgress answers left; -1: forever */
  ncclResult_t async; /* reported once polls_left is 0 */
};

void fake_nccl_reset(MPI_Comm c) {
  memset(&fake_nccl, 0, sizeof fake_nccl);
  fake_nccl.fail_init_rank = -1;
  fake_nccl.async_after_op = ncclSuccess;
  nccl_last[0] = '\0';
  data_comm = c;
}

const char *ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
  }
  return "unknown result code";
}
const char *ncclGetLastError(ncclComm_t comm) {
  (void)comm;
  return nccl_last;
}
static ncclResult_t nfail(ncclResult_t r, const char *why) {
  snprintf(nccl_last, sizeof nccl_last, "fake NCCL: %s", why);
  return r;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  fake_nccl.uniqueid_calls++;
  if (fake_nccl.fail_uniqueid) return nfail(ncclSystemError, "ncclGetUniqueId told to fail");
  memset(id, 0, sizeof *id);
  snprintf(id->internal, sizeof id->internal, "fake-nccl-id");
  return ncclSuccess;
}

static ncclResult_t init(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank, int blocking) {
  fake_nccl.init_calls++;
  fake_nccl.blocking_seen = blocking;
  if (strcmp(id.internal, "fake-nccl-id") != 0) return nfail(ncclInvalidArgument, "bad unique id");
  if (fake_nccl.fail_init_rank == rank) return nfail(ncclSystemError, "init told to fail on this rank");
  struct fake_nccl_comm *c = calloc(1, sizeof *c);
  if (!c) return nfail(ncclSystemError, "out of memory");
  c->rank = rank;
  c->nranks = nranks;
  c->blocking = blocking;
  c->polls_left = blocking == 0 ? fake_nccl.init_polls : 0;
  c->async = ncclSuccess;
  *comm = c;
  return c->polls_left != 0 ? ncclInProgress : ncclSuccess;
}
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
  return init(comm, nranks, id, rank, -1);
}
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config) {
  return init(comm, nranks, id, rank, config ? config->blocking : -1);
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *async) {
  if (!c) return nfail(ncclInvalidArgument, "NULL communicator");
  if (c->polls_left != 0) {
    if (c->polls_left > 0) c->polls_left--;
    *async = ncclInProgress;
    return ncclSuccess;
  }
  *async = c->async;
  return ncclSuccess;
}
ncclResult_t ncclCommFinalize(ncclComm_t c) {
  fake_nccl.finalize_calls++;
  c->polls_left = 2;
  return ncclInProgress;
}
ncclResult_t ncclCommDestroy(ncclComm_t c) {
  fake_nccl.destroy_calls++;
  free(c);
  return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t c) {
  fake_nccl.abort_calls++;
  free(c);
  return ncclSuccess;
}

static MPI_Datatype mpi_type(ncclDataType_t t, size_t *es) {
  switch (t) {
    case ncclFloat32: *es = 4; return MPI_FLOAT;
    case ncclFloat64: *es = 8; return MPI_DOUBLE;
    case ncclInt32: *es = 4; return MPI_INT32_T;
    case ncclInt64: *es = 8; return MPI_INT64_T;
    case ncclUint8: *es = 1; return MPI_UINT8_T;
    default: *es = 0; return MPI_DATATYPE_NULL;
  }
}
static MPI_Op mpi_op(ncclRedOp_t op) {
  switch (op) {
    case ncclProd: return MPI_PROD;
    case ncclMax: return MPI_MAX;
    case ncclMin: return MPI_MIN;
    default: return MPI_SUM;
  }
}
static int overlap(const void *a, size_t na, const void *b, size_t nb) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return na && nb && x < y + nb && y < x + na;
}
static void avg(void *buf, size_t n, ncclDataType_t t, int nranks) {
  for (size_t i = 0; i < n; i++) {
    if (t == ncclFloat32) ((float *)buf)[i] /= (float)nranks;
    else if (t == ncclFloat64) ((double *)buf)[i] /= nranks;
  }
}
/* After a collective: the scripted state of the communicator. */
static ncclResult_t op_done(ncclComm_t c) {
  fake_nccl.ops++;
  c->async = fake_nccl.async_after_op;
  if (fake_nccl.op_polls && c->blocking == 0) {
    c->polls_left = fake_nccl.op_polls;
    return ncclInProgress;
  }
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t,
                           ncclRedOp_t op, ncclComm_t c, cudaStream_t s) {
  (void)s;
  size_t es;
  MPI_Datatype mt = mpi_type(t, &es);
  if (mt == MPI_DATATYPE_NULL) return nfail(ncclInvalidArgument, "dtype not in the fake");
  if (send != recv && overlap(send, count * es, recv, count * es))
    return nfail(ncclInvalidArgument, "allreduce: partly overlapping buffers");
  void *tmp = malloc(count * es + 1);
  MPI_Allreduce(send, tmp, (int)count, mt, mpi_op(op), data_comm);
  if (op == ncclAvg) avg(tmp, count, t, c->nranks);
  memcpy(recv, tmp, count * es);
  free(tmp);
  return op_done(c);
}
ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t t, int root,
                           ncclComm_t c, cudaStream_t s) {
  (void)s;
  size_t es;
  if (mpi_type(t, &es) == MPI_DATATYPE_NULL) return nfail(ncclInvalidArgument, "dtype not in the fake");
  if (c->rank == root && send != recv) memmove(recv, send, count * es);
  MPI_Bcast(recv, (int)(count * es), MPI_BYTE, root, data_comm);
  return op_done(c);
}
ncclResult_t ncclAllGather(const void *send, void *recv, size_t n, ncclDataType_t t, ncclComm_t c,
                           cudaStream_t s) {
  (void)s;
  size_t es;
  if (mpi_type(t, &es) == MPI_DATATYPE_NULL) return nfail(ncclInvalidArgument, "dtype not in the fake");
  size_t blk = n * es;
  if (overlap(send, blk, recv, blk * (size_t)c->nranks) &&
      send != (const char *)recv + (size_t)c->rank * blk)
    return nfail(ncclInvalidArgument, "allgather: overlapping buffers that are not NCCL's in-place form "
                                      "(sendbuff == recvbuff + rank*sendcount)");
  void *tmp = malloc(blk + 1);
  memcpy(tmp, send, blk);
  MPI_Allgather(tmp, (int)blk, MPI_BYTE, recv, (int)blk, MPI_BYTE, data_comm);
  free(tmp);
  return op_done(c);
}
ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t n, ncclDataType_t t,
                               ncclRedOp_t op, ncclComm_t c, cudaStream_t s) {
  (void)s;
  size_t es;
  MPI_Datatype mt = mpi_type(t, &es);
  if (mt == MPI_DATATYPE_NULL) return nfail(ncclInvalidArgument, "dtype not in the fake");
  size_t blk = n * es;
  if (overlap(send, blk * (size_t)c->nranks, recv, blk) &&
      recv != (const char *)send + (size_t)c->rank * blk)
    return nfail(ncclInvalidArgument, "reduce-scatter: overlapping buffers that are not NCCL's "
                                      "in-place form (recvbuff == sendbuff + rank*recvcount)");
  void *in = malloc(blk * (size_t)c->nranks + 1), *out = malloc(blk + 1);
  memcpy(in, send, blk * (size_t)c->nranks);
  MPI_Reduce_scatter_block(in, out, (int)n, mt, mpi_op(op), data_comm);
  if (op == ncclAvg) avg(out, n, t, c->nranks);
  memcpy(recv, out, blk);
  free(in);
  free(out);
  return op_done(c);
}
