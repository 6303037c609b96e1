/* The NCCL transport (the comparison baseline): one NCCL communicator per ddp communicator,
 * created on first use from an ncclUniqueId that rank 0 makes and sends with MPI; collectives
 * are queued on the caller's stream, f16/bf16 natively. */
#include "coll_device_internal.h"

#if DDP_HAVE_NCCL && DDP_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <string.h>

#define NC(call)                                                                             \
  do {                                                                                       \
    ncclResult_t ddp__nr_ = (call);                                                          \
    if (ddp__nr_ != ncclSuccess)                                                             \
      return ddp__error(DDP_ENCCL, "%s failed: %s (%s)", #call, ncclGetErrorString(ddp__nr_), \
                        ncclGetLastError(NULL));                                             \
  } while (0)

static ddp_status_t nccl_type(ddp_dtype_t t, ncclDataType_t *out) {
  switch (t) {
    case DDP_F32: *out = ncclFloat32; return DDP_OK;
    case DDP_F64: *out = ncclFloat64; return DDP_OK;
    case DDP_F16: *out = ncclFloat16; return DDP_OK;
    case DDP_BF16: *out = ncclBfloat16; return DDP_OK;
    case DDP_I32: *out = ncclInt32; return DDP_OK;
    case DDP_I64: *out = ncclInt64; return DDP_OK;
    case DDP_U8: *out = ncclUint8; return DDP_OK;
    default: break;
  }
  return ddp__error(DDP_EINVAL, "dtype %d has no NCCL equivalent", (int)t);
}

static ncclRedOp_t nccl_op(ddp_op_t op) {
  switch (op) {
    case DDP_AVG: return ncclAvg;
    case DDP_MIN: return ncclMin;
    case DDP_MAX: return ncclMax;
    case DDP_PROD: return ncclProd;
    default: return ncclSum;
  }
}

static ddp_status_t nccl_comm(ddp__devcoll_t *dc, ncclComm_t *out) {
  ddp__comm_t *c = dc->c;
  if (dc->nccl) {
    *out = (ncclComm_t)dc->nccl;
    return DDP_OK;
  }
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  if (c->rank == 0) NC(ncclGetUniqueId(&id));
  ddp__ctx_t x;
  ddp__ctx_world(&x, c, "nccl-init", sizeof id, -1);
  MPI_Request rq = MPI_REQUEST_NULL;
  DDP_MPI(MPI_Ibcast(&id, (int)sizeof id, MPI_BYTE, 0, c->coll->world, &rq));
  DDP_TRY(ddp__wait_all(c, 1, &rq, &x.desc));
  cudaError_t ce = cudaSetDevice(c->device);
  if (ce != cudaSuccess)
    return ddp__error(DDP_ECUDA, "cudaSetDevice(%d) failed: %s", c->device, cudaGetErrorString(ce));
  ncclComm_t nc;
  NC(ncclCommInitRank(&nc, c->size, id, c->rank));
  dc->nccl = nc;
  DDP_LOG(c, DDP_LOG_INFO, "NCCL communicator created (%d ranks, device %d)", c->size, c->device);
  *out = nc;
  return DDP_OK;
}

ddp_status_t ddp__nccl_run(ddp__devcoll_t *dc, const ddp__dev_call_t *call, ddp_stream_t stream) {
  ddp__comm_t *c = dc->c;
  ncclComm_t nc;
  DDP_TRY(nccl_comm(dc, &nc));
  /* The progress engine's thread may run this: bind it to the communicator's device. */
  cudaError_t ce = cudaSetDevice(c->device);
  if (ce != cudaSuccess)
    return ddp__error(DDP_ECUDA, "cudaSetDevice(%d) failed: %s", c->device, cudaGetErrorString(ce));
  ncclDataType_t t = ncclFloat32;
  DDP_TRY(nccl_type(call->dtype, &t));
  cudaStream_t s = (cudaStream_t)stream;
  size_t n = call->count;
  switch (call->kind) {
    case DDP__COLL_ALLREDUCE:
      NC(ncclAllReduce(call->send, call->recv, n, t, nccl_op(call->op), nc, s));
      break;
    case DDP__COLL_BROADCAST:
      NC(ncclBroadcast(call->recv, call->recv, n, t, call->root, nc, s));
      break;
    case DDP__COLL_ALLGATHER: NC(ncclAllGather(call->send, call->recv, n, t, nc, s)); break;
    case DDP__COLL_REDUCE_SCATTER:
      NC(ncclReduceScatter(call->send, call->recv, n, t, nccl_op(call->op), nc, s));
      break;
    case DDP__COLL_BARRIER: break;
  }
  return DDP_OK;
}

void ddp__nccl_free(ddp__devcoll_t *dc) {
  if (!dc->nccl) return;
  ncclCommDestroy((ncclComm_t)dc->nccl);
  dc->nccl = NULL;
}

#else
ddp_status_t ddp__nccl_run(ddp__devcoll_t *dc, const ddp__dev_call_t *call, ddp_stream_t stream) {
  (void)dc;
  (void)call;
  (void)stream;
  return ddp__error(DDP_ENOTSUP, "transport 'nccl': this library was built without NCCL");
}

void ddp__nccl_free(ddp__devcoll_t *dc) { (void)dc; }
#endif
