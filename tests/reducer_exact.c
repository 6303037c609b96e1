/* Reducer with exactly checkable gradients: rank r writes world * h(r, i, k, step) with small
 * integers h, so the average is the integer sum of h over ranks, exact in every dtype (also
 * through the fp16/bf16 hooks). Covers bucket caps (one, two, many buckets), mixed dtypes,
 * views on/off, random per-rank ready orders, the rebuild, no_sync, find_unused, static_graph,
 * missing and double-marked parameters, bad arguments, and bitwise agreement across ranks. */
#include <math.h>
#include <stdint.h>

#include "ddp_test.h"
#include "ddp_test_typed.h"

#define MAXP 12

static int g_rank, g_size;
static ddp_comm_t *g_comm = NULL;

typedef struct spec {
  size_t count;
  ddp_dtype_t dtype;
} spec_t;

static int h(int r, size_t i, size_t k, int step) {
  return (int)((r * 7 + (int)i * 3 + (int)(k % 97) * 5 + step * 11) % 16) - 8;
}


static uint64_t fnv(uint64_t hh, const void *p, size_t bytes) {
  const unsigned char *b = p;
  for (size_t i = 0; i < bytes; i++) hh = (hh ^ b[i]) * 1099511628211ULL;
  return hh;
}



typedef struct setup {
  const char *label;
  const spec_t *specs;
  size_t np;
  double cap_mb, first_mb;
  int views;
  ddp_hook_t hook;
  int find_unused, static_graph;
  const char *algo;
  int predivided; /* finish leaves the sum: expected values are world times the average */
} setup_t;

typedef struct world {
  ddp_param_t params[MAXP];
  void *data[MAXP], *own_grad[MAXP];
  ddp_reducer_t *r;
} world_t;

static int make(world_t *w, const setup_t *s) {
  memset(w, 0, sizeof *w);
  static const char *names[MAXP] = {"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9", "p10", "p11"};
  for (size_t i = 0; i < s->np; i++) {
    size_t bytes = s->specs[i].count * ddp_dtype_size(s->specs[i].dtype);
    w->data[i] = calloc(1, bytes);
    w->own_grad[i] = calloc(1, bytes);
    /* Parameters differ by rank: creation must broadcast rank 0's. */
    for (size_t k = 0; k < s->specs[i].count; k++) ddp_tbuf_set(w->data[i], s->specs[i].dtype, k, g_rank * 10 + (int)(k % 5));
    w->params[i] = (ddp_param_t){.data = w->data[i], .count = s->specs[i].count, .dtype = s->specs[i].dtype,
                                 .mem = DDP_MEM_HOST, .name = names[i], .grad = w->own_grad[i]};
  }
  ddp_reducer_opts_t o;
  ddp_reducer_opts_default(&o);
  o.bucket_cap_mb = s->cap_mb;
  o.first_bucket_mb = s->first_mb;
  o.grad_as_bucket_view = s->views;
  o.hook = s->hook;
  o.find_unused = s->find_unused;
  o.static_graph = s->static_graph;
  if (s->algo) CHECK_OK(ddp_algo_parse(s->algo, &o.algo));
  o.predivided = s->predivided;
  ddp_status_t st = ddp_reducer_create(g_comm, w->params, s->np, &o, &w->r);
  CHECK(st == DDP_OK, "[%s] create: %s", s->label, ddp_last_error());
  if (st != DDP_OK) return -1;
  size_t wrong = 0;
  for (size_t i = 0; i < s->np; i++)
    for (size_t k = 0; k < s->specs[i].count; k++) wrong += ddp_tbuf_get(w->data[i], s->specs[i].dtype, k) != (double)(k % 5);
  CHECK(wrong == 0, "[%s] %zu parameter values not broadcast from rank 0", s->label, wrong);
  return 0;
}

static void unmake(world_t *w, const setup_t *s) {
  if (w->r) CHECK_OK(ddp_reducer_destroy(&w->r));
  for (size_t i = 0; i < s->np; i++) {
    free(w->data[i]);
    free(w->own_grad[i]);
  }
}

static void *gradp(world_t *w, size_t i) {
  void *g = NULL;
  CHECK_OK(ddp_reducer_grad(w->r, i, &g));
  return g;
}

/* Deterministic permutation of 0..n-1 for (seed). */
static void perm(size_t *p, size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; i++) p[i] = i;
  for (size_t i = n; i > 1; i--) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    size_t j = (size_t)((seed >> 33) % i);
    size_t t = p[i - 1];
    p[i - 1] = p[j];
    p[j] = t;
  }
}

/* used(r, i): does rank r produce gradient i this run (find_unused cases). */
typedef int (*used_fn)(int r, size_t i);
static int all_used(int r, size_t i) { (void)r, (void)i; return 1; }
static int some_used(int r, size_t i) { return i == 1 ? 0 : ((i + (size_t)r) % 3 != 0); }

/* Runs `steps` synced iterations and checks every gradient exactly after each. */
static void run_steps(const setup_t *s, int steps, int random_order, used_fn used) {
  world_t w;
  if (make(&w, s) != 0) return;
  for (int step = 0; step < steps; step++) {
    size_t order[MAXP];
    if (random_order) perm(order, s->np, 1000u * (uint64_t)g_rank + (uint64_t)step + 7);
    else for (size_t k = 0; k < s->np; k++) order[k] = s->np - 1 - k;
    for (size_t k = 0; k < s->np; k++) {
      size_t i = order[k];
      if (!used(g_rank, i)) continue;
      void *g = s->views ? gradp(&w, i) : w.own_grad[i];
      for (size_t c = 0; c < s->specs[i].count; c++) ddp_tbuf_set(g, s->specs[i].dtype, c, g_size * h(g_rank, i, c, step));
      ddp_status_t st = ddp_reducer_grad_ready(w.r, i);
      CHECK(st == DDP_OK, "[%s] step %d grad_ready(%zu): %s", s->label, step, i, ddp_last_error());
    }
    ddp_status_t st = ddp_reducer_finish(w.r);
    CHECK(st == DDP_OK, "[%s] step %d finish: %s", s->label, step, ddp_last_error());
    uint64_t hh = 1469598103934665603ULL;
    size_t wrong = 0;
    for (size_t i = 0; i < s->np; i++) {
      const void *g = gradp(&w, i);
      for (size_t c = 0; c < s->specs[i].count; c++) {
        int e = 0;
        for (int q = 0; q < g_size; q++)
          if (used(q, i)) e += h(q, i, c, step);
        if (s->predivided) e *= g_size;
        double got = ddp_tbuf_get(g, s->specs[i].dtype, c);
        if (got != (double)e) {
          if (wrong++ < 3)
            CHECK(0, "[%s] step %d p%zu[%zu] = %g, expected %d", s->label, step, i, c, got, e);
        }
      }
      hh = fnv(hh, g, s->specs[i].count * ddp_dtype_size(s->specs[i].dtype));
      if (s->find_unused) {
        int u = -1, any = 0;
        for (int q = 0; q < g_size; q++) any |= used(q, i);
        CHECK_OK(ddp_reducer_param_used(w.r, i, &u));
        CHECK(u == any, "[%s] param_used(%zu) = %d, expected %d", s->label, i, u, any);
      }
    }
    CHECK(wrong == 0, "[%s] step %d: %zu wrong values", s->label, step, wrong);
    CHECK(ddp_test_same_everywhere(hh), "[%s] step %d: gradients differ across ranks", s->label, step);
    /* Buckets agree across ranks (after the rebuild too, though ready orders differ). */
    uint64_t bh = 1469598103934665603ULL;
    for (size_t i = 0; i < s->np; i++) {
      size_t b = 0;
      CHECK_OK(ddp_reducer_bucket_of(w.r, i, &b));
      bh = fnv(bh, &b, sizeof b);
    }
    CHECK(ddp_test_same_everywhere(bh), "[%s] step %d: bucket assignment differs across ranks", s->label, step);
  }
  ddp_reducer_stats_t st;
  CHECK_OK(ddp_reducer_stats(w.r, &st));
  CHECK(st.iterations == (uint64_t)steps, "[%s] stats.iterations %llu, expected %d", s->label,
        (unsigned long long)st.iterations, steps);
  CHECK(st.rebuilt == 1, "[%s] buckets not rebuilt after the first iteration", s->label);
  unmake(&w, s);
}

static size_t nbuckets_of(const setup_t *s) {
  world_t w;
  if (make(&w, s) != 0) return 0;
  ddp_reducer_stats_t st;
  CHECK_OK(ddp_reducer_stats(w.r, &st));
  unmake(&w, s);
  return st.nbuckets;
}

static const spec_t F32S[] = {{3, DDP_F32}, {1000, DDP_F32}, {7, DDP_F32}, {50000, DDP_F32},
                              {1, DDP_F32}, {70000, DDP_F32}, {64, DDP_F32}, {2000, DDP_F32}};
static const spec_t MIXED[] = {{300, DDP_F32}, {40, DDP_F64}, {513, DDP_F16}, {77, DDP_BF16},
                               {1000, DDP_I32}, {9, DDP_F32}, {128, DDP_F16}, {5, DDP_I64},
                               {4096, DDP_F32}, {33, DDP_BF16}};

static void test_layouts(void) {
  size_t n = sizeof F32S / sizeof F32S[0];
  setup_t one = {"one bucket", F32S, n, 25.0, 25.0, 1, DDP_HOOK_NONE, 0, 0, NULL, 0};
  setup_t two = {"two buckets", F32S, n, 25.0, 0.25, 1, DDP_HOOK_NONE, 0, 0, NULL, 0};
  setup_t many = {"many buckets", F32S, n, 1e-6, 1e-6, 1, DDP_HOOK_NONE, 0, 0, NULL, 0};
  CHECK(nbuckets_of(&one) == 1, "cap 25 MB should give one bucket");
  CHECK(nbuckets_of(&two) == 2, "first bucket 0.25 MB should give two buckets");
  CHECK(nbuckets_of(&many) == n, "a tiny cap should give one bucket per parameter");
  setup_t mixed = {"mixed dtypes", MIXED, sizeof MIXED / sizeof MIXED[0], 25.0, 1.0, 1, DDP_HOOK_NONE, 0, 0, NULL, 0};
  CHECK(nbuckets_of(&mixed) == 6, "six dtypes should give six buckets");
  /* Initial order: reverse registration, so the last parameter is in bucket 0. */
  world_t w;
  if (make(&w, &two) == 0) {
    size_t b = 9, idx[MAXP], cnt = 0, bytes = 0;
    CHECK_OK(ddp_reducer_bucket_of(w.r, n - 1, &b));
    CHECK(b == 0, "last parameter in bucket %zu, expected 0", b);
    CHECK_OK(ddp_reducer_bucket_of(w.r, 0, &b));
    CHECK(b == 1, "first parameter in bucket %zu, expected 1", b);
    CHECK_OK(ddp_reducer_bucket_params(w.r, 0, idx, MAXP, &cnt, &bytes));
    /* 2000+64+70000 floats = 288256 B >= 0.25 MB closes bucket 0 after p5. */
    CHECK(cnt == 3 && idx[0] == 7 && idx[1] == 6 && idx[2] == 5, "bucket 0 has %zu params (%zu %zu %zu)",
          cnt, idx[0], idx[1], idx[2]);
    CHECK(bytes == 72064 * 4, "bucket 0 bytes %zu", bytes);
    unmake(&w, &two);
  }
}

static void test_iterations(void) {
  size_t n = sizeof F32S / sizeof F32S[0], nm = sizeof MIXED / sizeof MIXED[0];
  const char *const *algos = ddp_allreduce_algos();
  for (int views = 0; views <= 1; views++)
    for (int caps = 0; caps < 3; caps++) {
      double cap = caps == 0 ? 25.0 : caps == 1 ? 25.0 : 1e-6, first = caps == 0 ? 25.0 : caps == 1 ? 0.25 : 1e-6;
      /* Every algorithm once (many buckets, views on); the other layouts with auto. */
      for (const char *const *a = algos; *a; a++) {
        if (!(views == 1 && caps == 2) && a != algos) continue;
        if (!ddp_test_algo_usable(g_comm, *a)) continue;
        char label[96];
        snprintf(label, sizeof label, "f32 views=%d caps=%d algo=%s", views, caps, *a);
        setup_t s = {label, F32S, n, cap, first, views, DDP_HOOK_NONE, 0, 0, *a, 0};
        run_steps(&s, 3, 1, all_used);
      }
      if (caps == 1) continue; /* mixed dtypes: one and many buckets per dtype */
      char label[96];
      snprintf(label, sizeof label, "mixed views=%d caps=%d", views, caps);
      setup_t s = {label, MIXED, nm, cap, first, views, DDP_HOOK_NONE, 0, 0, NULL, 0};
      run_steps(&s, 3, 1, all_used);
    }
  /* Natural (reverse) order, and both hooks. */
  setup_t nat = {"natural order", F32S, n, 0.1, 0.01, 1, DDP_HOOK_NONE, 0, 0, NULL, 0};
  run_steps(&nat, 3, 0, all_used);
  setup_t fp16 = {"fp16 hook", MIXED, nm, 0.001, 0.001, 1, DDP_HOOK_FP16, 0, 0, NULL, 0};
  run_steps(&fp16, 3, 1, all_used);
  setup_t bf16 = {"bf16 hook views off", F32S, n, 0.1, 0.01, 0, DDP_HOOK_BF16, 0, 0, NULL, 0};
  run_steps(&bf16, 3, 1, all_used);
  /* Unused parameters: some ranks skip some, nobody produces p1. */
  setup_t fu = {"find_unused", F32S, n, 0.1, 0.01, 1, DDP_HOOK_NONE, 1, 0, NULL, 0};
  run_steps(&fu, 3, 1, some_used);
  setup_t fuv = {"find_unused views off", MIXED, nm, 25.0, 1.0, 0, DDP_HOOK_NONE, 1, 0, NULL, 0};
  run_steps(&fuv, 2, 0, some_used);
  setup_t pre = {"predivided (sum)", MIXED, nm, 0.001, 0.001, 1, DDP_HOOK_NONE, 0, 0, NULL, 1};
  run_steps(&pre, 2, 1, all_used);
  setup_t preh = {"predivided bf16 hook", F32S, n, 0.1, 0.01, 0, DDP_HOOK_BF16, 0, 0, NULL, 1};
  run_steps(&preh, 2, 1, all_used);
  setup_t sg = {"find_unused static_graph", F32S, n, 1e-6, 1e-6, 1, DDP_HOOK_NONE, 1, 1, NULL, 0};
  run_steps(&sg, 4, 1, some_used);
}

/* no_sync: the first micro-step accumulates locally (no communication), the second reduces
 * the accumulated sum. */
static void test_no_sync(int views) {
  size_t n = sizeof F32S / sizeof F32S[0];
  setup_t s = {views ? "no_sync" : "no_sync views off", F32S, n, 0.1, 0.01, views, DDP_HOOK_NONE, 0, 0, NULL, 0};
  world_t w;
  if (make(&w, &s) != 0) return;
  for (int step = 0; step < 2; step++) {
    CHECK_OK(ddp_reducer_zero_grad(w.r));
    for (int micro = 0; micro < 3; micro++) {
      int last = micro == 2;
      CHECK_OK(ddp_reducer_set_sync(w.r, last));
      for (size_t i = n; i-- > 0;) {
        float *g = views ? gradp(&w, i) : w.own_grad[i];
        for (size_t c = 0; c < F32S[i].count; c++) g[c] += (float)(g_size * h(g_rank, i, c, step * 3 + micro));
        CHECK_OK(ddp_reducer_grad_ready(w.r, i));
      }
      CHECK_OK(ddp_reducer_finish(w.r));
      if (!last) {
        /* Nothing was exchanged: still this rank's own partial sum. */
        float *g = views ? gradp(&w, 3) : w.own_grad[3];
        float e = 0;
        for (int m = 0; m <= micro; m++) e += (float)(g_size * h(g_rank, 3, 10, step * 3 + m));
        CHECK(g[10] == e, "[%s] no_sync micro %d: p3[10] = %g, expected local %g", s.label, micro, g[10], e);
      }
    }
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++) {
      float *g = views ? gradp(&w, i) : w.own_grad[i];
      for (size_t c = 0; c < F32S[i].count; c++) {
        int e = 0;
        for (int q = 0; q < g_size; q++)
          for (int m = 0; m < 3; m++) e += h(q, i, c, step * 3 + m);
        if (g[c] != (float)e && wrong++ < 3)
          CHECK(0, "[%s] step %d p%zu[%zu] = %g, expected %d", s.label, step, i, c, g[c], e);
      }
    }
    CHECK(wrong == 0, "[%s] step %d: %zu wrong", s.label, step, wrong);
  }
  ddp_reducer_stats_t st;
  CHECK_OK(ddp_reducer_stats(w.r, &st));
  CHECK(st.iterations == 2, "[%s] %llu synced iterations, expected 2", s.label, (unsigned long long)st.iterations);
  unmake(&w, &s);
}

/* Errors inside an iteration: double mark, missing parameter (no hang on the other ranks),
 * out-of-range index, set_sync mid-iteration; the reducer keeps working afterwards. */
static void test_iteration_errors(void) {
  size_t n = sizeof F32S / sizeof F32S[0];
  setup_t s = {"iteration errors", F32S, n, 0.1, 0.01, 1, DDP_HOOK_NONE, 0, 0, NULL, 0};
  world_t w;
  if (make(&w, &s) != 0) return;
  for (size_t i = n; i-- > 0;) {
    CHECK_OK(ddp_reducer_grad_ready(w.r, i));
    if (i == 4) {
      CHECK_ST(ddp_reducer_grad_ready(w.r, 4), DDP_ESTATE);
      CHECK_MSG("'p4'");
      CHECK_MSG("twice");
      CHECK_ST(ddp_reducer_set_sync(w.r, 0), DDP_ESTATE);
      CHECK_ST(ddp_reducer_zero_grad(w.r), DDP_ESTATE);
    }
  }
  CHECK_ST(ddp_reducer_grad_ready(w.r, n), DDP_EINVAL);
  CHECK_MSG("8");
  CHECK_OK(ddp_reducer_finish(w.r));
  /* The last rank forgets p2: it alone gets the error; nobody hangs. */
  int forget = g_rank == g_size - 1;
  for (size_t i = n; i-- > 0;)
    if (!(forget && i == 2)) CHECK_OK(ddp_reducer_grad_ready(w.r, i));
  ddp_status_t st = ddp_reducer_finish(w.r);
  if (forget) {
    CHECK(st == DDP_ESTATE, "finish with p2 missing returned %d", (int)st);
    CHECK_MSG("parameter 2 ('p2')");
    CHECK_MSG("find_unused");
  } else {
    CHECK_OK(st);
  }
  /* Next iteration is normal and exact again. */
  for (size_t i = n; i-- > 0;) {
    float *g = gradp(&w, i);
    for (size_t c = 0; c < F32S[i].count; c++) g[c] = (float)(g_size * h(g_rank, i, c, 5));
    CHECK_OK(ddp_reducer_grad_ready(w.r, i));
  }
  CHECK_OK(ddp_reducer_finish(w.r));
  float *g = gradp(&w, 5);
  int e = 0;
  for (int q = 0; q < g_size; q++) e += h(q, 5, 123, 5);
  CHECK(g[123] == (float)e, "after errors: p5[123] = %g, expected %d", g[123], e);
  unmake(&w, &s);
}

static void test_bad_args(void) {
  float a[4] = {0}, b[4] = {0};
  ddp_param_t p = {.data = a, .count = 4, .dtype = DDP_F32, .mem = DDP_MEM_HOST, .name = "w", .grad = b};
  ddp_reducer_t *r = NULL;
  ddp_reducer_opts_t o;
  CHECK_ST(ddp_reducer_opts_default(NULL), DDP_EINVAL);
  CHECK_OK(ddp_reducer_opts_default(&o));
  CHECK(o.bucket_cap_mb == 10.0 && o.first_bucket_mb == 1.0 && o.grad_as_bucket_view == 1 &&
        o.broadcast_params == 1 && o.hook == DDP_HOOK_NONE, "defaults");
  CHECK_ST(ddp_reducer_create(NULL, &p, 1, NULL, &r), DDP_EINVAL);
  CHECK_MSG("comm");
  CHECK_ST(ddp_reducer_create(g_comm, NULL, 1, NULL, &r), DDP_EINVAL);
  CHECK_MSG("params");
  CHECK_ST(ddp_reducer_create(g_comm, &p, 0, NULL, &r), DDP_EINVAL);
  CHECK_MSG("nparams");
  CHECK_ST(ddp_reducer_create(g_comm, &p, 1, NULL, NULL), DDP_EINVAL);
  CHECK_MSG("out");
  ddp_param_t q = p;
  q.count = 0;
  CHECK_ST(ddp_reducer_create(g_comm, &q, 1, NULL, &r), DDP_EINVAL);
  CHECK_MSG("'w'");
  q = p, q.dtype = (ddp_dtype_t)42;
  CHECK_ST(ddp_reducer_create(g_comm, &q, 1, NULL, &r), DDP_EINVAL);
  CHECK_MSG("42");
  q = p, q.mem = (ddp_mem_t)9;
  CHECK_ST(ddp_reducer_create(g_comm, &q, 1, NULL, &r), DDP_EINVAL);
  CHECK_MSG("mem 9");
  if (!ddp_device_available(g_comm)) {
    q = p, q.mem = DDP_MEM_CUDA;
    CHECK_ST(ddp_reducer_create(g_comm, &q, 1, NULL, &r), DDP_ENOTSUP);
    CHECK_MSG("DDP_DEVICE_EMULATE");
  }
  q = p, q.data = NULL;
  CHECK_ST(ddp_reducer_create(g_comm, &q, 1, NULL, &r), DDP_EINVAL);
  CHECK_MSG("data");
  q = p, q.grad = NULL;
  o.grad_as_bucket_view = 0;
  CHECK_ST(ddp_reducer_create(g_comm, &q, 1, &o, &r), DDP_EINVAL);
  CHECK_MSG("grad");
  double badcaps[] = {0.0, -1.0, NAN, INFINITY};
  for (int k = 0; k < 4; k++) {
    ddp_reducer_opts_default(&o);
    o.bucket_cap_mb = badcaps[k];
    CHECK_ST(ddp_reducer_create(g_comm, &p, 1, &o, &r), DDP_EINVAL);
    CHECK_MSG("bucket_cap_mb");
    ddp_reducer_opts_default(&o);
    o.first_bucket_mb = badcaps[k];
    CHECK_ST(ddp_reducer_create(g_comm, &p, 1, &o, &r), DDP_EINVAL);
    CHECK_MSG("first_bucket_mb");
  }
  ddp_reducer_opts_default(&o);
  o.hook = (ddp_hook_t)7;
  CHECK_ST(ddp_reducer_create(g_comm, &p, 1, &o, &r), DDP_EINVAL);
  CHECK_MSG("hook 7");
  /* Hook names: each round-trips; bad inputs name the value and leave the output alone. */
  for (int k = 0; k < DDP_HOOK_COUNT; k++) {
    ddp_hook_t back = DDP_HOOK_COUNT;
    CHECK_OK(ddp_hook_parse(ddp_hook_name((ddp_hook_t)k), &back));
    CHECK(back == (ddp_hook_t)k, "ddp_hook_parse(ddp_hook_name(%d)) gave %d", k, (int)back);
  }
  CHECK(!strcmp(ddp_hook_name(DDP_HOOK_BF16), "bf16") && !strcmp(ddp_hook_name((ddp_hook_t)7), "?") &&
            !strcmp(ddp_hook_name((ddp_hook_t)-1), "?"),
        "ddp_hook_name: bf16 %s, 7 %s", ddp_hook_name(DDP_HOOK_BF16), ddp_hook_name((ddp_hook_t)7));
  ddp_hook_t keep = DDP_HOOK_BF16;
  CHECK_ST(ddp_hook_parse("fp8", &keep), DDP_EINVAL);
  CHECK_MSG("'fp8'");
  CHECK_MSG("fp16");
  CHECK_ST(ddp_hook_parse("FP16", &keep), DDP_EINVAL);
  CHECK_ST(ddp_hook_parse("", &keep), DDP_EINVAL);
  CHECK_ST(ddp_hook_parse(NULL, &keep), DDP_EINVAL);
  CHECK_MSG("text");
  CHECK(keep == DDP_HOOK_BF16, "ddp_hook_parse wrote its output on error");
  CHECK_ST(ddp_hook_parse("none", NULL), DDP_EINVAL);
  CHECK_MSG("out");
  ddp_reducer_opts_default(&o);
  o.algo = (ddp_algo_t)99;
  CHECK_ST(ddp_reducer_create(g_comm, &p, 1, &o, &r), DDP_EINVAL);
  CHECK_MSG("99");
  ddp_reducer_opts_default(&o);
  o.find_unused = 2;
  CHECK_ST(ddp_reducer_create(g_comm, &p, 1, &o, &r), DDP_EINVAL);
  CHECK_MSG("find_unused 2");
  ddp_reducer_opts_default(&o);
  o.predivided = -1;
  CHECK_ST(ddp_reducer_create(g_comm, &p, 1, &o, &r), DDP_EINVAL);
  CHECK_MSG("predivided -1");
  CHECK(r == NULL, "out written on error");
  /* A bad argument on one rank only: an error on every rank, no hang. */
  q = p;
  if (g_rank == g_size - 1) q.count = 0;
  ddp_status_t st = ddp_reducer_create(g_comm, &q, 1, NULL, &r);
  CHECK(st != DDP_OK, "create with a bad argument on rank %d succeeded", g_size - 1);
  if (g_rank != g_size - 1) CHECK_MSG("bad argument on rank");
  CHECK(r == NULL, "out written on error");
  /* Calls on a live reducer. */
  CHECK_OK(ddp_reducer_create(g_comm, &p, 1, NULL, &r));
  void *g = NULL;
  size_t bk = 0, cnt = 0;
  int used = 0;
  ddp_reducer_stats_t s;
  CHECK_ST(ddp_reducer_grad(NULL, 0, &g), DDP_EINVAL);
  CHECK_ST(ddp_reducer_grad(r, 1, &g), DDP_EINVAL);
  CHECK_MSG("index 1");
  CHECK_ST(ddp_reducer_grad(r, 0, NULL), DDP_EINVAL);
  CHECK_ST(ddp_reducer_grad_ready(NULL, 0), DDP_EINVAL);
  CHECK_ST(ddp_reducer_grad_ready(r, (size_t)-1), DDP_EINVAL);
  CHECK_ST(ddp_reducer_finish(NULL), DDP_EINVAL);
  CHECK_ST(ddp_reducer_zero_grad(NULL), DDP_EINVAL);
  CHECK_ST(ddp_reducer_set_sync(NULL, 1), DDP_EINVAL);
  CHECK_ST(ddp_reducer_set_sync(r, 2), DDP_EINVAL);
  CHECK_MSG("sync 2");
  CHECK_ST(ddp_reducer_stats(NULL, &s), DDP_EINVAL);
  CHECK_ST(ddp_reducer_stats(r, NULL), DDP_EINVAL);
  CHECK_ST(ddp_reducer_bucket_of(r, 3, &bk), DDP_EINVAL);
  CHECK_ST(ddp_reducer_bucket_of(r, 0, NULL), DDP_EINVAL);
  CHECK_ST(ddp_reducer_bucket_params(r, 1, NULL, 0, &cnt, NULL), DDP_EINVAL);
  CHECK_MSG("bucket 1");
  CHECK_ST(ddp_reducer_bucket_params(r, 0, NULL, 4, &cnt, NULL), DDP_EINVAL);
  CHECK_ST(ddp_reducer_param_used(r, 0, &used), DDP_ESTATE);
  CHECK_OK(ddp_reducer_destroy(NULL)); /* nothing to destroy: no-op */
  /* The communicator cannot go away under the reducer. */
  CHECK_ST(ddp_comm_destroy(&g_comm), DDP_EBUSY);
  CHECK_OK(ddp_reducer_destroy(&r));
}

#define REDUCER_CASE(name, call)                                                            \
  static int run_##name(ddp_test_t *t) {                                                    \
    g_comm = t->comm;                                                                       \
    g_rank = t->rank;                                                                       \
    g_size = t->size;                                                                       \
    call;                                                                                   \
    return 0;                                                                               \
  }
REDUCER_CASE(bad_args, test_bad_args())
REDUCER_CASE(layouts, test_layouts())
REDUCER_CASE(iterations, test_iterations())
REDUCER_CASE(no_sync, test_no_sync(1))
REDUCER_CASE(no_sync_views_off, test_no_sync(0))
REDUCER_CASE(iteration_errors, test_iteration_errors())

DDP_TEST_PROGRAM("reducer_exact", DDP_TEST_CASE("bad_args", run_bad_args), DDP_TEST_CASE("layouts", run_layouts),
                 DDP_TEST_CASE("iterations", run_iterations), DDP_TEST_CASE("no_sync", run_no_sync),
                 DDP_TEST_CASE("no_sync_views_off", run_no_sync_views_off), DDP_TEST_CASE("iteration_errors", run_iteration_errors));
