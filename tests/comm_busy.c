/* A communicator still used by another handle cannot be destroyed: an outstanding request or a
 * live reducer makes ddp_comm_destroy return DDP_EBUSY on every rank (also on ranks that hold
 * nothing themselves), and nothing is destroyed; once the handles are gone it succeeds. */
#include "ddp_test.h"

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  ddp_comm_t *comm = NULL;
  CHECK_OK(ddp_init(&argc, &argv, MPI_COMM_WORLD, &comm));

  /* 1. A request not yet waited on rank 0 only: every rank gets EBUSY (ranks agree). */
  ddp_request_t *req = NULL;
  CHECK_OK(ddp_ibarrier(comm, &req));
  if (rank != 0) CHECK_OK(ddp_wait(&req));
  CHECK_ST(ddp_comm_destroy(&comm), DDP_EBUSY);
  if (rank == 0) CHECK_MSG("handle");
  /* The communicator still works after the refused destroy. */
  if (rank == 0) CHECK_OK(ddp_wait(&req));
  CHECK(req == NULL, "wait must clear the request");
  int32_t v = rank + 1, sum = 0;
  CHECK_OK(ddp_allreduce(comm, &v, &sum, 1, DDP_I32, DDP_SUM, NULL));
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CHECK(sum == size * (size + 1) / 2, "sum %d after refused destroy", (int)sum);

  /* 2. A live reducer holds the communicator too. */
  float w[8] = {0};
  ddp_param_t p = {.data = w, .count = 8, .dtype = DDP_F32, .mem = DDP_MEM_HOST, .name = "w"};
  ddp_reducer_t *r = NULL;
  CHECK_OK(ddp_reducer_create(comm, &p, 1, NULL, &r));
  CHECK_ST(ddp_comm_destroy(&comm), DDP_EBUSY);
  CHECK_MSG("destroy them first");
  if (r) CHECK_OK(ddp_reducer_destroy(&r));

  /* 3. Nothing left: destroy succeeds and clears the handle; a second destroy has nothing to do. */
  CHECK_OK(ddp_comm_destroy(&comm));
  CHECK(comm == NULL, "ddp_comm_destroy left the handle set");
  CHECK_OK(ddp_comm_destroy(&comm));

  int rc = ddp_test_finish("comm_busy");
  MPI_Finalize();
  return rc;
}
