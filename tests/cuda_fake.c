/* The CUDA backend, the GPU probe and the NCCL transport run without a GPU: this program is
 * linked with runtime/device/device_cuda.c, runtime/device/device_probe.c and collectives/transports/coll_nccl.c compiled
 * against the fake CUDA runtime and NCCL of tests/fake_cuda (DDP_CUDA_FAKE), and with the rest
 * of the library (static, for its internals). It checks what only a GPU run would otherwise
 * show, and what one GPU cannot show at all:
 *   errors   cu_event_query on an unfinished event leaves no cudaErrorNotReady behind (the next
 *            kernel launch used to fail with "device not ready"), nor do an allocation failure,
 *            a failed call, a launch failure or a host-pointer query; sticky errors still show;
 *   probe    one GPU per rank by the rank's index on its real host, also under virtual nodes;
 *            two ranks on one GPU (PCI bus id) rule nccl out on every rank, with the reason;
 *            DDP_REQUIRE_GPU=1 without a device fails;
 *   nccl     collectives through coll_nccl.c with values checked (the fake moves data with MPI
 *            and refuses NCCL-illegal buffer overlaps: in-place reduce-scatter must pass
 *            recvbuff == sendbuff + rank*n); the communicator created non-blocking and polled;
 *            a failed creation (on one rank, or of the id on rank 0) fails every rank and is
 *            sticky (no second ncclCommInitRank); a creation or collective that never ends
 *            times out under the watchdog and aborts the communicator; an asynchronous error
 *            aborts it.
 * Run at np=2 with DDP_DEVICE_EMULATE=1 (the NCCL part uses the emulated device's streams and
 * events) DDP_ON_TIMEOUT=return DDP_TIMEOUT_S=1. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll_device_internal.h"
#include "ddp_test.h"
#include "fake_cuda.h"

static int rank, size;
static MPI_Comm data_comm;

static ddp__comm_t *impl_of(ddp_comm_t *comm) {
  ddp__comm_t *c = NULL;
  CHECK_OK(ddp__comm_get(comm, "comm", &c));
  return c;
}

/* ---- device_cuda.c: the thread's last error ---------------------------------------------- */
#define CLEAN(what) \
  CHECK(cudaPeekAtLastError() == cudaSuccess, "%s left '%s' as the thread's last error", what, \
        cudaGetErrorString(cudaPeekAtLastError()))

static void test_cuda_errors(ddp__comm_t *c) {
  fake_cuda_set_devices(1);
  int saved_device = c->device;
  c->device = 0;
  ddp__device_t dv;
  memset(&dv, 0, sizeof dv);
  ddp__device_t *d = &dv;
  d->c = c;
  d->kind = DDP_DEVICE_CUDA;
  d->impl = &ddp__devimpl_cuda;
  CHECK_OK(d->impl->init(d));
  CHECK(strstr(d->desc, "Fake GPU 0") != NULL, "desc: %s", d->desc);
  CHECK_OK(d->impl->bind(d));
  ddp_stream_t *s = NULL;
  ddp_event_t *e = NULL;
  void *buf = NULL;
  CHECK_OK(d->impl->stream_create(d, &s));
  CHECK_OK(d->impl->event_create(d, &e));
  CHECK_OK(d->impl->dev_alloc(d, 4096, &buf));
  int launches = fake_cuda_launches;

  /* An unfinished event, polled as the staging pipeline and the host waits do. */
  fake_cuda_event_pending((cudaEvent_t)e, 1);
  for (int i = 0; i < 3; i++) {
    int done = 1;
    CHECK_OK(d->impl->event_query(d, e, &done));
    CHECK(done == 0, "pending event reported done");
  }
  CLEAN("cu_event_query on a pending event");
  CHECK_OK(d->impl->reduce(d, buf, buf, 16, DDP_F32, DDP_SUM, s));
  CHECK_OK(d->impl->nonfinite(d, buf, 16, DDP_F32, (int *)buf, s));
  fake_cuda_event_pending((cudaEvent_t)e, 0);
  int done = 0;
  CHECK_OK(d->impl->event_query(d, e, &done));
  CHECK(done == 1, "finished event reported pending");

  /* A query that really fails: reported, and not left behind. */
  fake_cuda_fail_next("cudaEventQuery", cudaErrorLaunchFailure);
  CHECK_ST(d->impl->event_query(d, e, &done), DDP_ECUDA);
  CHECK_MSG("unspecified launch failure");
  CLEAN("a failed cudaEventQuery");
  CHECK_OK(d->impl->scale(d, buf, 16, DDP_F32, 2.0, 0, s));

  /* Out of memory: DDP_ENOMEM, no output, nothing left behind. */
  void *p = NULL;
  fake_cuda_fail_next("cudaMalloc", cudaErrorMemoryAllocation);
  CHECK_ST(d->impl->dev_alloc(d, (size_t)1 << 20, &p), DDP_ENOMEM);
  CHECK(p == NULL, "output written on error");
  CLEAN("a failed cudaMalloc");
  fake_cuda_fail_next("cudaMallocHost", cudaErrorMemoryAllocation);
  CHECK_ST(d->impl->host_alloc(d, (size_t)1 << 20, &p), DDP_ENOMEM);
  CLEAN("a failed cudaMallocHost");
  CHECK_OK(d->impl->reduce(d, buf, buf, 16, DDP_F32, DDP_MAX, s));

  /* Any failed call (the CU macro), then a launch. */
  fake_cuda_fail_next("cudaMemcpyAsync", cudaErrorInvalidValue);
  CHECK_ST(d->impl->memcpy_async(d, buf, buf, 64, s), DDP_ECUDA);
  CHECK_MSG("cudaMemcpyAsync");
  CLEAN("a failed cudaMemcpyAsync");
  CHECK_OK(d->impl->convert(d, buf, DDP_F16, buf, DDP_F32, 16, s));

  /* A launch failure is the launch's, named, and gone afterwards. */
  fake_cuda_fail_next("launch", cudaErrorInvalidConfiguration);
  CHECK_ST(d->impl->scale(d, buf, 16, DDP_F32, 2.0, 0, s), DDP_ECUDA);
  CHECK_MSG("scale kernel launch");
  CHECK_MSG("invalid configuration argument");
  CLEAN("a failed launch");
  CHECK_OK(d->impl->reduce(d, buf, buf, 16, DDP_F32, DDP_SUM, s));

  /* Plain host memory is not device memory, and asking leaves nothing behind. */
  char host[64];
  CHECK(!d->impl->is_dev(d, host, sizeof host), "host memory taken for device memory");
  CLEAN("cudaPointerGetAttributes on host memory");
  CHECK_OK(d->impl->reduce(d, buf, buf, 16, DDP_F32, DDP_SUM, s));
  CHECK(fake_cuda_launches - launches == 8, "%d launches, expected 8", fake_cuda_launches - launches);

  /* A faulted context is sticky: every call reports it, no query passes it off as "not yet". */
  fake_cuda_event_pending((cudaEvent_t)e, 1);
  fake_cuda_sticky(cudaErrorIllegalAddress);
  CHECK_ST(d->impl->event_query(d, e, &done), DDP_ECUDA);
  CHECK_MSG("illegal memory access");
  CHECK_ST(d->impl->reduce(d, buf, buf, 16, DDP_F32, DDP_SUM, s), DDP_ECUDA);
  CHECK_MSG("illegal memory access");
  fake_cuda_sticky(cudaSuccess);
  (void)cudaGetLastError();

  CHECK_OK(d->impl->dev_free(d, buf));
  CHECK_OK(d->impl->event_destroy(d, e));
  CHECK_OK(d->impl->stream_destroy(d, s));
  d->impl->fini(d);
  c->device = saved_device;
  fake_cuda_set_devices(-1);
}

/* ---- device_probe.c ------------------------------------------------------------------------ */
static int same_on_all_ranks(const char *text) {
  char ref[256];
  snprintf(ref, sizeof ref, "%s", text);
  MPI_Bcast(ref, (int)sizeof ref, MPI_CHAR, 0, MPI_COMM_WORLD);
  int same = strncmp(ref, text, sizeof ref - 1) == 0, all = 0;
  MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all;
}

static void test_probe(ddp_comm_t *comm) {
  ddp__comm_t *c = impl_of(comm);
  ddp__comm_t saved;
  memcpy(&saved, c, sizeof saved); /* the probe's fields are put back one by one below */
  ddp_transport_t name = DDP_TRANSPORT_AUTO;

  /* As many GPUs as ranks on the host: one each, bound, nothing shared. */
  fake_cuda_set_devices(size);
  CHECK_OK(ddp__device_probe(c));
  CHECK(c->gpu_count == size && c->device == c->host_rank, "%d GPUs, host rank %d: bound to %d",
        c->gpu_count, c->host_rank, c->device);
  CHECK(fake_cuda_current_device() == c->device, "current device %d, bound %d",
        fake_cuda_current_device(), c->device);
  CHECK(c->gpu_shared == 0, "GPUs reported shared: %s", c->gpu_shared_reason);
  char bus[32];
  snprintf(bus, sizeof bus, "0000:%02X:00.0", 0x10 + c->device);
  CHECK(!strcmp(c->gpu_busid, bus), "bus id %s, expected %s", c->gpu_busid, bus);
  CHECK_OK(ddp_device_transport(comm, DDP_TRANSPORT_STAGED, &name));

  /* One GPU for all ranks: every rank refuses nccl with the same reason. */
  fake_cuda_set_devices(1);
  CHECK_OK(ddp__device_probe(c));
  CHECK(c->device == 0, "bound to %d of 1", c->device);
  CHECK(c->gpu_shared == size, "%d ranks reported sharing, expected %d", c->gpu_shared, size);
  CHECK(strstr(c->gpu_shared_reason, "share their GPU") &&
            strstr(c->gpu_shared_reason, "0000:10:00.0"),
        "reason: %s", c->gpu_shared_reason);
  CHECK(same_on_all_ranks(c->gpu_shared_reason), "ranks differ on the reason: %s", c->gpu_shared_reason);
  CHECK_ST(ddp_device_transport(comm, DDP_TRANSPORT_NCCL, &name), DDP_ENOTSUP);
  CHECK_MSG("share their GPU");
  CHECK_ST(ddp_device_set_transport(comm, DDP_TRANSPORT_NCCL), DDP_ENOTSUP);
  CHECK_OK(ddp_device_transport(comm, DDP_TRANSPORT_STAGED, &name));

  /* DDP_DEVICE=1 everywhere: the same GPU again. */
  fake_cuda_set_devices(2);
  c->cfg.device = 1;
  CHECK_OK(ddp__device_probe(c));
  CHECK(c->device == 1 && c->gpu_shared == size, "DDP_DEVICE=1: device %d, %d sharing", c->device,
        c->gpu_shared);
  c->cfg.device = 5;
  CHECK_ST(ddp__device_probe(c), DDP_ECONFIG);
  CHECK_MSG("DDP_DEVICE='5'");
  c->cfg.device = -1;

  /* No driver: host mode, unless DDP_REQUIRE_GPU=1. */
  fake_cuda_set_devices(-1);
  CHECK_OK(ddp__device_probe(c));
  CHECK(c->device == -1 && c->gpu_count == 0 && c->gpu_shared == 0, "no driver: device %d", c->device);
  CLEAN("the probe without a driver");
  c->cfg.require_gpu = 1;
  CHECK_ST(ddp__device_probe(c), DDP_ENOTSUP);
  CHECK_MSG("DDP_REQUIRE_GPU=1");
  CHECK_MSG("cudaGetDeviceCount");
  c->cfg.require_gpu = saved.cfg.require_gpu;
  c->gpu_count = saved.gpu_count;
  c->device = saved.device;
  c->host_rank = saved.host_rank;
  c->gpu_shared = saved.gpu_shared;
  memcpy(c->gpu_busid, saved.gpu_busid, sizeof c->gpu_busid);
  memcpy(c->gpu_shared_reason, saved.gpu_shared_reason, sizeof c->gpu_shared_reason);

  /* Virtual nodes of one rank each: every rank is local rank 0 of its node, but the GPU
   * follows the rank's place on the real host. */
  fake_cuda_set_devices(size);
  setenv("DDP_RANKS_PER_NODE", "1", 1);
  ddp_comm_t *vcomm = NULL;
  CHECK_OK(ddp_comm_create(MPI_COMM_WORLD, &vcomm));
  unsetenv("DDP_RANKS_PER_NODE");
  ddp__comm_t *v = impl_of(vcomm);
  if (v) {
    CHECK(v->virtual_nodes && v->local_rank == 0, "virtual nodes %d, local rank %d",
          v->virtual_nodes, v->local_rank);
    CHECK(v->host_rank == rank, "host rank %d, world rank %d (one host)", v->host_rank, rank);
    CHECK(v->device == rank, "virtual nodes: rank %d bound to GPU %d (the virtual local rank "
          "picked the GPU?)", rank, v->device);
    CHECK(v->gpu_shared == 0, "virtual nodes: GPUs shared: %s", v->gpu_shared_reason);
    CHECK_OK(ddp_comm_destroy(&vcomm));
  }
  fake_cuda_set_devices(-1);
}

/* ---- coll_nccl.c ------------------------------------------------------------------------- */
typedef struct {
  ddp_comm_t *comm;
  ddp__comm_t *c;
  ddp__devcoll_t *dc;
  ddp_stream_t *s;
  ddp_coll_opts_t o;
} env_t;

static int env_open(env_t *v) {
  memset(v, 0, sizeof *v);
  fake_nccl_reset(data_comm);
  if (ddp_comm_create(MPI_COMM_WORLD, &v->comm) != DDP_OK) {
    CHECK(0, "ddp_comm_create: %s", ddp_last_error());
    return 0;
  }
  v->c = impl_of(v->comm);
  CHECK(v->c && v->c->dev, "no (emulated) device: run with DDP_DEVICE_EMULATE=1");
  if (!v->c || !v->c->dev) return 0;
  CHECK_OK(ddp__device_bind_thread(v->c));
  CHECK_OK(ddp__devcoll_get(v->c, &v->dc));
  CHECK_OK(ddp_stream_create(v->comm, &v->s));
  ddp_coll_opts_default(&v->o);
  v->o.mem = DDP_MEM_CUDA;
  v->o.stream = v->s;
  return v->dc != NULL;
}

static void env_close(env_t *v) {
  if (v->s) CHECK_OK(ddp_stream_destroy(v->comm, &v->s));
  CHECK_OK(ddp_comm_destroy(&v->comm));
}

/* One collective through ddp__nccl_run, its input event recorded as a post records it. */
static ddp_status_t run(env_t *v, ddp__coll_kind_t kind, const void *send, void *recv, size_t n,
                        ddp_dtype_t dt, ddp_op_t op, int root) {
  ddp__call_t call = {kind, {send, recv, n, dt, op == DDP_AVG ? DDP_SUM : op}, op == DDP_AVG, root,
                      v->o, NULL, NULL};
  ddp_status_t st = ddp__coll_device_post(v->c, kind, v->s, &call.ev_in);
  if (st != DDP_OK) return st;
  st = ddp__nccl_run(v->dc, &call, v->s);
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", ddp_last_error());
  ddp__coll_device_release(v->c, call.ev_in);
  if (st == DDP_OK) return ddp_stream_synchronize(v->comm, v->s); /* a stuck stream: not */
  return ddp__error(st, "%s", msg);
}

static float fv(int r, size_t i) { return (float)((r * 37 + (int)i * 11) % 53 - 26); }

static void test_nccl_values(void) {
  env_t v;
  if (!env_open(&v)) return;
  const size_t n = 1000;
  float *a = NULL, *b = NULL;
  CHECK_OK(ddp_device_malloc(v.comm, n * size * sizeof(float), (void **)&a));
  CHECK_OK(ddp_device_malloc(v.comm, n * size * sizeof(float), (void **)&b));
  if (!a || !b) return;
  long wrong = 0;
  /* allreduce, out of place and in place */
  for (size_t i = 0; i < n; i++) a[i] = fv(rank, i), b[i] = -999;
  CHECK_OK(run(&v, DDP__COLL_ALLREDUCE, a, b, n, DDP_F32, DDP_SUM, -1));
  for (size_t i = 0; i < n; i++) {
    float want = 0;
    for (int r = 0; r < size; r++) want += fv(r, i);
    wrong += b[i] != want;
  }
  CHECK_OK(run(&v, DDP__COLL_ALLREDUCE, b, b, n, DDP_F32, DDP_MAX, -1));
  CHECK(wrong == 0, "allreduce: %ld wrong", wrong);
  /* broadcast from the last rank */
  for (size_t i = 0; i < n; i++) a[i] = fv(rank, i);
  CHECK_OK(run(&v, DDP__COLL_BROADCAST, a, a, n, DDP_F32, DDP_SUM, size - 1));
  wrong = 0;
  for (size_t i = 0; i < n; i++) wrong += a[i] != fv(size - 1, i);
  CHECK(wrong == 0, "broadcast: %ld wrong", wrong);
  /* allgather in place: this rank's block is already in recv + rank*n */
  for (size_t i = 0; i < n * size; i++) a[i] = -1;
  for (size_t i = 0; i < n; i++) a[rank * n + i] = fv(rank, i);
  CHECK_OK(run(&v, DDP__COLL_ALLGATHER, a + rank * n, a, n, DDP_F32, DDP_SUM, -1));
  wrong = 0;
  for (int r = 0; r < size; r++)
    for (size_t i = 0; i < n; i++) wrong += a[r * n + i] != fv(r, i);
  CHECK(wrong == 0, "allgather in place: %ld wrong", wrong);
  /* reduce-scatter, out of place and in place (input in recv, result in its first n) */
  for (int inplace = 0; inplace < 2; inplace++) {
    for (size_t i = 0; i < n * size; i++) a[i] = fv(rank, i), b[i] = -999;
    float *out = inplace ? a : b;
    ddp_status_t st = run(&v, DDP__COLL_REDUCE_SCATTER, a, out, n, DDP_F32, DDP_SUM, -1);
    CHECK(st == DDP_OK, "reduce-scatter %s: %s", inplace ? "in place" : "out of place", ddp_last_error());
    wrong = 0;
    for (size_t i = 0; i < n; i++) {
      float want = 0;
      for (int r = 0; r < size; r++) want += fv(r, (size_t)rank * n + i);
      wrong += out[i] != want;
    }
    CHECK(wrong == 0, "reduce-scatter %s: %ld of %zu wrong", inplace ? "in place" : "out of place",
          wrong, n);
  }
  CHECK(fake_nccl.init_calls == 1, "%d communicator creations", fake_nccl.init_calls);
  CHECK(fake_nccl.uniqueid_calls == (rank == 0), "ncclGetUniqueId called %d times", fake_nccl.uniqueid_calls);
  CHECK(fake_nccl.blocking_seen == 0, "communicator created with blocking=%d, not non-blocking",
        fake_nccl.blocking_seen);
  CHECK(fake_nccl.ops == 6, "%d NCCL collectives, expected 6", fake_nccl.ops);
  CHECK_OK(ddp_device_free(v.comm, a));
  CHECK_OK(ddp_device_free(v.comm, b));
  env_close(&v);
  CHECK(fake_nccl.finalize_calls == 1 && fake_nccl.destroy_calls == 1 && fake_nccl.abort_calls == 0,
        "healthy communicator: finalize %d, destroy %d, abort %d", fake_nccl.finalize_calls,
        fake_nccl.destroy_calls, fake_nccl.abort_calls);
}

/* A scripted failure: every rank gets `want` (with `msg`), the communicator is aborted where it
 * existed, and the next three calls fail at once without creating anything. */
typedef enum { S_INIT_RANK1, S_UNIQUEID, S_INIT_HANG, S_ASYNC, S_STUCK, S_SLOW_OK } scenario_t;

static int gate;
static void wait_gate(void *arg) { /* a host function that holds its stream until the gate opens */
  (void)arg;
  struct timespec ts = {0, 1000000};
  for (int i = 0; i < 20000 && !__atomic_load_n(&gate, __ATOMIC_ACQUIRE); i++) nanosleep(&ts, NULL);
}

static void test_nccl_failure(scenario_t sc, ddp_status_t want, const char *msg) {
  env_t v;
  if (!env_open(&v)) return;
  float *a = NULL;
  CHECK_OK(ddp_device_malloc(v.comm, 64 * sizeof(float), (void **)&a));
  if (!a) return;
  for (int i = 0; i < 64; i++) a[i] = 1;
  if (sc == S_INIT_RANK1) fake_nccl.fail_init_rank = size - 1;
  if (sc == S_UNIQUEID) fake_nccl.fail_uniqueid = 1;
  if (sc == S_INIT_HANG) fake_nccl.init_polls = -1;
  if (sc == S_SLOW_OK) fake_nccl.init_polls = 50, fake_nccl.op_polls = 20;
  if (sc == S_ASYNC) {
    CHECK_OK(run(&v, DDP__COLL_ALLREDUCE, a, a, 64, DDP_F32, DDP_SUM, -1)); /* healthy first */
    fake_nccl.async_after_op = ncclRemoteError;
  }
  if (sc == S_STUCK) {
    CHECK_OK(run(&v, DDP__COLL_ALLREDUCE, a, a, 64, DDP_F32, DDP_SUM, -1));
    __atomic_store_n(&gate, 0, __ATOMIC_RELEASE);
    CHECK_OK(ddp_launch_host_func(v.comm, v.s, wait_gate, NULL)); /* the caller's stream stalls */
  }
  double t0 = MPI_Wtime();
  ddp_status_t st = run(&v, DDP__COLL_ALLREDUCE, a, a, 64, DDP_F32, DDP_SUM, -1);
  double t = MPI_Wtime() - t0;
  if (sc == S_STUCK) __atomic_store_n(&gate, 1, __ATOMIC_RELEASE);
  CHECK_ST(st, want);
  if (msg) CHECK_MSG(msg);
  if (sc == S_SLOW_OK) {
    CHECK(a[0] == (float)size && fake_nccl.init_calls == 1,
          "slow but healthy NCCL: a[0] %g, %d creations", a[0], fake_nccl.init_calls);
  } else {
    CHECK(t < 10, "%.1f s to fail", t);
    int inits = fake_nccl.init_calls, ids = fake_nccl.uniqueid_calls;
    for (int k = 0; k < 3; k++) {
      CHECK_ST(run(&v, DDP__COLL_ALLREDUCE, a, a, 64, DDP_F32, DDP_SUM, -1), want);
      CHECK_MSG("not tried again");
    }
    CHECK(fake_nccl.init_calls == inits && fake_nccl.uniqueid_calls == ids,
          "NCCL creation retried after a failure: %d -> %d creations, %d -> %d ids", inits,
          fake_nccl.init_calls, ids, fake_nccl.uniqueid_calls);
    ddp_transport_t name = DDP_TRANSPORT_AUTO;
    CHECK_ST(ddp_device_transport(v.comm, DDP_TRANSPORT_NCCL, &name), DDP_ENOTSUP);
    CHECK_MSG("not tried again");
    /* Aborted wherever a communicator existed: not where creation itself failed. */
    int had = sc != S_UNIQUEID && !(sc == S_INIT_RANK1 && rank == size - 1);
    CHECK(fake_nccl.abort_calls == had, "scenario %d: %d aborts, expected %d", (int)sc,
          fake_nccl.abort_calls, had);
  }
  CHECK_OK(ddp_device_free(v.comm, a));
  env_close(&v);
}

static int run_fake(ddp_test_t *t) {
  ddp_comm_t *comm = t->comm;
  rank = t->rank;
  size = t->size;
  CHECK(size == 2, "cuda_fake runs at np=2 (got %d)", size);
  MPI_Comm_dup(MPI_COMM_WORLD, &data_comm);
  ddp__comm_t *c = impl_of(comm);
  CHECK(c && c->cfg.on_timeout_return && c->cfg.timeout_s <= 2,
        "run with DDP_ON_TIMEOUT=return DDP_TIMEOUT_S=1");
  if (c && size == 2) {
    test_cuda_errors(c);
    test_probe(comm);
    test_nccl_values();
    test_nccl_failure(S_SLOW_OK, DDP_OK, NULL);
    test_nccl_failure(S_INIT_RANK1, DDP_ENCCL, rank == size - 1 ? "init told to fail" : "another rank");
    test_nccl_failure(S_UNIQUEID, DDP_ENCCL, "ncclGetUniqueId failed on rank 0");
    test_nccl_failure(S_INIT_HANG, DDP_ETIMEDOUT, "watchdog");
    test_nccl_failure(S_ASYNC, DDP_ENCCL, "asynchronous error");
    test_nccl_failure(S_STUCK, DDP_ETIMEDOUT, "nccl collective");
  }
  MPI_Comm_free(&data_comm);
  return 0;
}

DDP_TEST_PROGRAM("cuda_fake", DDP_TEST_CASE("fake", run_fake));
