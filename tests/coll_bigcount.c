/* Counts above INT_MAX: u8 allreduce of 2^31 + 3 elements with each algorithm (MPI calls
 * chunked, transport messages split), broadcast of 2^31 + 3 bytes, and a reduce-scatter whose
 * per-rank count exceeds the single-call limit (2^28 + 3). Memory: about 2.2 GB per rank.
 * Usage: coll_bigcount [algos] */
#include <stdlib.h>

#include "coll_common.h"

int main(int argc, char **argv) {
  ddp_comm_t *comm = NULL;
  if (ddp_init(&argc, &argv, MPI_COMM_WORLD, &comm) != DDP_OK) return 1;
  int rank = 0, size = 1;
  ddp_comm_rank(comm, &rank);
  ddp_comm_size(comm, &size);
  size_t n = ((size_t)1 << 31) + 3;
  uint8_t *b = malloc(n);
  if (!b) {
    fprintf(stderr, "coll_bigcount: cannot allocate %zu bytes: skipped\n", n);
    ddp_finalize(&comm);
    return 77;
  }
  char list[128];
  snprintf(list, sizeof list, "%s", argc > 1 ? argv[1] : "mpi,ring,rhd,shm");
  for (char *save = NULL, *algo = strtok_r(list, ",", &save); algo; algo = strtok_r(NULL, ",", &save)) {
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)((i + (size_t)rank) % 5);
    ddp_coll_opts_t o;
    ddp_coll_opts_default(&o);
    o.algo = algo;
    double t0 = MPI_Wtime();
    CHECK_OK(ddp_allreduce(comm, DDP_IN_PLACE, b, n, DDP_U8, DDP_SUM, &o));
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
      unsigned want = 0;
      for (int r = 0; r < size; r++) want += (unsigned)((i + (size_t)r) % 5);
      bad += b[i] != (uint8_t)want;
    }
    CHECK(bad == 0, "%s: %zu of %zu elements wrong", algo, bad, n);
    if (rank == 0) printf("%s: %zu-element u8 allreduce in %.2f s\n", algo, n, MPI_Wtime() - t0);
  }
  for (size_t i = 0; i < n; i++) b[i] = rank == 0 ? (uint8_t)(i % 251) : 0;
  CHECK_OK(ddp_broadcast(comm, b, n, DDP_U8, 0, NULL));
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += b[i] != (uint8_t)(i % 251);
  CHECK(bad == 0, "broadcast: %zu wrong", bad);
  size_t rc = ((size_t)1 << 28) + 3;
  if (rc * (size_t)size <= n) {
    uint8_t *out = malloc(rc);
    for (size_t i = 0; i < rc * (size_t)size; i++) b[i] = (uint8_t)((i * 3 + (size_t)rank) % 7);
    CHECK_OK(ddp_reduce_scatter(comm, b, out, rc, DDP_U8, DDP_SUM, NULL));
    bad = 0;
    for (size_t i = 0; i < rc; i++) {
      size_t g = (size_t)rank * rc + i;
      unsigned want = 0;
      for (int r = 0; r < size; r++) want += (unsigned)((g * 3 + (size_t)r) % 7);
      bad += out[i] != (uint8_t)want;
    }
    CHECK(bad == 0, "reduce_scatter of %zu per rank: %zu wrong", rc, bad);
    free(out);
  }
  free(b);
  int res = ddp_test_finish("coll_bigcount");
  ddp_finalize(&comm);
  return res;
}
