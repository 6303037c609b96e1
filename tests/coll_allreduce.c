/* Allreduce correctness: every algorithm x dtype x op x count x in/out-of-place on
 * integer-valued data (exact results), results bitwise identical on every rank.
 * Usage: coll_allreduce [algos|all] [counts: quick|big] [mem: host|pool|mixed]
 *   mixed: even ranks use ddp_alloc buffers, odd ranks malloc (zero-copy and copy-in peers
 *   in the same collective).
 *   algos: comma-separated names ("all": every name of ddp_allreduce_algos()); an algorithm
 *   that cannot run here (shm over several nodes) must fail with a message listing the
 *   usable ones, and is then skipped. */
#include <stdlib.h>

#include "coll_common.h"

static int rank_, size_;

static void run_case(ddp_comm_t *comm, const char *algo, ddp_dtype_t dt, ddp_op_t op, size_t n,
                     int inplace, void *sbuf, void *rbuf) {
  size_t es = ddp_dtype_size(dt);
  ddp_coll_opts_t o;
  ddp_coll_opts_default(&o);
  CHECK(ddp_algo_parse(algo, &o.algo) == DDP_OK, "%s", ddp_last_error());
  coll_fill(sbuf, dt, n, rank_, op);
  if (inplace) memcpy(rbuf, sbuf, n * es);
  else memset(rbuf, 0xA5, n * es);
  ddp_status_t st = ddp_allreduce(comm, inplace ? DDP_IN_PLACE : sbuf, rbuf, n, dt, op, &o);
  char what[96];
  snprintf(what, sizeof what, "%s %s", algo, inplace ? "in-place" : "out-of-place");
  CHECK(st == DDP_OK, "%s %s %s n=%zu: %s: %s", what, ddp_dtype_name(dt), ddp_op_name(op), n,
        ddp_strerror(st), ddp_last_error());
  if (st != DDP_OK) return;
  size_t bad = coll_verify(rbuf, dt, n, size_, op, what);
  CHECK(bad == 0, "%s %s %s n=%zu: %zu wrong elements", what, ddp_dtype_name(dt),
        ddp_op_name(op), n, bad);
  if (!inplace) {
    /* The send buffer is untouched. */
    size_t sb = 0;
    for (size_t i = 0; i < n; i++)
      sb += !coll_elem_is(sbuf, dt, i, coll_val(rank_, i, op, dt));
    CHECK(sb == 0, "%s: send buffer modified (%zu elements)", what, sb);
  }
  CHECK(coll_identical(rbuf, n * es, MPI_COMM_WORLD), "%s %s %s n=%zu: results differ across ranks",
        what, ddp_dtype_name(dt), ddp_op_name(op), n);
}

/* Arguments: ALGOS (comma-separated or "all") SET (quick, big or full) BUFFERS (host, pool
 * or mixed). */
static int run_allreduce(ddp_test_t *t) {
  ddp_comm_t *comm = t->comm;
  int argc = t->argc;
  char **argv = t->argv;
  ddp_status_t st = DDP_OK;
  rank_ = t->rank;
  size_ = t->size;
  const char *algos = argc > 1 ? argv[1] : "all";
  /* big: adds counts 1000003 and 4M on f32 sum/avg; full: every dtype and op at every count. */
  int full = argc > 2 && !strcmp(argv[2], "full");
  int big = full || (argc > 2 && !strcmp(argv[2], "big"));
  int mixed = argc > 3 && !strcmp(argv[3], "mixed");
  int pool = argc > 3 && (!strcmp(argv[3], "pool") || mixed);

  size_t p = (size_t)size_;
  size_t counts[] = {0, 1, p > 1 ? p - 1 : 2, p, p + 1, 1031, 100003, 1000003, (size_t)4 << 20};
  size_t ncounts = big ? 9 : 7;
  size_t maxn = big ? ((size_t)4 << 20) : 100003;
  size_t bytes = maxn * 8;
  void *sbuf = NULL, *rbuf = NULL;
  void *pool_s = NULL, *pool_r = NULL;
  if (pool) {
    CHECK_OK(ddp_alloc(comm, bytes, &pool_s));
    CHECK_OK(ddp_alloc(comm, bytes, &pool_r));
  }
  if (pool && !(mixed && rank_ % 2)) {
    sbuf = pool_s;
    rbuf = pool_r;
  } else {
    sbuf = malloc(bytes);
    rbuf = malloc(bytes);
  }
  if (!sbuf || !rbuf) {
    CHECK(sbuf && rbuf, "out of memory for 2 x %zu bytes", bytes);
    return 1;
  }

  char list[256];
  if (!strcmp(algos, "all")) {
    size_t o = 0;
    list[0] = '\0';
    for (const char *const *a = ddp_allreduce_algos(); *a; a++)
      o += (size_t)snprintf(list + o, sizeof list - o, "%s%s", o ? "," : "", *a);
  } else {
    snprintf(list, sizeof list, "%s", algos);
  }
  for (char *save = NULL, *algo = strtok_r(list, ",", &save); algo; algo = strtok_r(NULL, ",", &save)) {
    ddp_coll_opts_t o;
    ddp_coll_opts_default(&o);
    CHECK(ddp_algo_parse(algo, &o.algo) == DDP_OK, "%s", ddp_last_error());
    const char *chosen = NULL;
    st = ddp_allreduce_choice(comm, rbuf, 1000, DDP_F32, &o, &chosen);
    if (st != DDP_OK) {
      CHECK(st == DDP_EINVAL && strstr(ddp_last_error(), "usable here") != NULL,
            "%s: unexpected refusal %d: %s", algo, (int)st, ddp_last_error());
      if (rank_ == 0) printf("%s: not applicable here (%s)\n", algo, ddp_last_error());
      continue;
    }
    double t0 = MPI_Wtime();
    for (size_t d = 0; d < sizeof coll_dtypes / sizeof coll_dtypes[0]; d++)
      for (size_t k = 0; k < sizeof coll_ops / sizeof coll_ops[0]; k++)
        for (size_t c = 0; c < ncounts; c++) {
          /* Large counts only add time: 100003 on a third of the dtype/op pairs (every dtype
           * and op still appears), the big ones on f32 sum/avg. */
          if (!full && c == 6 && (d + k) % 3 != 0) continue;
          if (!full && c >= 7 &&
              !(coll_dtypes[d] == DDP_F32 && (coll_ops[k] == DDP_SUM || coll_ops[k] == DDP_AVG)))
            continue;
          /* full: 4M (the largest count, 3/4 of the time) on every dtype with sum and on f32
           * with every op; 1000003, past every chunk and segment boundary, on every pair. */
          if (full && c == 8 && coll_dtypes[d] != DDP_F32 && coll_ops[k] != DDP_SUM) continue;
          for (int ip = 0; ip < 2; ip++)
            run_case(comm, algo, coll_dtypes[d], coll_ops[k], counts[c], ip, sbuf, rbuf);
        }
    if (rank_ == 0) printf("%s (runs as %s): %.2f s\n", algo, chosen, MPI_Wtime() - t0);
  }
  if (sbuf != pool_s) {
    free(sbuf);
    free(rbuf);
  }
  if (pool) {
    CHECK_OK(ddp_free(comm, pool_s));
    CHECK_OK(ddp_free(comm, pool_r));
  }
  return 0;
}

DDP_TEST_PROGRAM("coll_allreduce", DDP_TEST_CASE("allreduce", run_allreduce));
