/* Collectives API: broadcast, allgather, reduce-scatter, barrier (blocking and not, in and
 * out of place), 64 non-blocking collectives of mixed sizes and algorithms in flight at once
 * completed in any order, the node-shared pool, algorithm names and choice, bad inputs (status
 * + message naming the argument, output untouched) and the EBUSY contract. */
#include <stdlib.h>

#include "coll_common.h"

static int rank_, size_;

static void test_broadcast(ddp_comm_t *comm) {
  size_t counts[] = {0, 1, 7, 100003};
  for (size_t c = 0; c < 4; c++)
    for (int root = 0; root < size_; root++) {
      size_t n = counts[c];
      int32_t *b = malloc((n + 1) * 4);
      for (size_t i = 0; i < n; i++) b[i] = rank_ == root ? (int32_t)(i * 7 + (size_t)root) : -1;
      ddp_request_t *rq = NULL;
      if (c % 2) CHECK_OK(ddp_broadcast(comm, b, n, DDP_I32, root, NULL));
      else {
        CHECK_OK(ddp_ibroadcast(comm, b, n, DDP_I32, root, NULL, &rq));
        CHECK_OK(ddp_wait(&rq));
        CHECK(rq == NULL, "ddp_wait must clear the request");
      }
      size_t bad = 0;
      for (size_t i = 0; i < n; i++) bad += b[i] != (int32_t)(i * 7 + (size_t)root);
      CHECK(bad == 0, "broadcast n=%zu root %d: %zu wrong", n, root, bad);
      free(b);
    }
}

static void test_allgather(ddp_comm_t *comm) {
  size_t counts[] = {0, 1, 5, 30001};
  for (size_t c = 0; c < 4; c++)
    for (int ip = 0; ip < 2; ip++) {
      size_t n = counts[c], p = (size_t)size_;
      double *s = malloc((n + 1) * 8), *r = malloc((n * p + 1) * 8);
      for (size_t i = 0; i < n * p; i++) r[i] = -1;
      for (size_t i = 0; i < n; i++) s[i] = (double)(rank_ * 100000 + (int)i);
      if (ip) memcpy(r + (size_t)rank_ * n, s, n * 8);
      ddp_request_t *rq = NULL;
      CHECK_OK(ddp_iallgather(comm, ip ? DDP_IN_PLACE : s, r, n, DDP_F64, NULL, &rq));
      int done = 0;
      while (!done) CHECK_OK(ddp_test(&rq, &done));
      CHECK(rq == NULL, "ddp_test must clear a completed request");
      size_t bad = 0;
      for (size_t q = 0; q < p; q++)
        for (size_t i = 0; i < n; i++) bad += r[q * n + i] != (double)(q * 100000 + i);
      CHECK(bad == 0, "allgather n=%zu inplace %d: %zu wrong", n, ip, bad);
      free(s);
      free(r);
    }
}

static void test_reduce_scatter(ddp_comm_t *comm) {
  size_t counts[] = {0, 1, 3, 20011};
  for (size_t c = 0; c < 4; c++)
    for (size_t d = 0; d < sizeof coll_dtypes / sizeof coll_dtypes[0]; d++)
      for (size_t k = 0; k < sizeof coll_ops / sizeof coll_ops[0]; k++)
        for (int ip = 0; ip < 5; ip++) {
          /* ip 0: out of place; 1: DDP_IN_PLACE (MPI's form, result in the first block);
           * 2-4: recv = send + rank*n (NCCL's form, result in this rank's block) with algo
           * auto, ring and mpi (the MPI library's in-place collective, then moved). */
          ddp_dtype_t dt = coll_dtypes[d];
          ddp_op_t op = coll_ops[k];
          size_t n = counts[c], p = (size_t)size_, es = ddp_dtype_size(dt);
          char *s = malloc(n * p * es + 8), *r = malloc(n * p * es + 8);
          coll_fill(s, dt, n * p, rank_, op);
          if (ip == 1) memcpy(r, s, n * p * es);
          ddp_coll_opts_t o;
          CHECK_OK(ddp_coll_opts_default(&o));
          o.algo = ip == 3 ? DDP_ALGO_RING : ip == 4 ? DDP_ALGO_MPI : DDP_ALGO_AUTO;
          char *res = ip >= 2 ? s + (size_t)rank_ * n * es : r;
          CHECK_OK(ddp_reduce_scatter(comm, ip == 1 ? DDP_IN_PLACE : s, res, n, dt, op, &o));
          /* Element i of this rank's block is element rank*n + i of the full reduction. */
          size_t bad = coll_verify_at(res, dt, n, (size_t)rank_ * n, size_, op, "reduce_scatter");
          CHECK(bad == 0, "reduce_scatter %s %s n=%zu inplace %d: %zu wrong", ddp_dtype_name(dt),
                ddp_op_name(op), n, ip, bad);
          free(s);
          free(r);
        }
}

/* 64 collectives of mixed kinds, sizes and algorithms in flight, completed in any order. */
static void test_many_inflight(ddp_comm_t *comm) {
  enum { N = 64 };
  ddp_request_t *rq[N];
  float *bufs[N];
  size_t ns[N];
  const char *const *names = ddp_allreduce_algos();
  int nnames = 0;
  while (names[nnames]) nnames++;
  for (int j = 0; j < N; j++) {
    ns[j] = (size_t)((j * 7919) % 5000) + (j % 5 == 0 ? 200000 : 0);
    bufs[j] = malloc((ns[j] + 1) * sizeof(float));
    coll_fill(bufs[j], DDP_F32, ns[j], rank_, DDP_SUM);
    ddp_coll_opts_t o;
    ddp_coll_opts_default(&o);
    /* Algorithms that cannot run here fall back to auto. */
    const char *nm = NULL;
    o.algo = (ddp_algo_t)(j % nnames);
    if (ddp_allreduce_choice(comm, bufs[j], ns[j], DDP_F32, &o, &nm) != DDP_OK) o.algo = DDP_ALGO_AUTO;
    o.tag = j;
    if (j % 9 == 4) CHECK_OK(ddp_ibarrier(comm, &rq[j]));
    else CHECK_OK(ddp_iallreduce(comm, DDP_IN_PLACE, bufs[j], ns[j], DDP_F32, DDP_SUM, &o, &rq[j]));
  }
  /* A blocking collective posted behind them completes after them. */
  int one = 1, all = 0;
  CHECK_OK(ddp_allreduce(comm, &one, &all, 1, DDP_I32, DDP_SUM, NULL));
  CHECK(all == size_, "blocking allreduce behind 64 requests gave %d", all);
  /* Complete: odd ones waited in reverse order, then waitall on the rest. */
  for (int j = N - 1; j >= 0; j -= 2) CHECK_OK(ddp_wait(&rq[j]));
  CHECK_OK(ddp_waitall(N, rq));
  for (int j = 0; j < N; j++) {
    CHECK(rq[j] == NULL, "request %d not cleared", j);
    if (j % 9 != 4) {
      size_t bad = coll_verify(bufs[j], DDP_F32, ns[j], size_, DDP_SUM, "in-flight");
      CHECK(bad == 0, "in-flight request %d (n=%zu): %zu wrong", j, ns[j], bad);
    }
    free(bufs[j]);
  }
}

static void test_pool(ddp_comm_t *comm) {
  void *a = NULL, *b = NULL;
  CHECK_OK(ddp_alloc(comm, 1 << 20, &a));
  CHECK_OK(ddp_alloc(comm, 12345, &b));
  CHECK(a && b && a != b, "pool pointers %p %p", a, b);
  if (!a || !b) return;
  size_t n = (1 << 20) / 4;
  coll_fill(a, DDP_I32, n, rank_, DDP_SUM);
  CHECK_OK(ddp_allreduce(comm, DDP_IN_PLACE, a, n, DDP_I32, DDP_SUM, NULL));
  CHECK(coll_verify(a, DDP_I32, n, size_, DDP_SUM, "pool") == 0, "pool allreduce wrong");
  /* Out of place from the pool into malloc memory and back. */
  int32_t *m = malloc(12344);
  coll_fill(b, DDP_I32, 3086, rank_, DDP_MAX);
  CHECK_OK(ddp_allreduce(comm, b, m, 3086, DDP_I32, DDP_MAX, NULL));
  CHECK(coll_verify(m, DDP_I32, 3086, size_, DDP_MAX, "pool->malloc") == 0, "pool->malloc wrong");
  free(m);
  CHECK_OK(ddp_free(comm, b));
  CHECK_OK(ddp_free(comm, a));
  CHECK_ST(ddp_free(comm, a), DDP_EINVAL);
  CHECK_MSG("ddp_alloc");
  CHECK_ST(ddp_alloc(comm, 0, &a), DDP_EINVAL);
  CHECK_MSG("bytes");
  CHECK_ST(ddp_alloc(comm, 64, NULL), DDP_EINVAL);
  CHECK_MSG("ptr");
}

static void test_names(ddp_comm_t *comm) {
  const char *const *n = ddp_allreduce_algos();
  CHECK(n && n[0] && !strcmp(n[0], "auto"), "first name must be auto");
  int have_mpi = 0;
  for (; *n; n++) have_mpi |= !strcmp(*n, "mpi");
  CHECK(have_mpi, "mpi missing from the names");
  const char *nm = NULL;
  float x = 0;
  CHECK_OK(ddp_allreduce_choice(comm, &x, 1, DDP_F32, NULL, &nm));
  CHECK(nm && *nm, "auto choice is empty");
  ddp_coll_opts_t o;
  ddp_coll_opts_default(&o);
  for (int a = 0; a < DDP_ALGO_COUNT; a++) {
    ddp_algo_t back = DDP_ALGO_COUNT;
    CHECK_OK(ddp_algo_parse(ddp_algo_name((ddp_algo_t)a), &back));
    CHECK(back == (ddp_algo_t)a, "ddp_algo_parse(ddp_algo_name(%d)) gave %d", a, (int)back);
  }
  ddp_algo_t keep = DDP_ALGO_RING;
  CHECK_ST(ddp_algo_parse("bogus", &keep), DDP_EINVAL);
  CHECK_MSG("bogus");
  CHECK_MSG("mpi");
  CHECK(keep == DDP_ALGO_RING, "ddp_algo_parse wrote its output on error");
  CHECK_ST(ddp_algo_parse(NULL, &keep), DDP_EINVAL);
  CHECK_ST(ddp_algo_parse("ring", NULL), DDP_EINVAL);
  CHECK(!strcmp(ddp_algo_name((ddp_algo_t)99), "?"), "ddp_algo_name(99) is not ?");
  ddp_transport_t t = DDP_TRANSPORT_NCCL;
  CHECK_OK(ddp_transport_parse("staged", &t));
  CHECK(t == DDP_TRANSPORT_STAGED && !strcmp(ddp_transport_name(t), "staged"), "transport staged");
  CHECK_ST(ddp_transport_parse("carrier-pigeon", &t), DDP_EINVAL);
  CHECK_MSG("carrier-pigeon");
  CHECK(t == DDP_TRANSPORT_STAGED, "ddp_transport_parse wrote its output on error");
  CHECK(!strcmp(ddp_transport_name((ddp_transport_t)-1), "?"), "ddp_transport_name(-1) is not ?");
  o.algo = (ddp_algo_t)42;
  CHECK_ST(ddp_allreduce_choice(comm, &x, 1, DDP_F32, &o, &nm), DDP_EINVAL);
  CHECK_MSG("42");
}

static void test_bad_inputs(ddp_comm_t *comm) {
  float out[8], in[8];
  for (int i = 0; i < 8; i++) out[i] = 42.0f, in[i] = 1.0f;
  ddp_request_t *rq = NULL;
  ddp_coll_opts_t o;
  ddp_coll_opts_default(&o);
  CHECK_ST(ddp_allreduce(comm, NULL, out, 8, DDP_F32, DDP_SUM, NULL), DDP_EINVAL);
  CHECK_MSG("send");
  CHECK_ST(ddp_allreduce(comm, in, NULL, 8, DDP_F32, DDP_SUM, NULL), DDP_EINVAL);
  CHECK_MSG("recv");
  CHECK_ST(ddp_allreduce(comm, in, out, 8, (ddp_dtype_t)99, DDP_SUM, NULL), DDP_EINVAL);
  CHECK_MSG("99");
  CHECK_ST(ddp_allreduce(comm, in, out, 8, DDP_F32, (ddp_op_t)77, NULL), DDP_EINVAL);
  CHECK_MSG("77");
  CHECK_ST(ddp_allreduce(comm, in, out, SIZE_MAX / 2, DDP_F32, DDP_SUM, NULL), DDP_EINVAL);
  CHECK_MSG("overflow");
  CHECK_ST(ddp_allreduce(comm, out + 1, out, 4, DDP_F32, DDP_SUM, NULL), DDP_EINVAL);
  CHECK_MSG("overlap");
  o.algo = (ddp_algo_t)77;
  CHECK_ST(ddp_allreduce(comm, in, out, 8, DDP_F32, DDP_SUM, &o), DDP_EINVAL);
  CHECK_MSG("77");
  CHECK_MSG("auto mpi");
  o.algo = (ddp_algo_t)-1;
  CHECK_ST(ddp_broadcast(comm, out, 8, DDP_F32, 0, &o), DDP_EINVAL);
  CHECK_MSG("-1");
  o.algo = DDP_ALGO_AUTO;
  o.mem = (ddp_mem_t)9;
  CHECK_ST(ddp_allreduce(comm, in, out, 8, DDP_F32, DDP_SUM, &o), DDP_EINVAL);
  CHECK_MSG("mem");
  CHECK_ST(ddp_iallreduce(comm, in, out, 8, DDP_F32, DDP_SUM, NULL, NULL), DDP_EINVAL);
  CHECK_MSG("req");
  CHECK_ST(ddp_broadcast(comm, out, 8, DDP_F32, size_, NULL), DDP_EINVAL);
  CHECK_MSG("root");
  CHECK_ST(ddp_broadcast(comm, out, 8, DDP_F32, -1, NULL), DDP_EINVAL);
  CHECK_ST(ddp_broadcast(comm, NULL, 8, DDP_F32, 0, NULL), DDP_EINVAL);
  CHECK_MSG("buf");
  CHECK_ST(ddp_allgather(comm, in, NULL, 2, DDP_F32, NULL), DDP_EINVAL);
  CHECK_ST(ddp_allgather(comm, in, out, 2, (ddp_dtype_t)-3, NULL), DDP_EINVAL);
  CHECK_ST(ddp_reduce_scatter(comm, in, out, 1, DDP_F32, (ddp_op_t)5, NULL), DDP_EINVAL);
  CHECK_ST(ddp_reduce_scatter(comm, NULL, out, 1, DDP_F32, DDP_SUM, NULL), DDP_EINVAL);
  /* recv inside send (2*size <= 8 floats) but neither its start nor this rank's block. */
  CHECK_ST(ddp_reduce_scatter(comm, out, out + 1, 2, DDP_F32, DDP_SUM, NULL), DDP_EINVAL);
  CHECK_MSG("rank*recv_count");
  CHECK(out[0] == 42.0f && out[7] == 42.0f, "a refused reduce_scatter wrote its buffers");
  CHECK_ST(ddp_allreduce(NULL, in, out, 8, DDP_F32, DDP_SUM, NULL), DDP_EINVAL);
  CHECK_MSG("comm");
  CHECK_ST(ddp_coll_opts_default(NULL), DDP_EINVAL);
  /* Requests: NULL / already waited. */
  CHECK_ST(ddp_wait(NULL), DDP_EINVAL);
  CHECK_ST(ddp_wait(&rq), DDP_EINVAL);
  CHECK_MSG("already");
  CHECK_OK(ddp_iallreduce(comm, in, out, 8, DDP_F32, DDP_SUM, NULL, &rq));
  CHECK_OK(ddp_wait(&rq));
  CHECK_ST(ddp_wait(&rq), DDP_EINVAL);
  int done = 0;
  CHECK_ST(ddp_test(&rq, &done), DDP_EINVAL);
  CHECK_ST(ddp_waitall(3, NULL), DDP_EINVAL);
  for (int i = 0; i < 8; i++) CHECK(out[i] == (float)size_, "out[%d] = %g", i, out[i]);
  /* Failed calls above never wrote: reset and re-check one. */
  for (int i = 0; i < 8; i++) out[i] = 42.0f;
  CHECK_ST(ddp_allreduce(comm, in, out, 8, DDP_F32, (ddp_op_t)77, NULL), DDP_EINVAL);
  for (int i = 0; i < 8; i++) CHECK(out[i] == 42.0f, "failed call wrote out[%d] = %g", i, out[i]);
}

/* EBUSY while a request is live; destroyed communicator afterwards. */
static void test_lifecycle(void) {
  ddp_comm_t *c2 = NULL;
  CHECK_OK(ddp_comm_create(MPI_COMM_WORLD, &c2));
  double v[1000];
  for (int i = 0; i < 1000; i++) v[i] = 1;
  ddp_request_t *rq = NULL;
  CHECK_OK(ddp_iallreduce(c2, DDP_IN_PLACE, v, 1000, DDP_F64, DDP_SUM, NULL, &rq));
  CHECK_ST(ddp_comm_destroy(&c2), DDP_EBUSY);
  CHECK_OK(ddp_wait(&rq));
  CHECK(v[999] == size_, "v = %g", v[999]);
  CHECK_OK(ddp_comm_destroy(&c2));
  CHECK(c2 == NULL, "ddp_comm_destroy left the handle set");
  CHECK_ST(ddp_allreduce(c2, DDP_IN_PLACE, v, 1000, DDP_F64, DDP_SUM, NULL), DDP_EINVAL);
  CHECK_MSG("comm is NULL");
  CHECK_ST(ddp_iallreduce(c2, DDP_IN_PLACE, v, 1000, DDP_F64, DDP_SUM, NULL, &rq), DDP_EINVAL);
  CHECK(v[999] == size_, "destroyed-comm call wrote v = %g", v[999]);
}

/* Run with DDP_ALLREDUCE_ALGO set to an unknown name: init refuses, listing the names. MPI is
 * started by the harness (DDP_TEST_MPI) so that it outlives the refused ddp_init. */
static int run_badenv(ddp_test_t *t) {
  ddp_comm_t *comm = NULL;
  ddp_status_t st = ddp_init(&t->argc, &t->argv, MPI_COMM_WORLD, &comm);
  CHECK(st == DDP_ECONFIG, "ddp_init with a bad DDP_ALLREDUCE_ALGO returned %d: %s", (int)st,
        ddp_last_error());
  CHECK_MSG("DDP_ALLREDUCE_ALGO");
  CHECK_MSG("ring");
  if (st == DDP_OK) ddp_finalize(&comm);
  return 0;
}

/* Each case of the public API on the harness's communicator. */
#define COLL_API_CASE(name, call)                                                           \
  static int run_##name(ddp_test_t *t) {                                                    \
    ddp_comm_t *comm = t->comm;                                                             \
    (void)comm;                                                                             \
    rank_ = t->rank;                                                                        \
    size_ = t->size;                                                                        \
    call;                                                                                   \
    return 0;                                                                               \
  }
COLL_API_CASE(names, test_names(comm))
COLL_API_CASE(broadcast, test_broadcast(comm))
COLL_API_CASE(allgather, test_allgather(comm))
COLL_API_CASE(reduce_scatter, test_reduce_scatter(comm))
COLL_API_CASE(many_inflight, test_many_inflight(comm))
COLL_API_CASE(pool, test_pool(comm))
COLL_API_CASE(bad_inputs, test_bad_inputs(comm))
COLL_API_CASE(lifecycle, test_lifecycle())
static int run_barrier(ddp_test_t *t) {
  CHECK_OK(ddp_barrier(t->comm));
  ddp_request_t *rq = NULL;
  CHECK_OK(ddp_ibarrier(t->comm, &rq));
  CHECK_OK(ddp_wait(&rq));
  return 0;
}

DDP_TEST_PROGRAM("coll_api", DDP_TEST_CASE("names", run_names), DDP_TEST_CASE("broadcast", run_broadcast),
                 DDP_TEST_CASE("allgather", run_allgather), DDP_TEST_CASE("reduce_scatter", run_reduce_scatter),
                 DDP_TEST_CASE("many_inflight", run_many_inflight), DDP_TEST_CASE("pool", run_pool),
                 DDP_TEST_CASE("bad_inputs", run_bad_inputs), DDP_TEST_CASE("lifecycle", run_lifecycle),
                 DDP_TEST_CASE("barrier", run_barrier), DDP_TEST_CASE_AS("badenv", run_badenv, DDP_TEST_MPI));
