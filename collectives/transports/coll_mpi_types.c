/* The host transport's MPI datatypes and reduction ops for the library's dtypes: f16/bf16 as
 * user-defined ops computed by the host kernels, and u8 ops of our own where the MPI's are
 * wrong (probed once per communicator). */
#include <stdint.h>
#include <string.h>

#include "xport_mpi.h"

/* User-defined ops: inout[i] = in[i] op inout[i], computed by the host kernels (f16/bf16 in
 * f32). */
#define OWN_FN(NAME, DT, OP)                                                            \
  static void NAME(void *in, void *inout, int *len, MPI_Datatype *type) {              \
    (void)type;                                                                         \
    ddp__reduce_host(inout, in, (size_t)*len, DT, OP);                                  \
  }
OWN_FN(f16_sum, DDP_F16, DDP_SUM)
OWN_FN(f16_min, DDP_F16, DDP_MIN)
OWN_FN(f16_max, DDP_F16, DDP_MAX)
OWN_FN(f16_prod, DDP_F16, DDP_PROD)
OWN_FN(bf16_sum, DDP_BF16, DDP_SUM)
OWN_FN(bf16_min, DDP_BF16, DDP_MIN)
OWN_FN(bf16_max, DDP_BF16, DDP_MAX)
OWN_FN(bf16_prod, DDP_BF16, DDP_PROD)
OWN_FN(u8_sum, DDP_U8, DDP_SUM)
OWN_FN(u8_min, DDP_U8, DDP_MIN)
OWN_FN(u8_max, DDP_U8, DDP_MAX)
OWN_FN(u8_prod, DDP_U8, DDP_PROD)

/* 1 when the MPI's own reduction `mo` (MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX) gives the right
 * u8 results. Measured wrong here: Open MPI 4.1.4's AVX op component saturates 8-bit sums
 * from 16 elements on (200 + 100 gives 255, not 44); MPICH 4.0.2 compares unsigned types as
 * signed in MPI_MIN/MPI_MAX (u8 max of 200 and 10 gives 10). Asked once per communicator with
 * MPI_Reduce_local (the local reduction the collectives apply) on 257 elements, enough for
 * the vector paths and a tail, so the MPI's own op stays in use wherever it is right. */
static int mpi_u8_op_right(MPI_Op mo, ddp_op_t op) {
  enum { N = 257 };
  uint8_t in[N], io[N], want[N];
  for (int i = 0; i < N; i++) {
    in[i] = (uint8_t)(i % 2 ? 200 + i % 13 : 10 + i % 11); /* both sides of 128, in turn */
    io[i] = (uint8_t)(i % 2 ? 100 + i % 7 : 150 + i % 5);
    unsigned a = in[i], b = io[i];
    want[i] = (uint8_t)(op == DDP_SUM ? a + b : op == DDP_PROD ? a * b : op == DDP_MIN ? (a < b ? a : b)
                                                                           : (a > b ? a : b));
  }
  return MPI_Reduce_local(in, io, N, MPI_UINT8_T, mo) == MPI_SUCCESS && memcmp(io, want, N) == 0;
}

ddp_status_t ddp__coll_mpi_types(ddp__coll_t *cs) {
  MPI_User_function *fns[2][DDP_OP_COUNT] = {
      {f16_sum, NULL, f16_min, f16_max, f16_prod},
      {bf16_sum, NULL, bf16_min, bf16_max, bf16_prod}};
  for (int h = 0; h < 2; h++) {
    cs->half_type[h] = MPI_DATATYPE_NULL;
    for (int o = 0; o < DDP_OP_COUNT; o++) cs->half_op[h][o] = MPI_OP_NULL;
  }
  for (int o = 0; o < DDP_OP_COUNT; o++) cs->u8_op[o] = MPI_OP_NULL;
  cs->half_ready = 1;
  for (int h = 0; h < 2; h++) {
    DDP_MPI(MPI_Type_contiguous(2, MPI_BYTE, &cs->half_type[h]));
    DDP_MPI(MPI_Type_commit(&cs->half_type[h]));
    for (int o = 0; o < DDP_OP_COUNT; o++)
      if (fns[h][o]) DDP_MPI(MPI_Op_create(fns[h][o], 1, &cs->half_op[h][o]));
  }
  MPI_User_function *u8_fns[DDP_OP_COUNT] = {u8_sum, NULL, u8_min, u8_max, u8_prod};
  for (int o = 0; o < DDP_OP_COUNT; o++)
    if (u8_fns[o] && !mpi_u8_op_right(ddp__mpi_op(cs, DDP_U8, (ddp_op_t)o), (ddp_op_t)o))
      DDP_MPI(MPI_Op_create(u8_fns[o], 1, &cs->u8_op[o]));
  return DDP_OK;
}

void ddp__coll_mpi_types_free(ddp__coll_t *cs) {
  if (!cs->half_ready) return;
  for (int h = 0; h < 2; h++) {
    if (cs->half_type[h] != MPI_DATATYPE_NULL) MPI_Type_free(&cs->half_type[h]);
    for (int o = 0; o < DDP_OP_COUNT; o++)
      if (cs->half_op[h][o] != MPI_OP_NULL) MPI_Op_free(&cs->half_op[h][o]);
  }
  for (int o = 0; o < DDP_OP_COUNT; o++)
    if (cs->u8_op[o] != MPI_OP_NULL) MPI_Op_free(&cs->u8_op[o]);
  cs->half_ready = 0;
}

MPI_Datatype ddp__mpi_type(const ddp__coll_t *cs, ddp_dtype_t dtype) {
  switch (dtype) {
    case DDP_F32: return MPI_FLOAT;
    case DDP_F64: return MPI_DOUBLE;
    case DDP_F16: return cs->half_type[0];
    case DDP_BF16: return cs->half_type[1];
    case DDP_I32: return MPI_INT32_T;
    case DDP_I64: return MPI_INT64_T;
    case DDP_U8: return MPI_UINT8_T;
    default: return MPI_DATATYPE_NULL;
  }
}

MPI_Op ddp__mpi_op(const ddp__coll_t *cs, ddp_dtype_t dtype, ddp_op_t op) {
  if (op == DDP_AVG) op = DDP_SUM;
  if (dtype == DDP_F16 || dtype == DDP_BF16) return cs->half_op[dtype == DDP_BF16][op];
  if (dtype == DDP_U8 && cs->u8_op[op] != MPI_OP_NULL) return cs->u8_op[op];
  switch (op) {
    case DDP_SUM: return MPI_SUM;
    case DDP_MIN: return MPI_MIN;
    case DDP_MAX: return MPI_MAX;
    case DDP_PROD: return MPI_PROD;
    default: return MPI_OP_NULL;
  }
}
