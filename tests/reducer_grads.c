/* ddp_reducer_grads: every gradient buffer at once equals ddp_reducer_grad(r, i) for every i,
 * with views on and off, one bucket and one bucket per parameter, before and after the
 * buckets are rebuilt (first synced finish, ready order reversed on purpose); bad arguments
 * are refused with a message naming them and leave the output untouched. */
#include <stdint.h>
#include <string.h>

#include "ddp_test.h"

#define NP 6

static int g_rank, g_size;
static ddp_comm_t *g_comm;

/* grads(r) against grad(r, i) for every i; with views on, distinct buffers. */
static void check_all(ddp_reducer_t *r, int views, const char *when) {
  void *all[NP + 1], *one = NULL;
  for (size_t i = 0; i <= NP; i++) all[i] = (void *)(uintptr_t)0x5a5a;
  CHECK_OK(ddp_reducer_grads(r, all, NP));
  CHECK(all[NP] == (void *)(uintptr_t)0x5a5a, "[%s] wrote past n", when);
  for (size_t i = 0; i < NP; i++) {
    CHECK_OK(ddp_reducer_grad(r, i, &one));
    CHECK(all[i] == one, "[%s views=%d] grads[%zu] = %p, grad(%zu) = %p", when, views, i,
          all[i], i, one);
    for (size_t j = 0; j < i && views; j++)
      CHECK(all[i] != all[j], "[%s] grads %zu and %zu share a buffer", when, j, i);
  }
}

static void run(int views, double cap_mb) {
  static float data[NP][64], grad[NP][64];
  ddp_param_t p[NP];
  for (size_t i = 0; i < NP; i++) {
    size_t count = 8 + 8 * i;
    for (size_t k = 0; k < count; k++) data[i][k] = (float)(i + k);
    p[i] = (ddp_param_t){.data = data[i], .count = count, .dtype = DDP_F32, .mem = DDP_MEM_HOST,
                         .name = NULL, .grad = grad[i]};
  }
  ddp_reducer_opts_t o;
  CHECK_OK(ddp_reducer_opts_default(&o));
  o.grad_as_bucket_view = views;
  o.bucket_cap_mb = cap_mb;
  o.first_bucket_mb = cap_mb;
  ddp_reducer_t *r = NULL;
  CHECK_OK(ddp_reducer_create(g_comm, p, NP, &o, &r));
  if (!r) return;
  check_all(r, views, "created");
  /* One iteration, ready in registration order (the reverse of the initial layout): the first
   * finish rebuilds the buckets, so the views move. */
  void *g[NP];
  CHECK_OK(ddp_reducer_grads(r, g, NP));
  for (size_t i = 0; i < NP; i++) {
    for (size_t k = 0; k < p[i].count; k++) ((float *)g[i])[k] = (float)(g_rank + 1);
    CHECK_OK(ddp_reducer_grad_ready(r, i));
  }
  CHECK_OK(ddp_reducer_finish(r));
  check_all(r, views, "rebuilt");
  CHECK_OK(ddp_reducer_grads(r, g, NP));
  /* The averaged gradients are where grads() points: mean of 1 .. world. */
  float want = (float)(g_size + 1) / 2.0f;
  for (size_t i = 0; i < NP; i++)
    CHECK(((float *)g[i])[0] == want && ((float *)g[i])[p[i].count - 1] == want,
          "[views=%d] gradient %zu is %g, expected %g", views, i, (double)((float *)g[i])[0],
          (double)want);

  /* Bad arguments: refused, named, nothing written. */
  void *out[NP + 1];
  for (size_t i = 0; i <= NP; i++) out[i] = (void *)(uintptr_t)0x77;
  CHECK_ST(ddp_reducer_grads(NULL, out, NP), DDP_EINVAL);
  CHECK_MSG("r is NULL");
  CHECK_ST(ddp_reducer_grads(r, NULL, NP), DDP_EINVAL);
  CHECK_MSG("grads is NULL");
  CHECK_ST(ddp_reducer_grads(r, out, NP - 1), DDP_EINVAL);
  CHECK_MSG("n 5");
  CHECK_ST(ddp_reducer_grads(r, out, NP + 1), DDP_EINVAL);
  CHECK_MSG("n 7");
  CHECK_ST(ddp_reducer_grads(r, out, 0), DDP_EINVAL);
  CHECK_MSG("parameter count 6");
  for (size_t i = 0; i <= NP; i++)
    CHECK(out[i] == (void *)(uintptr_t)0x77, "grads[%zu] written on error", i);
  CHECK_OK(ddp_reducer_destroy(&r));
}

static int run_grads(ddp_test_t *t) {
  g_comm = t->comm;
  g_rank = t->rank;
  g_size = t->size;
  for (int views = 0; views <= 1; views++) {
    run(views, 25.0); /* one bucket */
    run(views, 1e-6); /* one bucket per parameter */
  }
  return 0;
}

DDP_TEST_PROGRAM("reducer_grads", DDP_TEST_CASE("grads", run_grads));
