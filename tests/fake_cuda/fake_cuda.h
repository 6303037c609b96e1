/* Controls of the fake CUDA runtime and NCCL (cuda_runtime_api.h, nccl.h in this folder), for
 * tests/cuda_fake.c. */
#ifndef DDP_FAKE_CUDA_H
#define DDP_FAKE_CUDA_H

#include <mpi.h>

#include "nccl.h"

/* -- CUDA runtime -- */
void fake_cuda_set_devices(int n); /* visible devices; -1 (default): no driver */
void fake_cuda_event_pending(cudaEvent_t e, int pending); /* an unfinished event */
/* The next call of `fn` ("cudaMalloc", "cudaEventQuery", "launch", ...) fails with e. */
void fake_cuda_fail_next(const char *fn, cudaError_t e);
void fake_cuda_sticky(cudaError_t e); /* a faulted context: every call fails with e from now */
int fake_cuda_current_device(void);   /* this thread's current device (cudaSetDevice) */
extern int fake_cuda_launches;        /* kernel launches seen */

/* -- NCCL: a script for the next communicators, and counters -- */
typedef struct {
  int fail_uniqueid;           /* rank 0's ncclGetUniqueId fails */
  int fail_init_rank;          /* this rank's ncclCommInitRank* fails (-1: none) */
  int init_polls;              /* ncclInProgress polls after init before success; -1: forever */
  int op_polls;                /* a collective returns ncclInProgress, success after this many */
  ncclResult_t async_after_op; /* the asynchronous error reported after the next collective */
  int blocking_seen;           /* config.blocking of the last init (-1: ncclCommInitRank) */
  int uniqueid_calls, init_calls, abort_calls, destroy_calls, finalize_calls, ops;
} fake_nccl_script_t;
extern fake_nccl_script_t fake_nccl;
void fake_nccl_reset(MPI_Comm data_comm); /* clears the script and counters; collectives of
                                           * the fake then move data over data_comm */

#endif
