/* Core public types of mpiddp: status codes, dtypes, ops, memory kinds, export macro.
 * Every other public header includes this one. */
#ifndef DDP_TYPES_H
#define DDP_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "ddp_config.h"

#if defined(_WIN32)
#define DDP_API
#elif defined(__GNUC__)
#define DDP_API __attribute__((visibility("default")))
#else
#define DDP_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* One X-macro list: code, name, description. 0 is success, errors are negative. */
#define DDP_STATUS_MAP(X)                                                        \
  X(DDP_OK, 0, "success")                                                        \
  X(DDP_EINVAL, -1, "invalid argument")                                          \
  X(DDP_ENOMEM, -2, "out of memory")                                             \
  X(DDP_EMPI, -3, "MPI error")                                                   \
  X(DDP_EBUSY, -4, "resource busy")                                              \
  X(DDP_ENOTSUP, -5, "operation not supported")                                  \
  X(DDP_EIO, -6, "I/O error")                                                    \
  X(DDP_ETIMEDOUT, -7, "timed out")                                              \
  X(DDP_EMISMATCH, -8, "ranks disagree")                                         \
  X(DDP_ESTATE, -9, "call not valid in the current state")                       \
  X(DDP_ECUDA, -10, "CUDA error")                                                \
  X(DDP_ENCCL, -11, "NCCL error")                                                \
  X(DDP_EFORMAT, -12, "bad file format")                                         \
  X(DDP_ECONFIG, -13, "bad DDP_* environment value")                             \
  X(DDP_EINTERNAL, -14, "internal error")

typedef enum ddp_status {
#define DDP__STATUS_ENUM(name, code, text) name = code,
  DDP_STATUS_MAP(DDP__STATUS_ENUM)
#undef DDP__STATUS_ENUM
} ddp_status_t;

/* Element types. The count of a buffer is always in elements, never bytes. */
typedef enum ddp_dtype {
  DDP_F32 = 0,
  DDP_F64,
  DDP_F16,
  DDP_BF16,
  DDP_I32,
  DDP_I64,
  DDP_U8,
  DDP_DTYPE_COUNT
} ddp_dtype_t;

typedef enum ddp_op {
  DDP_SUM = 0,
  DDP_AVG,
  DDP_MIN,
  DDP_MAX,
  DDP_PROD,
  DDP_OP_COUNT
} ddp_op_t;

/* Where a buffer lives. */
typedef enum ddp_mem {
  DDP_MEM_HOST = 0,
  DDP_MEM_CUDA,
  DDP_MEM_COUNT
} ddp_mem_t;

/* Allreduce algorithms (opts->algo, DDP_ALLREDUCE_ALGO): AUTO is the selection table; MPI the
 * MPI library's own allreduce; RING and RHD (recursive halving/doubling) over point-to-point
 * messages; SHM through node-shared memory (one node); HIER shm within nodes, ring/rhd across. */
typedef enum ddp_algo {
  DDP_ALGO_AUTO = 0,
  DDP_ALGO_MPI,
  DDP_ALGO_RING,
  DDP_ALGO_RHD,
  DDP_ALGO_SHM,
  DDP_ALGO_HIER,
  DDP_ALGO_COUNT
} ddp_algo_t;

/* Transports of device-memory collectives (ddp_device_set_transport, DDP_TRANSPORT): AUTO
 * picks MPI when it is CUDA-aware, else STAGED; MPI is CUDA-aware MPI on device pointers;
 * STAGED copies through pinned host chunks; NCCL. */
typedef enum ddp_transport {
  DDP_TRANSPORT_AUTO = 0,
  DDP_TRANSPORT_MPI,
  DDP_TRANSPORT_STAGED,
  DDP_TRANSPORT_NCCL,
  DDP_TRANSPORT_COUNT
} ddp_transport_t;

/* Message for a status code ("invalid argument"). Never NULL. */
DDP_API const char *ddp_strerror(ddp_status_t st);
/* Detail of the last error on this thread ("count 3000000000 exceeds ..."); "" if none. */
DDP_API const char *ddp_last_error(void);
/* Clears the thread's last-error message. */
DDP_API void ddp_clear_error(void);

/* Size in bytes of one element, 0 for an invalid dtype. */
DDP_API size_t ddp_dtype_size(ddp_dtype_t dtype);
/* "f32", "bf16", ...; "?" for an invalid value. */
DDP_API const char *ddp_dtype_name(ddp_dtype_t dtype);
DDP_API const char *ddp_op_name(ddp_op_t op);
DDP_API const char *ddp_mem_name(ddp_mem_t mem);
/* Parse "f32"/"float"... into a dtype; DDP_EINVAL naming the text otherwise. */
DDP_API ddp_status_t ddp_dtype_parse(const char *text, ddp_dtype_t *out);
DDP_API ddp_status_t ddp_op_parse(const char *text, ddp_op_t *out);
/* "auto", "mpi", "ring", "rhd", "shm", "hier"; "?" for an invalid value. */
DDP_API const char *ddp_algo_name(ddp_algo_t algo);
/* Parse an algorithm name (as ddp_algo_name writes it); DDP_EINVAL naming the text otherwise. */
DDP_API ddp_status_t ddp_algo_parse(const char *text, ddp_algo_t *out);
/* "auto", "mpi", "staged", "nccl"; "?" for an invalid value. */
DDP_API const char *ddp_transport_name(ddp_transport_t transport);
DDP_API ddp_status_t ddp_transport_parse(const char *text, ddp_transport_t *out);

/* Library version. */
DDP_API const char *ddp_version(void);

#ifdef __cplusplus
}
#endif
#endif /* DDP_TYPES_H */
