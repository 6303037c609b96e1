/* Device-memory collectives under the emulated device, for each transport that can run here
 * (staged; mpi, since emulated device memory is host memory): allreduce for every dtype and
 * op, in and out of place, sizes that span several staging chunks; broadcast, allgather,
 * reduce-scatter; non-blocking requests; ordering after the caller's stream (the input is
 * written by the stream only after a delay); bad inputs. Run with a small DDP_STAGING_CHUNK so
 * the pipeline wraps around its slots. */
#include "ddp_test.h"
#include "device_util.h"

static ddp_comm_t *comm = NULL;
static int rank, size;

/* Element i of rank r's input: 1..5, so products stay exact in every dtype. */
static double in_val(int r, size_t i) { return (double)(((i * 7) + (size_t)r * 3) % 5) + 1; }

static double expect_val(ddp_op_t op, ddp_dtype_t t, size_t i) {
  double acc = in_val(0, i);
  for (int r = 1; r < size; r++) {
    double v = in_val(r, i);
    acc = op == DDP_SUM || op == DDP_AVG ? acc + v : op == DDP_PROD ? acc * v : op == DDP_MIN ? fmin(acc, v) : fmax(acc, v);
  }
  if (op == DDP_AVG) {
    if (t == DDP_F32) return (double)((float)acc / (float)size);
    if (t == DDP_F64) return acc / size;
    return (double)((int64_t)acc / size);
  }
  return acc;
}

/* u8 stores v+3 in put(); give it values that survive that: our inputs are >= 1 already. */
static void fill(void *h, ddp_dtype_t t, size_t n, int r) {
  for (size_t i = 0; i < n; i++) put(h, t, i, in_val(r, i) - (t == DDP_U8 ? 3 : 0));
}
static double read_val(const void *h, ddp_dtype_t t, size_t i) {
  return get(h, t, i) + (t == DDP_U8 ? 3 : 0);
}

static void *dev_alloc(size_t bytes) {
  void *p = NULL;
  CHECK_OK(ddp_device_malloc(comm, bytes ? bytes : 1, &p));
  return p;
}

static void test_allreduce(const char *tp, ddp_stream_t *s) {
  size_t sizes[] = {1, 1000, 3 * 1024 + 17}; /* the last spans several 4 KB chunks */
  ddp_op_t ops[] = {DDP_SUM, DDP_AVG, DDP_MIN, DDP_MAX, DDP_PROD};
  for (int t = 0; t < DDP_DTYPE_COUNT; t++) {
    for (int k = 0; k < 5; k++) {
      ddp_op_t op = ops[k];
      if (op == DDP_AVG && (t == DDP_F16 || t == DDP_BF16 || t == DDP_U8)) continue;
      if (op == DDP_PROD && t == DDP_U8 && size > 3) continue;
      for (int z = 0; z < 3; z++) {
        size_t n = sizes[z], es = ddp_dtype_size((ddp_dtype_t)t);
        for (int inplace = 0; inplace < 2; inplace++) {
          char *h = malloc(n * es);
          void *dsend = dev_alloc(n * es), *drecv = inplace ? dsend : dev_alloc(n * es);
          fill(h, (ddp_dtype_t)t, n, rank);
          CHECK_OK(ddp_memcpy_async(comm, dsend, h, n * es, s));
          if (!inplace) CHECK_OK(ddp_memset_async(comm, drecv, 0x5a, n * es, s));
          ddp_coll_opts_t o;
          ddp_coll_opts_default(&o);
          o.mem = DDP_MEM_CUDA;
          o.stream = s;
          CHECK_OK(ddp_allreduce(comm, inplace ? DDP_IN_PLACE : dsend, drecv, n, (ddp_dtype_t)t, op, &o));
          memset(h, 0, n * es);
          CHECK_OK(ddp_memcpy_async(comm, h, drecv, n * es, s));
          CHECK_OK(ddp_stream_synchronize(comm, s));
          int wrong = 0;
          size_t first = 0;
          for (size_t i = 0; i < n; i++)
            if (read_val(h, (ddp_dtype_t)t, i) != expect_val(op, (ddp_dtype_t)t, i)) {
              if (!wrong) first = i;
              wrong++;
            }
          CHECK(wrong == 0, "[%s] allreduce %s %s n=%zu %s: %d wrong, first at %zu: %g, expected %g", tp,
                ddp_dtype_name((ddp_dtype_t)t), ddp_op_name(op), n, inplace ? "in place" : "out of place",
                wrong, first, read_val(h, (ddp_dtype_t)t, first), expect_val(op, (ddp_dtype_t)t, first));
          CHECK_OK(ddp_device_free(comm, dsend));
          if (!inplace) CHECK_OK(ddp_device_free(comm, drecv));
          free(h);
        }
      }
    }
  }
}

/* Each algorithm by name over the transport (auto picks rhd for these sizes). */
static void test_algos(const char *tp, ddp_stream_t *s) {
  const char *algos[] = {"ring", "rhd"};
  ddp_dtype_t types[] = {DDP_F32, DDP_BF16, DDP_I64};
  const size_t n = 3 * 1024 + 17;
  for (int a = 0; a < 2; a++)
    for (int k = 0; k < 3; k++) {
      ddp_dtype_t t = types[k];
      size_t es = ddp_dtype_size(t);
      char *h = malloc(n * es);
      void *d = dev_alloc(n * es);
      fill(h, t, n, rank);
      CHECK_OK(ddp_memcpy_async(comm, d, h, n * es, s));
      ddp_coll_opts_t o;
      ddp_coll_opts_default(&o);
      o.mem = DDP_MEM_CUDA;
      o.stream = s;
      CHECK_OK(ddp_algo_parse(algos[a], &o.algo));
      CHECK_OK(ddp_allreduce(comm, DDP_IN_PLACE, d, n, t, DDP_SUM, &o));
      CHECK_OK(ddp_memcpy_async(comm, h, d, n * es, s));
      CHECK_OK(ddp_stream_synchronize(comm, s));
      int wrong = 0;
      for (size_t i = 0; i < n; i++) wrong += read_val(h, t, i) != expect_val(DDP_SUM, t, i);
      CHECK(wrong == 0, "[%s] allreduce algo %s %s: %d wrong", tp, algos[a], ddp_dtype_name(t), wrong);
      CHECK_OK(ddp_device_free(comm, d));
      free(h);
    }
}

static void test_others(const char *tp, ddp_stream_t *s) {
  const size_t n = 2 * 1024 + 5; /* i32 elements: 8 KB, three 4 KB chunks */
  int32_t *h = malloc(n * 4 * (size_t)size);
  /* broadcast from the first and the last rank */
  for (int root = 0; root < size; root += size - 1 > 0 ? size - 1 : 1) {
    int32_t *d = dev_alloc(n * 4);
    for (size_t i = 0; i < n; i++) h[i] = rank == root ? (int32_t)(i * 3 + 7) : -1;
    CHECK_OK(ddp_memcpy_async(comm, d, h, n * 4, s));
    ddp_coll_opts_t o;
    ddp_coll_opts_default(&o);
    o.mem = DDP_MEM_CUDA;
    o.stream = s;
    CHECK_OK(ddp_broadcast(comm, d, n, DDP_I32, root, &o));
    CHECK_OK(ddp_memcpy_async(comm, h, d, n * 4, s));
    CHECK_OK(ddp_stream_synchronize(comm, s));
    int wrong = 0;
    for (size_t i = 0; i < n; i++) wrong += h[i] != (int32_t)(i * 3 + 7);
    CHECK(wrong == 0, "[%s] broadcast root %d: %d wrong", tp, root, wrong);
    CHECK_OK(ddp_device_free(comm, d));
    if (size == 1) break;
  }
  /* allgather, out of place and in place */
  for (int inplace = 0; inplace < 2; inplace++) {
    int32_t *dr = dev_alloc(n * 4 * (size_t)size), *ds = inplace ? dr + (size_t)rank * n : dev_alloc(n * 4);
    for (size_t i = 0; i < n; i++) h[i] = (int32_t)(rank * 100000 + (int)i);
    CHECK_OK(ddp_memcpy_async(comm, ds, h, n * 4, s));
    ddp_coll_opts_t o;
    ddp_coll_opts_default(&o);
    o.mem = DDP_MEM_CUDA;
    o.stream = s;
    CHECK_OK(ddp_allgather(comm, inplace ? DDP_IN_PLACE : ds, dr, n, DDP_I32, &o));
    CHECK_OK(ddp_memcpy_async(comm, h, dr, n * 4 * (size_t)size, s));
    CHECK_OK(ddp_stream_synchronize(comm, s));
    int wrong = 0;
    for (int r = 0; r < size; r++)
      for (size_t i = 0; i < n; i++) wrong += h[(size_t)r * n + i] != (int32_t)(r * 100000 + (int)i);
    CHECK(wrong == 0, "[%s] allgather %s: %d wrong", tp, inplace ? "in place" : "out of place", wrong);
    CHECK_OK(ddp_device_free(comm, dr));
    if (!inplace) CHECK_OK(ddp_device_free(comm, ds));
  }
  /* reduce-scatter (sum): out of place, in place (DDP_IN_PLACE, result in the first block),
   * in place in this rank's own block (recv = send + rank*n) */
  for (int inplace = 0; inplace < 3; inplace++) {
    size_t tot = n * (size_t)size;
    int32_t *ds = dev_alloc(tot * 4);
    int32_t *dr = inplace == 2 ? ds + (size_t)rank * n : inplace ? ds : dev_alloc(n * 4);
    for (size_t i = 0; i < tot; i++) h[i] = (int32_t)((int)i % 1000 + rank);
    CHECK_OK(ddp_memcpy_async(comm, ds, h, tot * 4, s));
    ddp_coll_opts_t o;
    ddp_coll_opts_default(&o);
    o.mem = DDP_MEM_CUDA;
    o.stream = s;
    CHECK_OK(ddp_reduce_scatter(comm, inplace == 1 ? DDP_IN_PLACE : ds, dr, n, DDP_I32, DDP_SUM, &o));
    CHECK_OK(ddp_memcpy_async(comm, h, dr, n * 4, s));
    CHECK_OK(ddp_stream_synchronize(comm, s));
    int wrong = 0;
    for (size_t i = 0; i < n; i++) {
      size_t g = (size_t)rank * n + i;
      int32_t want = (int32_t)(size * ((int)g % 1000) + size * (size - 1) / 2);
      wrong += h[i] != want;
    }
    CHECK(wrong == 0, "[%s] reduce_scatter %s: %d wrong", tp,
          inplace == 2 ? "in own block" : inplace ? "in place" : "out of place", wrong);
    CHECK_OK(ddp_device_free(comm, ds));
    if (!inplace) CHECK_OK(ddp_device_free(comm, dr));
  }
  free(h);
}

/* The input reaches device memory only through the caller's stream, after a delay: a
 * collective that did not wait for that stream would reduce stale data (zeros). */
static void test_ordering(const char *tp, ddp_stream_t *s) {
  const size_t n = 5000;
  float *h = malloc(n * 4), *hr = malloc(n * 4);
  float *d = dev_alloc(n * 4);
  CHECK_OK(ddp_memset_async(comm, d, 0, n * 4, s));
  CHECK_OK(ddp_stream_synchronize(comm, s));
  for (size_t i = 0; i < n; i++) h[i] = (float)(rank + 1);
  CHECK_OK(ddp_launch_host_func(comm, s, sleep_ms, (void *)(intptr_t)80));
  CHECK_OK(ddp_memcpy_async(comm, d, h, n * 4, s));
  ddp_coll_opts_t o;
  ddp_coll_opts_default(&o);
  o.mem = DDP_MEM_CUDA;
  o.stream = s;
  CHECK_OK(ddp_allreduce(comm, DDP_IN_PLACE, d, n, DDP_F32, DDP_SUM, &o));
  /* ...and work queued on the stream afterwards sees the result */
  CHECK_OK(ddp_memcpy_async(comm, hr, d, n * 4, s));
  CHECK_OK(ddp_stream_synchronize(comm, s));
  float want = (float)(size * (size + 1) / 2);
  int wrong = 0;
  for (size_t i = 0; i < n; i++) wrong += hr[i] != want;
  CHECK(wrong == 0, "[%s] allreduce did not wait for the caller's stream: %d of %zu wrong (first %g, want %g)",
        tp, wrong, n, hr[0], want);
  /* non-blocking, two in flight, on the default stream */
  float *d2 = dev_alloc(n * 4);
  for (size_t i = 0; i < n; i++) h[i] = (float)i;
  CHECK_OK(ddp_memcpy_async(comm, d, h, n * 4, NULL));
  CHECK_OK(ddp_memcpy_async(comm, d2, h, n * 4, NULL));
  o.stream = NULL;
  ddp_request_t *rq[2] = {NULL, NULL};
  CHECK_OK(ddp_iallreduce(comm, DDP_IN_PLACE, d, n, DDP_F32, DDP_SUM, &o, &rq[0]));
  CHECK_OK(ddp_iallreduce(comm, DDP_IN_PLACE, d2, n, DDP_F32, DDP_MAX, &o, &rq[1]));
  CHECK_OK(ddp_waitall(2, rq));
  CHECK_OK(ddp_memcpy_async(comm, hr, d, n * 4, NULL));
  CHECK_OK(ddp_memcpy_async(comm, h, d2, n * 4, NULL));
  CHECK_OK(ddp_stream_synchronize(comm, NULL));
  wrong = 0;
  for (size_t i = 0; i < n; i++) wrong += hr[i] != (float)i * (float)size || h[i] != (float)i;
  CHECK(wrong == 0, "[%s] non-blocking device allreduce: %d wrong", tp, wrong);
  CHECK_OK(ddp_device_free(comm, d));
  CHECK_OK(ddp_device_free(comm, d2));
  free(h), free(hr);
}

/* A device collective waits for the caller's stream through an event, never for the whole
 * device: a stream it has nothing to do with is held by a host function until after the call
 * returns. With a device-wide sync the call would wait for that stream (here: until the host
 * function gives up after 3 s, which the check reports). */
typedef struct {
  _Atomic int release, timed_out; /* set on one thread, read on the other */
  int max_ms;                     /* 0: 3000 */
} hold_t;
/* A non-blocking collective waits for the work queued on its stream before it was posted, and
 * not for work queued there after it (the backward kernels that follow a bucket's post): its
 * input event is recorded when it is posted. To make the check deterministic the engine is first
 * held busy by a collective on another stream, behind a closed gate, so it reaches ours only
 * after the later work has been queued. */
static int post_gate, post_late;
static void post_gate_fn(void *arg) {
  (void)arg;
  for (int i = 0; i < 10000 && !__atomic_load_n(&post_gate, __ATOMIC_ACQUIRE); i++) sleep_ms((void *)(intptr_t)1);
}
static void post_late_fn(void *arg) {
  (void)arg;
  sleep_ms((void *)(intptr_t)400);
  __atomic_store_n(&post_late, 1, __ATOMIC_RELEASE);
}

static void test_post_order(const char *tp, ddp_stream_t *s) {
  ddp_comm_info_t info;
  CHECK_OK(ddp_comm_info(comm, &info));
  if (info.thread_level < MPI_THREAD_MULTIPLE) return; /* non-blocking runs at post time there */
  const size_t n = 3000;
  ddp_stream_t *s0 = NULL;
  CHECK_OK(ddp_stream_create(comm, &s0));
  float *h = malloc(n * 4), *d0 = dev_alloc(n * 4), *d = dev_alloc(n * 4);
  for (size_t i = 0; i < n; i++) h[i] = (float)(rank * 1000 + (int)i % 997);
  CHECK_OK(ddp_memcpy_async(comm, d0, h, n * 4, s0));
  __atomic_store_n(&post_gate, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&post_late, 0, __ATOMIC_RELEASE);
  ddp_coll_opts_t o;
  ddp_coll_opts_default(&o);
  o.mem = DDP_MEM_CUDA;
  ddp_request_t *rq[2] = {NULL, NULL};
  CHECK_OK(ddp_launch_host_func(comm, s0, post_gate_fn, NULL));
  o.stream = s0;
  CHECK_OK(ddp_iallreduce(comm, DDP_IN_PLACE, d0, n, DDP_F32, DDP_SUM, &o, &rq[0]));
  CHECK_OK(ddp_memcpy_async(comm, d, h, n * 4, s)); /* before the post: waited for */
  o.stream = s;
  CHECK_OK(ddp_iallreduce(comm, DDP_IN_PLACE, d, n, DDP_F32, DDP_SUM, &o, &rq[1]));
  CHECK_OK(ddp_launch_host_func(comm, s, post_late_fn, NULL)); /* after the post: not */
  __atomic_store_n(&post_gate, 1, __ATOMIC_RELEASE);
  CHECK_OK(ddp_wait(&rq[0]));
  CHECK_OK(ddp_wait(&rq[1]));
  int late = __atomic_load_n(&post_late, __ATOMIC_ACQUIRE), any = 0;
  MPI_Allreduce(&late, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  CHECK(!any, "[%s] a non-blocking allreduce waited for work queued on its stream after it was "
        "posted (its input event was recorded when the engine ran it, not when it was posted)", tp);
  CHECK_OK(ddp_memcpy_async(comm, h, d, n * 4, s));
  CHECK_OK(ddp_stream_synchronize(comm, s));
  int wrong = 0;
  for (size_t i = 0; i < n; i++) {
    float want = 0;
    for (int r = 0; r < size; r++) want += (float)(r * 1000 + (int)i % 997);
    wrong += h[i] != want;
  }
  CHECK(wrong == 0, "[%s] post-order allreduce: %d of %zu wrong", tp, wrong, n);
  CHECK_OK(ddp_stream_synchronize(comm, s0));
  CHECK_OK(ddp_stream_destroy(comm, &s0));
  CHECK_OK(ddp_device_free(comm, d0));
  CHECK_OK(ddp_device_free(comm, d));
  free(h);
}

static void hold_fn(void *arg) {
  hold_t *h = arg;
  int lim = h->max_ms ? h->max_ms : 3000;
  for (int i = 0; i < lim && !h->release; i++) sleep_ms((void *)(intptr_t)1);
  h->timed_out = !h->release;
}

static void test_no_device_sync(const char *tp, ddp_stream_t *s) {
  const size_t n = 1000;
  ddp_stream_t *u;
  CHECK_OK(ddp_stream_create(comm, &u));
  float *d = dev_alloc(n * 4), *h = malloc(n * 4);
  for (size_t i = 0; i < n; i++) h[i] = 1.0f;
  CHECK_OK(ddp_memcpy_async(comm, d, h, n * 4, s));
  hold_t hold = {0, 0, 0};
  CHECK_OK(ddp_launch_host_func(comm, u, hold_fn, &hold));
  ddp_coll_opts_t o;
  ddp_coll_opts_default(&o);
  o.mem = DDP_MEM_CUDA;
  o.stream = s;
  CHECK_OK(ddp_allreduce(comm, DDP_IN_PLACE, d, n, DDP_F32, DDP_SUM, &o));
  hold.release = 1;
  CHECK_OK(ddp_stream_synchronize(comm, u));
  CHECK(!hold.timed_out, "[%s] the collective waited for an unrelated stream (device-wide sync)", tp);
  CHECK_OK(ddp_memcpy_async(comm, h, d, n * 4, s));
  CHECK_OK(ddp_stream_synchronize(comm, s));
  CHECK(h[0] == (float)size && h[n - 1] == (float)size, "[%s] result %g, want %d", tp, h[0], size);
  CHECK_OK(ddp_device_free(comm, d));
  CHECK_OK(ddp_stream_destroy(comm, &u));
  free(h);
}

/* A caller's stream that never gets to the collective's input: the wait for it is under the
 * DDP_TIMEOUT_S watchdog (run with DDP_TIMEOUT_S=1 DDP_ON_TIMEOUT=return, one rank). */
static void test_timeout(const char *tp, ddp_stream_t *s) {
  const size_t n = 1000;
  float *d = dev_alloc(n * 4), *h = malloc(n * 4);
  hold_t hold = {0, 0, 20000};
  CHECK_OK(ddp_launch_host_func(comm, s, hold_fn, &hold));
  ddp_coll_opts_t o;
  ddp_coll_opts_default(&o);
  o.mem = DDP_MEM_CUDA;
  o.stream = s;
  double t0 = MPI_Wtime();
  CHECK_ST(ddp_allreduce(comm, DDP_IN_PLACE, d, n, DDP_F32, DDP_SUM, &o), DDP_ETIMEDOUT);
  CHECK_MSG("caller's stream");
  double waited = MPI_Wtime() - t0;
  CHECK(waited >= 0.9 && waited < 10, "[%s] timed out after %.1f s with DDP_TIMEOUT_S=1", tp, waited);
  hold.release = 1;
  CHECK_OK(ddp_stream_synchronize(comm, s));
  CHECK(!hold.timed_out, "[%s] hold released late", tp);
  /* the communicator still works on one rank */
  for (size_t i = 0; i < n; i++) h[i] = 2.0f;
  CHECK_OK(ddp_memcpy_async(comm, d, h, n * 4, s));
  CHECK_OK(ddp_allreduce(comm, DDP_IN_PLACE, d, n, DDP_F32, DDP_SUM, &o));
  CHECK_OK(ddp_memcpy_async(comm, h, d, n * 4, s));
  CHECK_OK(ddp_stream_synchronize(comm, s));
  CHECK(h[0] == 2.0f * size && h[n - 1] == 2.0f * size, "[%s] after a timeout: %g", tp, h[0]);
  CHECK_OK(ddp_device_free(comm, d));
  free(h);
}

static void test_bad(void) {
  int emu = ddp_device_emulated(comm);
  float host[16] = {0};
  void *d = dev_alloc(64);
  ddp_coll_opts_t o;
  ddp_coll_opts_default(&o);
  o.mem = DDP_MEM_CUDA;
  CHECK_ST(ddp_allreduce(comm, DDP_IN_PLACE, host, 16, DDP_F32, DDP_SUM, &o), DDP_EINVAL);
  CHECK_MSG("not device memory");
  if (emu) { /* exact bounds and stream handles: only the emulation can check them */
    CHECK_ST(ddp_allreduce(comm, DDP_IN_PLACE, d, 17, DDP_F32, DDP_SUM, &o), DDP_EINVAL);
    CHECK_MSG("68 bytes");
    o.stream = (void *)host;
    CHECK_ST(ddp_allreduce(comm, DDP_IN_PLACE, d, 16, DDP_F32, DDP_SUM, &o), DDP_EINVAL);
    CHECK_MSG("opts->stream");
    o.stream = NULL;
    CHECK_ST(ddp_device_set_transport(comm, DDP_TRANSPORT_NCCL), DDP_ENOTSUP);
    CHECK_MSG("transport 'nccl'");
  }
  CHECK_ST(ddp_device_set_transport(comm, (ddp_transport_t)9), DDP_EINVAL);
  CHECK_MSG("9");
  CHECK_ST(ddp_device_set_transport(NULL, DDP_TRANSPORT_MPI), DDP_EINVAL);
  if (ddp_device_set_transport(comm, DDP_TRANSPORT_MPI) == DDP_OK) {
    o.algo = DDP_ALGO_MPI;
    CHECK_ST(ddp_allreduce(comm, DDP_IN_PLACE, d, 16, DDP_F32, DDP_SUM, &o), DDP_EINVAL);
    CHECK_MSG("ring, rhd");
    o.algo = DDP_ALGO_AUTO;
  } else {
    CHECK(!emu, "the emulation must accept transport mpi: %s", ddp_last_error());
  }
  CHECK_OK(ddp_device_free(comm, d));
}

/* Argument "timeout": only the watchdog checks of every transport. */
static int run_device_coll(ddp_test_t *t) {
  comm = t->comm;
  rank = t->rank;
  size = t->size;
#ifdef DDP_TEST_GPU
  /* The same checks on a real GPU (label gpu), with NCCL too; skipped where there is none. */
  int verdict = ddp_test_device_verdict(comm, "gpu_coll", DDP_TEST_WANT_CUDA);
  if (verdict) return verdict;
  const char *tps[] = {"staged", "mpi", "nccl"};
  const int ntps = 3;
#else
  CHECK(ddp_device_emulated(comm), "needs DDP_DEVICE_EMULATE=1");
  const char *tps[] = {"staged", "mpi"};
  const int ntps = 2;
#endif
  if (ddp_device_available(comm)) {
    ddp_stream_t *s = NULL;
    CHECK_OK(ddp_stream_create(comm, &s));
    int timeout_mode = t->argc > 1 && !strcmp(t->argv[1], "timeout");
    for (int k = 0; k < ntps; k++) {
      const char *name = NULL;
      ddp_transport_t want = DDP_TRANSPORT_AUTO, got = DDP_TRANSPORT_AUTO;
      CHECK_OK(ddp_transport_parse(tps[k], &want));
      ddp_status_t st = ddp_device_set_transport(comm, want);
      if (st != DDP_OK && !ddp_device_emulated(comm)) {
        if (rank == 0) printf("gpu_coll: transport %s not available: %s\n", tps[k], ddp_last_error());
        continue;
      }
      CHECK_ST(st, DDP_OK);
      CHECK_OK(ddp_device_transport(comm, DDP_TRANSPORT_AUTO, &got));
      name = ddp_transport_name(got);
      CHECK(name && !strcmp(name, tps[k]), "transport %s, wanted %s", name ? name : "?", tps[k]);
      if (timeout_mode) {
        test_timeout(tps[k], s);
        continue;
      }
      test_ordering(tps[k], s);
      test_post_order(tps[k], s);
      test_allreduce(tps[k], s);
      test_others(tps[k], s);
      test_algos(tps[k], s);
      test_no_device_sync(tps[k], s);
    }
    if (!timeout_mode) test_bad();
    CHECK_OK(ddp_stream_destroy(comm, &s));
  }
  return 0;
}

DDP_TEST_PROGRAM("device_coll", DDP_TEST_CASE("device_coll", run_device_coll));
