/* Reducer equivalence: np=k ranks with per-rank batch B train the same MLP as one process with
 * batch k*B on the concatenated data. After each of 5 SGD steps every rank compares its
 * parameters with a reference model it trains itself on the full batch (within 1e-5 relative)
 * and checks that all ranks hold bitwise identical parameters. Every allreduce algorithm, views
 * on and off, caps giving one, two and many buckets, natural and random per-rank ready orders,
 * and gradient accumulation with no_sync against one large batch. */
#include <math.h>
#include <stdint.h>

#include "ddp_test.h"
#include "train_model.h"
#include "train_optim.h"
#include "train_util.h"

void openblas_set_num_threads(int num_threads);

#define B 4
#define STEPS 5
static const int SIZES[] = {24, 40, 32, 6};
#define NSIZES 4

static int g_rank, g_size;
static ddp_comm_t *g_comm = NULL;
static double g_maxrel = 0.0;

typedef struct ctx {
  ddp_reducer_t *r;
  int fail;
} ctx_t;

static void on_ready(size_t i, void *arg) {
  ctx_t *c = arg;
  if (ddp_reducer_grad_ready(c->r, i) != DDP_OK) c->fail++;
}

static void batch_of(int first_index, int n, float *x, int *y) {
  for (int s = 0; s < n; s++)
    train_synth_sample(99, (uint64_t)(first_index + s), SIZES[0], SIZES[NSIZES - 1], x + (size_t)s * SIZES[0], &y[s]);
}

static uint64_t hash_params(const train_model_t *m) {
  uint64_t h = 1469598103934665603ULL;
  const unsigned char *p = (const unsigned char *)m->param_block;
  for (size_t i = 0; i < m->total * sizeof(float); i++) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

static void refetch(train_model_t *m, ddp_reducer_t *r, int views) {
  void *g[TM_MAX_PARAMS];
  if (!views) return;
  CHECK_OK(ddp_reducer_grads(r, g, m->nparams));
  tm_set_grads(m, g);
}

/* Plain SGD (p -= lr g) through the kit's optimizer, over every tensor of m. */
static train_optim_t *plain_sgd(const train_model_t *m) {
  train_optim_opts_t oo;
  train_optim_opts_default(&oo);
  oo.momentum = 0.0f;
  oo.wd = 0.0f;
  train_optim_t *opt = NULL;
  CHECK(train_optim_create(&oo, m->count, m->nparams, &opt) == 0, "train_optim_create");
  return opt;
}


/* accum = 1: two micro-batches per step, the first under no_sync. */
static void run(const char *algo, int views, int caps, int accum, int predivided) {
  char label[96];
  snprintf(label, sizeof label, "algo=%s views=%d caps=%d accum=%d predivided=%d", algo, views, caps, accum,
           predivided);
  int micro = accum ? 2 : 1, k = g_size;
  train_model_t a, ref;
  char err[256];
  if (tm_create_mlp(&a, SIZES, NSIZES, NULL, B, 0, err, sizeof err) ||
      tm_create_mlp(&ref, SIZES, NSIZES, NULL, B * k * micro, 0, err, sizeof err)) {
    CHECK(0, "[%s] tm_create_mlp: %s", label, err);
    return;
  }
  uint64_t sa = train_rng_seed(42 + (uint64_t)g_rank), sr = train_rng_seed(42);
  tm_init_params(&a, &sa); /* differs by rank: creation broadcasts rank 0's */
  tm_init_params(&ref, &sr);
  train_optim_t *opt_a = plain_sgd(&a), *opt_ref = plain_sgd(&ref);
  if (predivided) a.loss_scale = 1.0f / (float)k; /* the average folded into the loss */
  ddp_param_t p[2 * (NSIZES - 1)];
  for (size_t i = 0; i < a.nparams; i++)
    p[i] = (ddp_param_t){.data = a.param[i], .count = a.count[i], .dtype = DDP_F32, .mem = DDP_MEM_HOST,
                         .name = NULL, .grad = a.grad[i]};
  ddp_reducer_opts_t o;
  ddp_reducer_opts_default(&o);
  if (algo) CHECK_OK(ddp_algo_parse(algo, &o.algo));
  o.grad_as_bucket_view = views;
  o.predivided = predivided;
  o.bucket_cap_mb = caps == 2 ? 1e-6 : 25.0;
  o.first_bucket_mb = caps == 0 ? 25.0 : caps == 1 ? 0.004 : 1e-6;
  ctx_t c = {NULL, 0};
  ddp_status_t st = ddp_reducer_create(g_comm, p, a.nparams, &o, &c.r);
  CHECK(st == DDP_OK, "[%s] create: %s", label, ddp_last_error());
  if (st != DDP_OK) {
    train_optim_destroy(&opt_a);
    train_optim_destroy(&opt_ref);
    tm_free(&a);
    tm_free(&ref);
    return;
  }
  ddp_reducer_stats_t s;
  CHECK_OK(ddp_reducer_stats(c.r, &s));
  size_t want = caps == 0 ? 1 : caps == 1 ? 2 : a.nparams;
  CHECK(s.nbuckets == want, "[%s] %zu buckets, expected %zu", label, s.nbuckets, want);
  refetch(&a, c.r, views);
  const float lr = 0.1f;
  float xa[B * 24], xr[B * 4 * 2 * 24];
  int ya[B], yr[B * 4 * 2];
  for (int step = 0; step < STEPS; step++) {
    int base = step * k * B * micro;
    for (int m = 0; m < micro; m++) {
      batch_of(base + m * k * B + g_rank * B, B, xa, ya);
      if (accum) CHECK_OK(ddp_reducer_set_sync(c.r, m == micro - 1));
      tm_forward(&a, xa, ya, B);
      int random_order = (step % 2 == 0);
      if (!random_order) {
        tm_backward(&a, xa, ya, B, m > 0, on_ready, &c);
      } else {
        tm_backward(&a, xa, ya, B, m > 0, NULL, NULL);
        size_t ord[8];
        for (size_t i = 0; i < a.nparams; i++) ord[i] = i;
        uint64_t seed = (uint64_t)(g_rank * 131 + step * 7 + m + 1);
        for (size_t i = a.nparams; i > 1; i--) {
          size_t j = (size_t)(train_rng_next(&seed) % i), t = ord[i - 1];
          ord[i - 1] = ord[j];
          ord[j] = t;
        }
        for (size_t i = 0; i < a.nparams; i++) on_ready(ord[i], &c);
      }
      st = ddp_reducer_finish(c.r);
      CHECK(st == DDP_OK, "[%s] step %d finish: %s", label, step, ddp_last_error());
      refetch(&a, c.r, views);
    }
    train_optim_step(opt_a, a.param, a.grad, lr / (float)micro);
    batch_of(base, k * B * micro, xr, yr);
    tm_forward(&ref, xr, yr, k * B * micro);
    tm_backward(&ref, xr, yr, k * B * micro, 0, NULL, NULL);
    train_optim_step(opt_ref, ref.param, ref.grad, lr);
    size_t bad = 0;
    double worst = 0.0;
    for (size_t e = 0; e < a.total; e++) {
      double x = a.param_block[e], y = ref.param_block[e];
      double rel = fabs(x - y) / fmax(fabs(y), 1e-2);
      if (rel > worst) worst = rel;
      bad += rel > 1e-5;
    }
    if (worst > g_maxrel) g_maxrel = worst;
    CHECK(bad == 0, "[%s] step %d: %zu parameters differ from the single-process run (worst rel %.3g)",
          label, step, bad, worst);
    CHECK(ddp_test_same_everywhere(hash_params(&a)), "[%s] step %d: parameters differ across ranks", label, step);
  }
  CHECK(c.fail == 0, "[%s] %d grad_ready calls failed: %s", label, c.fail, ddp_last_error());
  CHECK_OK(ddp_reducer_stats(c.r, &s));
  CHECK(s.iterations == STEPS, "[%s] %llu synced iterations, expected %d", label, (unsigned long long)s.iterations,
        STEPS);
  CHECK(s.rebuilt, "[%s] not rebuilt", label);
  CHECK_OK(ddp_reducer_destroy(&c.r));
  train_optim_destroy(&opt_a);
  train_optim_destroy(&opt_ref);
  tm_free(&a);
  tm_free(&ref);
}

static int run_equiv(ddp_test_t *t) {
  g_comm = t->comm;
  g_rank = t->rank;
  g_size = t->size;
  openblas_set_num_threads(1);
  if (g_size > 4) return ddp_test_skip(t, "reducer_equiv runs at np 1..4");
  for (const char *const *al = ddp_allreduce_algos(); *al; al++)
    for (int views = 0; views <= 1 && ddp_test_algo_usable(g_comm, *al); views++)
      for (int caps = 0; caps < 3; caps++) run(*al, views, caps, 0, 0);
  for (int views = 0; views <= 1; views++) run("auto", views, 1, 1, 0);
  run("auto", 1, 2, 0, 1);
  run("auto", 0, 1, 1, 1);
  if (g_rank == 0) printf("worst relative difference from the single-process run: %.3g\n", g_maxrel);
  return 0;
}

DDP_TEST_PROGRAM("reducer_equiv", DDP_TEST_CASE("equiv", run_equiv));
