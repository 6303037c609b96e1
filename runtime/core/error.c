/* Status codes, the thread-local last-error message, and small type helpers. */
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "ddp_internal.h"

/* The one piece of per-thread state the library keeps: the detail of the last error. */
static _Thread_local char ddp__last_error_buf[1024];

const char *ddp_strerror(ddp_status_t st) {
  switch (st) {
#define DDP__STATUS_CASE(name, code, text) \
  case name:                               \
    return text;
    DDP_STATUS_MAP(DDP__STATUS_CASE)
#undef DDP__STATUS_CASE
  }
  return "unknown status";
}

const char *ddp_last_error(void) { return ddp__last_error_buf; }

void ddp_clear_error(void) { ddp__last_error_buf[0] = '\0'; }

ddp_status_t ddp__error(ddp_status_t st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ddp__last_error_buf, sizeof ddp__last_error_buf, fmt, ap);
  va_end(ap);
  return st;
}

ddp_status_t ddp__mpi_error(int rc, const char *what) {
  if (rc == MPI_SUCCESS) return DDP_OK;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "MPI error %d", rc);
  return ddp__error(DDP_EMPI, "%s failed: %s", what, msg);
}

double ddp__now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *const ddp__dtype_names[DDP_DTYPE_COUNT] = {"f32", "f64", "f16", "bf16",
                                                             "i32", "i64", "u8"};
static const size_t ddp__dtype_sizes[DDP_DTYPE_COUNT] = {4, 8, 2, 2, 4, 8, 1};
static const char *const ddp__op_names[DDP_OP_COUNT] = {"sum", "avg", "min", "max", "prod"};

size_t ddp_dtype_size(ddp_dtype_t dtype) {
  return ((unsigned)dtype < DDP_DTYPE_COUNT) ? ddp__dtype_sizes[dtype] : 0;
}

const char *ddp_dtype_name(ddp_dtype_t dtype) {
  return ((unsigned)dtype < DDP_DTYPE_COUNT) ? ddp__dtype_names[dtype] : "?";
}

const char *ddp_op_name(ddp_op_t op) {
  return ((unsigned)op < DDP_OP_COUNT) ? ddp__op_names[op] : "?";
}

const char *ddp_mem_name(ddp_mem_t mem) {
  switch (mem) {
    case DDP_MEM_HOST: return "host";
    case DDP_MEM_CUDA: return "cuda";
    default: return "?";
  }
}

ddp_status_t ddp_dtype_parse(const char *text, ddp_dtype_t *out) {
  DDP_CHECK_ARG(text != NULL, "text is NULL");
  DDP_CHECK_ARG(out != NULL, "out is NULL");
  static const struct { const char *name; ddp_dtype_t dt; } aliases[] = {
      {"float", DDP_F32}, {"float32", DDP_F32}, {"double", DDP_F64}, {"float64", DDP_F64},
      {"half", DDP_F16},  {"float16", DDP_F16}, {"bfloat16", DDP_BF16}, {"int", DDP_I32},
      {"int32", DDP_I32}, {"int64", DDP_I64},   {"uint8", DDP_U8}};
  for (int d = 0; d < DDP_DTYPE_COUNT; d++)
    if (strcasecmp(text, ddp__dtype_names[d]) == 0) return (*out = (ddp_dtype_t)d), DDP_OK;
  for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
    if (strcasecmp(text, aliases[i].name) == 0) return (*out = aliases[i].dt), DDP_OK;
  return ddp__error(DDP_EINVAL, "dtype '%s' unknown (allowed: f32 f64 f16 bf16 i32 i64 u8)", text);
}

ddp_status_t ddp_op_parse(const char *text, ddp_op_t *out) {
  DDP_CHECK_ARG(text != NULL, "text is NULL");
  DDP_CHECK_ARG(out != NULL, "out is NULL");
  for (int o = 0; o < DDP_OP_COUNT; o++)
    if (strcasecmp(text, ddp__op_names[o]) == 0) return (*out = (ddp_op_t)o), DDP_OK;
  return ddp__error(DDP_EINVAL, "op '%s' unknown (allowed: sum avg min max prod)", text);
}

static const char *const ddp__algo_names[DDP_ALGO_COUNT] = {"auto", "mpi", "ring",
                                                             "rhd",  "shm", "hier"};
static const char *const ddp__transport_names[DDP_TRANSPORT_COUNT] = {"auto", "mpi", "staged",
                                                                      "nccl"};

const char *ddp_algo_name(ddp_algo_t algo) {
  return ((unsigned)algo < DDP_ALGO_COUNT) ? ddp__algo_names[algo] : "?";
}

const char *ddp_transport_name(ddp_transport_t t) {
  return ((unsigned)t < DDP_TRANSPORT_COUNT) ? ddp__transport_names[t] : "?";
}

ddp_status_t ddp_algo_parse(const char *text, ddp_algo_t *out) {
  DDP_CHECK_ARG(text != NULL, "text is NULL");
  DDP_CHECK_ARG(out != NULL, "out is NULL");
  for (int a = 0; a < DDP_ALGO_COUNT; a++)
    if (strcmp(text, ddp__algo_names[a]) == 0) return (*out = (ddp_algo_t)a), DDP_OK;
  return ddp__error(DDP_EINVAL, "algorithm '%s' unknown (allowed: auto mpi ring rhd shm hier)",
                    text);
}

ddp_status_t ddp_transport_parse(const char *text, ddp_transport_t *out) {
  DDP_CHECK_ARG(text != NULL, "text is NULL");
  DDP_CHECK_ARG(out != NULL, "out is NULL");
  for (int t = 0; t < DDP_TRANSPORT_COUNT; t++)
    if (strcmp(text, ddp__transport_names[t]) == 0) return (*out = (ddp_transport_t)t), DDP_OK;
  return ddp__error(DDP_EINVAL, "transport '%s' unknown (allowed: auto mpi staged nccl)", text);
}

const char *ddp_version(void) { return DDP_VERSION_STRING; }
