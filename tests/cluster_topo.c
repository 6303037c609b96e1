/* Topology across emulated hosts (tests/cluster.cmake): the world has the size asked for, the
 * nodes are the hosts by real hostname (DDP_RANKS_PER_NODE subdivides a host, never spans two),
 * and `auto` picks the algorithm the table names at each size, checked on exact data with
 * malloc and node-shared (ddp_alloc) buffers.
 *   cluster_topo NP HOSTS [BYTES=ALGO ...]      e.g. cluster_topo 4 2 8=mpi 16M=hier */
#include <unistd.h>

#include "coll_common.h"

#define NAME_LEN 64

static size_t parse_bytes(const char *s) {
  char *end = NULL;
  size_t v = strtoull(s, &end, 10);
  if (*end == 'K') v <<= 10;
  else if (*end == 'M') v <<= 20;
  return v;
}

/* One allreduce of `count` f32 with `auto`, in place or not, exact result on every rank. */
static void check_auto(ddp_comm_t *comm, float *sbuf, float *rbuf, size_t count, int inplace,
                       int rank, int size, const char *what) {
  coll_fill(sbuf, DDP_F32, count, rank, DDP_SUM);
  if (inplace) memcpy(rbuf, sbuf, count * sizeof *rbuf);
  ddp_status_t st = ddp_allreduce(comm, inplace ? DDP_IN_PLACE : sbuf, rbuf, count, DDP_F32,
                                  DDP_SUM, NULL);
  CHECK(st == DDP_OK, "%s: ddp_allreduce: %s", what, ddp_last_error());
  if (st != DDP_OK) return;
  CHECK(coll_verify(rbuf, DDP_F32, count, size, DDP_SUM, what) == 0, "%s: wrong result", what);
  CHECK(coll_identical(rbuf, count * sizeof *rbuf, MPI_COMM_WORLD), "%s: results differ across ranks",
        what);
}

int main(int argc, char **argv) {
  ddp_comm_t *comm = NULL;
  if (ddp_init(&argc, &argv, MPI_COMM_WORLD, &comm) != DDP_OK) {
    fprintf(stderr, "ddp_init: %s\n", ddp_last_error());
    return 1;
  }
  ddp_comm_info_t info;
  CHECK_OK(ddp_comm_info(comm, &info));
  int want_np = argc > 1 ? atoi(argv[1]) : -1, want_hosts = argc > 2 ? atoi(argv[2]) : -1;
  CHECK(info.size == want_np, "world size %d, asked for %d", info.size, want_np);

  /* Every rank's hostname and node index, on every rank. */
  char me[NAME_LEN] = {0};
  gethostname(me, sizeof me - 1);
  char *names = calloc((size_t)info.size, NAME_LEN);
  int *node = calloc((size_t)info.size, sizeof *node);
  if (!names || !node) return 1;
  MPI_Allgather(me, NAME_LEN, MPI_CHAR, names, NAME_LEN, MPI_CHAR, MPI_COMM_WORLD);
  MPI_Allgather(&info.node, 1, MPI_INT, node, 1, MPI_INT, MPI_COMM_WORLD);
  int hosts = 0;
  for (int r = 0; r < info.size; r++) {
    int first = 1;
    for (int q = 0; q < r; q++) first &= strcmp(names + (size_t)q * NAME_LEN, names + (size_t)r * NAME_LEN) != 0;
    hosts += first;
    for (int q = 0; q < r; q++) {
      int same_host = !strcmp(names + (size_t)q * NAME_LEN, names + (size_t)r * NAME_LEN);
      int same_node = node[q] == node[r];
      /* A node never spans hosts; without virtual nodes a host is one node. */
      CHECK(!same_node || same_host, "ranks %d (%s) and %d (%s) share node %d across hosts", q,
            names + (size_t)q * NAME_LEN, r, names + (size_t)r * NAME_LEN, node[r]);
      CHECK(info.virtual_nodes || !same_host || same_node,
            "ranks %d and %d are both on %s but on nodes %d and %d", q, r,
            names + (size_t)r * NAME_LEN, node[q], node[r]);
    }
  }
  CHECK(hosts == want_hosts, "%d distinct hostnames, expected %d", hosts, want_hosts);
  if (!info.virtual_nodes)
    CHECK(info.nodes == want_hosts, "%d nodes for %d hosts", info.nodes, want_hosts);
  if (info.rank == 0)
    printf("cluster_topo: %d ranks on %d hosts, %d %snodes\n", info.size, hosts, info.nodes,
           info.virtual_nodes ? "virtual " : "");

  /* auto's choice per size, and an exact allreduce at that size. */
  size_t maxn = 1;
  for (int i = 3; i < argc; i++) {
    size_t n = parse_bytes(argv[i]) / sizeof(float);
    if (n > maxn) maxn = n;
  }
  float *s = malloc(maxn * sizeof *s), *r = malloc(maxn * sizeof *r);
  void *ps = NULL, *pr = NULL;
  CHECK_OK(ddp_alloc(comm, maxn * sizeof(float), &ps));
  CHECK_OK(ddp_alloc(comm, maxn * sizeof(float), &pr));
  if (!s || !r || !ps || !pr) return 1;
  for (int i = 3; i < argc; i++) {
    const char *eq = strchr(argv[i], '=');
    size_t n = parse_bytes(argv[i]) / sizeof(float);
    const char *chosen = NULL;
    CHECK_OK(ddp_allreduce_choice(comm, s, n, DDP_F32, NULL, &chosen));
    CHECK(eq && chosen && !strcmp(chosen, eq + 1), "%s: auto picks %s", argv[i], chosen ? chosen : "?");
    char what[96];
    snprintf(what, sizeof what, "auto=%s %zu B malloc", chosen ? chosen : "?", n * sizeof(float));
    check_auto(comm, s, r, n, 0, info.rank, info.size, what);
    snprintf(what, sizeof what, "auto=%s %zu B ddp_alloc in place", chosen ? chosen : "?",
             n * sizeof(float));
    check_auto(comm, ps, pr, n, 1, info.rank, info.size, what);
    if (info.rank == 0) printf("cluster_topo: %zu bytes: auto runs %s\n", n * sizeof(float), chosen);
  }
  CHECK_OK(ddp_free(comm, ps));
  CHECK_OK(ddp_free(comm, pr));
  free(s), free(r), free(names), free(node);
  int rc = ddp_test_finish("cluster_topo");
  CHECK_OK(ddp_finalize(&comm));
  return rc;
}
