/* Reducer with device-memory (DDP_MEM_CUDA) parameters, through the public device API: runs
 * under the host emulation (DDP_DEVICE_EMULATE=1) in CI and on a real GPU where there is one;
 * exits 77 when no device is available, 1 when argument "emulate" asked for the emulated one
 * (the CI registration) and it is not there. Gradients are written from the host with
 * ddp_memcpy_async on the reducer's stream (rank r writes world * h(r, i, k), so the averages are
 * exact integers, also through the fp16/bf16 hooks), and checked after copying back. */
#include <stdint.h>

#include "ddp_test.h"

#define NP 6
static const size_t COUNTS[NP] = {300, 7, 20000, 1, 4096, 65};

static int g_rank, g_size;
static ddp_comm_t *g_comm = NULL;
static ddp_stream_t *g_stream;

static int h(int r, size_t i, size_t k, int step) { return (int)((r * 5 + (int)i * 3 + (int)(k % 89) + step * 7) % 16) - 8; }
static int used(int r, size_t i) { return (i + (size_t)r) % 4 != 1; }

static void run(const char *label, int views, ddp_hook_t hook, int find_unused, double cap_mb) {
  void *data[NP], *grads[NP];
  ddp_param_t p[NP];
  float *host = malloc(sizeof(float) * 20000);
  for (size_t i = 0; i < NP; i++) {
    size_t bytes = COUNTS[i] * sizeof(float);
    CHECK_OK(ddp_device_malloc(g_comm, bytes, &data[i]));
    CHECK_OK(ddp_device_malloc(g_comm, bytes, &grads[i]));
    for (size_t k = 0; k < COUNTS[i]; k++) host[k] = (float)(g_rank * 100 + (int)k % 10);
    CHECK_OK(ddp_memcpy_async(g_comm, data[i], host, bytes, g_stream));
    CHECK_OK(ddp_stream_synchronize(g_comm, g_stream));
    p[i] = (ddp_param_t){.data = data[i], .count = COUNTS[i], .dtype = DDP_F32, .mem = DDP_MEM_CUDA,
                         .name = NULL, .grad = grads[i]};
  }
  ddp_reducer_opts_t o;
  ddp_reducer_opts_default(&o);
  o.grad_as_bucket_view = views;
  o.hook = hook;
  o.find_unused = find_unused;
  o.bucket_cap_mb = cap_mb;
  o.first_bucket_mb = cap_mb;
  o.stream = g_stream;
  ddp_reducer_t *r = NULL;
  ddp_status_t st = ddp_reducer_create(g_comm, p, NP, &o, &r);
  CHECK(st == DDP_OK, "[%s] create: %s", label, ddp_last_error());
  if (st == DDP_OK) {
    /* Parameters now hold rank 0's values. */
    CHECK_OK(ddp_memcpy_async(g_comm, host, data[2], COUNTS[2] * sizeof(float), g_stream));
    CHECK_OK(ddp_stream_synchronize(g_comm, g_stream));
    CHECK(host[13] == 3.0f, "[%s] parameters not broadcast: %g", label, host[13]);
    for (int step = 0; step < 3; step++) {
      for (size_t n = NP; n-- > 0;) {
        size_t i = (n * 5 + (size_t)g_rank + (size_t)step) % NP; /* per-rank order */
        if (find_unused && !used(g_rank, i)) continue;
        void *g = NULL;
        CHECK_OK(ddp_reducer_grad(r, i, &g));
        CHECK(views || g == grads[i], "[%s] views off but grad is not the application's", label);
        for (size_t k = 0; k < COUNTS[i]; k++) host[k] = (float)(g_size * h(g_rank, i, k, step));
        CHECK_OK(ddp_memcpy_async(g_comm, g, host, COUNTS[i] * sizeof(float), g_stream));
        /* The stream orders the copy before the reduction; the host buffer is reused next. */
        CHECK_OK(ddp_stream_synchronize(g_comm, g_stream));
        CHECK_OK(ddp_reducer_grad_ready(r, i));
      }
      st = ddp_reducer_finish(r);
      CHECK(st == DDP_OK, "[%s] step %d finish: %s", label, step, ddp_last_error());
      size_t wrong = 0;
      for (size_t i = 0; i < NP; i++) {
        void *g = NULL;
        CHECK_OK(ddp_reducer_grad(r, i, &g));
        CHECK_OK(ddp_memcpy_async(g_comm, host, g, COUNTS[i] * sizeof(float), g_stream));
        CHECK_OK(ddp_stream_synchronize(g_comm, g_stream));
        for (size_t k = 0; k < COUNTS[i]; k++) {
          int e = 0;
          for (int q = 0; q < g_size; q++)
            if (!find_unused || used(q, i)) e += h(q, i, k, step);
          if (host[k] != (float)e && wrong++ < 3)
            CHECK(0, "[%s] step %d p%zu[%zu] = %g, expected %d", label, step, i, k, host[k], e);
        }
      }
      CHECK(wrong == 0, "[%s] step %d: %zu wrong", label, step, wrong);
    }
    CHECK_OK(ddp_reducer_zero_grad(r));
    void *g = NULL;
    CHECK_OK(ddp_reducer_grad(r, 4, &g));
    CHECK_OK(ddp_memcpy_async(g_comm, host, g, COUNTS[4] * sizeof(float), g_stream));
    CHECK_OK(ddp_stream_synchronize(g_comm, g_stream));
    CHECK(host[100] == 0.0f, "[%s] zero_grad left %g", label, host[100]);
    CHECK_OK(ddp_reducer_destroy(&r));
  }
  for (size_t i = 0; i < NP; i++) {
    ddp_device_free(g_comm, data[i]);
    ddp_device_free(g_comm, grads[i]);
  }
  free(host);
}

int main(int argc, char **argv) {
  if (ddp_init(&argc, &argv, MPI_COMM_NULL, &g_comm) != DDP_OK) return 1;
  ddp_comm_rank(g_comm, &g_rank);
  ddp_comm_size(g_comm, &g_size);
  /* "emulate" on the command line (the CI registration): the emulated device must be there. */
  int verdict = ddp_test_device_verdict(g_comm, "reducer_device",
                                        argc > 1 && !strcmp(argv[1], "emulate")
                                            ? DDP_TEST_WANT_EMULATED
                                            : DDP_TEST_WANT_ANY);
  if (verdict) {
    ddp_finalize(&g_comm);
    return verdict;
  }
  CHECK_OK(ddp_stream_create(g_comm, &g_stream));
  run("views", 1, DDP_HOOK_NONE, 0, 25.0);
  run("views off, many buckets", 0, DDP_HOOK_NONE, 0, 0.001);
  run("fp16 hook", 1, DDP_HOOK_FP16, 0, 0.01);
  run("bf16 hook, views off", 0, DDP_HOOK_BF16, 0, 0.01);
  run("find_unused", 1, DDP_HOOK_NONE, 1, 0.01);
  /* Host and device parameters in one reducer: separate buckets. */
  {
    float hp[10] = {0};
    void *dp = NULL;
    CHECK_OK(ddp_device_malloc(g_comm, 40, &dp));
    ddp_param_t p[2] = {{.data = hp, .count = 10, .dtype = DDP_F32, .mem = DDP_MEM_HOST},
                        {.data = dp, .count = 10, .dtype = DDP_F32, .mem = DDP_MEM_CUDA}};
    ddp_reducer_opts_t o;
    ddp_reducer_opts_default(&o);
    o.stream = g_stream;
    ddp_reducer_t *r = NULL;
    CHECK_OK(ddp_reducer_create(g_comm, p, 2, &o, &r));
    ddp_reducer_stats_t s;
    if (r) {
      CHECK_OK(ddp_reducer_stats(r, &s));
      CHECK(s.nbuckets == 2, "host + device parameters gave %zu buckets", s.nbuckets);
      CHECK_OK(ddp_reducer_destroy(&r));
    }
    ddp_device_free(g_comm, dp);
  }
  CHECK_OK(ddp_stream_destroy(g_comm, &g_stream));
  int rc = ddp_test_finish("reducer_device");
  ddp_finalize(&g_comm);
  return rc;
}
