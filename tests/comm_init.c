/* Communicator basics: init/finalize through ddp_init (or as a singleton without mpirun),
 * topology (real or virtual nodes), info accessors, and destroyed-handle detection.
 * Usage: comm_init [expected_ranks_per_node]  (0 or absent: real nodes) */
#include <stdlib.h>

#include "ddp_test.h"

int main(int argc, char **argv) {
  ddp_comm_t *comm = NULL;
  ddp_status_t st = ddp_init(&argc, &argv, MPI_COMM_WORLD, &comm);
  if (st != DDP_OK) {
    fprintf(stderr, "ddp_init failed: %s: %s\n", ddp_strerror(st), ddp_last_error());
    return 1;
  }
  int k = argc > 1 ? atoi(argv[1]) : 0;
  int wr = -1, ws = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &wr);
  MPI_Comm_size(MPI_COMM_WORLD, &ws);

  ddp_comm_info_t info;
  CHECK_OK(ddp_comm_info(comm, &info));
  CHECK(info.rank == wr && info.size == ws, "rank %d/%d vs MPI %d/%d", info.rank, info.size, wr, ws);
  CHECK(info.mpi_owned == 1, "ddp_init must own MPI it initialised (mpi_owned=%d)", info.mpi_owned);
  CHECK(info.thread_level >= MPI_THREAD_SINGLE, "thread level %d", info.thread_level);
  int r = -1, s = -1;
  CHECK_OK(ddp_comm_rank(comm, &r));
  CHECK_OK(ddp_comm_size(comm, &s));
  CHECK(r == wr && s == ws, "ddp_comm_rank/size %d/%d", r, s);
  if (k > 0) {
    int first = (wr / k) * k;
    int lsize = (first + k <= ws) ? k : ws - first;
    CHECK(info.virtual_nodes == 1, "virtual_nodes not set");
    CHECK(info.local_rank == wr % k, "local rank %d, expected %d", info.local_rank, wr % k);
    CHECK(info.local_size == lsize, "local size %d, expected %d", info.local_size, lsize);
    CHECK(info.node == wr / k, "node %d, expected %d", info.node, wr / k);
    CHECK(info.nodes == (ws + k - 1) / k, "nodes %d, expected %d", info.nodes, (ws + k - 1) / k);
  } else {
    /* One machine: one node holding everybody. */
    CHECK(info.nodes == 1 && info.node == 0, "nodes %d node %d", info.nodes, info.node);
    CHECK(info.local_rank == wr && info.local_size == ws, "local %d/%d", info.local_rank, info.local_size);
    CHECK(info.virtual_nodes == 0, "virtual_nodes set without DDP_RANKS_PER_NODE");
  }
  /* The node and cross communicators are consistent with the info. */
  MPI_Comm node, cross, world;
  CHECK_OK(ddp_comm_mpi(comm, DDP_COMM_NODE, &node));
  CHECK_OK(ddp_comm_mpi(comm, DDP_COMM_CROSS, &cross));
  CHECK_OK(ddp_comm_mpi(comm, DDP_COMM_WORLD, &world));
  int ns = 0, cs = 0, cmp = 0;
  MPI_Comm_size(node, &ns);
  MPI_Comm_size(cross, &cs);
  CHECK(ns == info.local_size, "node comm size %d vs local_size %d", ns, info.local_size);
  if (info.local_rank == 0) CHECK(cs == info.nodes, "cross comm size %d vs nodes %d", cs, info.nodes);
  MPI_Comm_compare(world, MPI_COMM_WORLD, &cmp);
  CHECK(cmp == MPI_CONGRUENT, "world must be a duplicate of MPI_COMM_WORLD (compare=%d)", cmp);
  /* Node sums: every rank of a node sees the same node id. */
  int nid = info.node, minid = 0, maxid = 0;
  MPI_Allreduce(&nid, &minid, 1, MPI_INT, MPI_MIN, node);
  MPI_Allreduce(&nid, &maxid, 1, MPI_INT, MPI_MAX, node);
  CHECK(minid == maxid, "ranks of one node disagree on its id (%d..%d)", minid, maxid);
  CHECK(info.shm == 1, "shared-memory windows should work on one machine");
  CHECK(info.device == -1, "no GPU here: host mode expected (device=%d)", info.device);
  CHECK(strlen(ddp_version()) > 0 && DDP_VERSION_MAJOR >= 0, "version");

  char ver[256];
  CHECK_OK(ddp_mpi_library_version(ver, sizeof ver));
  CHECK(strlen(ver) > 0, "empty MPI version");
  CHECK_OK(ddp_log(comm, DDP_LOG_INFO, "comm_init test on rank %d", wr));

  /* A second communicator over the node comm works side by side. */
  ddp_comm_t *sub = NULL;
  CHECK_OK(ddp_comm_create(node, &sub));
  int subsize = 0;
  CHECK_OK(ddp_comm_size(sub, &subsize));
  CHECK(subsize == info.local_size, "sub comm size %d", subsize);
  CHECK_OK(ddp_comm_destroy(&sub));
  /* Destroy clears the caller's handle: a later use is refused, never dereferenced. */
  CHECK(sub == NULL, "ddp_comm_destroy left the handle set");
  CHECK_ST(ddp_comm_size(sub, &subsize), DDP_EINVAL);
  CHECK_MSG("comm is NULL");
  CHECK_OK(ddp_comm_destroy(&sub));

  int rc = ddp_test_finish("comm_init");
  CHECK_OK(ddp_finalize(&comm));
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin) {
    fprintf(stderr, "ddp_finalize did not finalise the MPI it initialised\n");
    return 1;
  }
  CHECK(comm == NULL, "ddp_finalize left the handle set");
  CHECK_ST(ddp_comm_rank(comm, &r), DDP_EINVAL);
  return rc | (ddp_test_failures_ ? 1 : 0);
}
