/* Unit tests of ddp_train's building blocks (no communication): the models' gradients against
 * finite differences, activation checkpointing giving bitwise the same gradients with less
 * memory, the learning-rate schedule, f16/bf16 rounding, the loss scaler, mixed-precision
 * gradients close to f32's, and the checkpoint format (round trip, corrupt,
 * truncated, mismatched files are refused; a failed write leaves the old file alone), AdamW
 * against torch.optim.AdamW's numbers (tests/fixtures/adamw_torch.txt) and the optimizers on
 * shards giving bitwise the full update.
 * Usage: train_unit SCRATCH_DIR [ADAMW_FIXTURE] */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint.h"
#include "ddp_test.h"
#include "membw.h"
#include "train_model.h"
#include "train_optim.h"
#include "train_util.h"

/* Inputs and labels seeded by (sample, index). */
static void make_batch(float *x, int32_t *y, int batch, int classes, uint64_t seed) {
  uint64_t s = seed;
  for (int r = 0; r < batch; r++) {
    for (int k = 0; k < 784; k++) x[(size_t)r * 784 + (size_t)k] = train_rng_uniform(&s);
    y[r] = (int32_t)(train_rng_next(&s) % (uint64_t)classes);
  }
}

static float *g_grads[TM_MAX_PARAMS];
static int g_ready[TM_MAX_PARAMS];
static void on_ready(size_t i, void *ctx) {
  (void)ctx;
  g_ready[i]++;
}

/* Central differences on a few entries of every tensor, in double precision of the loss. */
static void gradcheck(const char *kind) {
  const int B = 4, C = 10;
  char err[256];
  train_model_t m, mc;
  CHECK(tm_create(&m, kind, B, C, 0, err, sizeof err) == 0, "%s: %s", kind, err);
  CHECK(tm_create(&mc, kind, B, C, 1, err, sizeof err) == 0, "%s ckpt: %s", kind, err);
  uint64_t rng = 7, rng2 = 7;
  tm_init_params(&m, &rng);
  tm_init_params(&mc, &rng2);
  CHECK(rng == rng2 && rng != 7, "init must advance the RNG the same way");
  float *x = malloc(sizeof(float) * (size_t)B * 784);
  int32_t y[4];
  make_batch(x, y, B, C, 11);
  float *gbuf = calloc(m.total, sizeof(float)), *gbuf2 = calloc(m.total, sizeof(float));
  for (size_t i = 0, off = 0; i < m.nparams; off += m.count[i], i++) {
    m.grad[i] = gbuf + off;
    mc.grad[i] = gbuf2 + off;
    g_grads[i] = m.grad[i];
  }
  memset(g_ready, 0, sizeof g_ready);
  double loss = tm_forward(&m, x, y, B);
  tm_backward(&m, x, y, B, 0, on_ready, NULL);
  CHECK(loss > 1.0 && loss < 5.0, "%s: initial loss %g not near ln(10)", kind, loss);
  for (size_t i = 0; i < m.nparams; i++)
    CHECK(g_ready[i] == 1, "%s: param %zu ready called %d times", kind, i, g_ready[i]);

  double loss2 = tm_forward(&mc, x, y, B);
  tm_backward(&mc, x, y, B, 0, NULL, NULL);
  CHECK(loss == loss2, "%s: checkpointed forward loss %.9g != %.9g", kind, loss2, loss);
  CHECK(memcmp(gbuf, gbuf2, sizeof(float) * m.total) == 0,
        "%s: checkpointed gradients differ from the plain ones", kind);
  /* The 3-layer MLP needs every activation in backward (nothing to save); the CNN's blocks
   * share one scratch arena. */
  CHECK(strcmp(kind, "cnn") ? mc.act_bytes <= m.act_bytes : mc.act_bytes * 10 < m.act_bytes * 7,
        "%s: checkpointing keeps %zu bytes, plain %zu", kind, mc.act_bytes, m.act_bytes);

  /* Directional derivative along each tensor's own gradient: (L(p + e g) - L(p - e g)) / 2e
   * must equal |g|^2. Summing over the whole tensor keeps f32 rounding and ReLU kinks small
   * next to the signal, unlike single-entry differences. */
  int bad = 0, checked = 0;
  float *keep = malloc(sizeof(float) * m.total);
  for (size_t i = 0; i < m.nparams; i++) {
    double g2 = 0.0;
    for (size_t k = 0; k < m.count[i]; k++) g2 += (double)m.grad[i][k] * (double)m.grad[i][k];
    if (g2 == 0.0) continue;
    double e = 2e-3 / g2;
    memcpy(keep, m.param[i], sizeof(float) * m.count[i]);
    for (size_t k = 0; k < m.count[i]; k++) m.param[i][k] = keep[k] + (float)(e * m.grad[i][k]);
    double lp = tm_forward(&m, x, y, B);
    for (size_t k = 0; k < m.count[i]; k++) m.param[i][k] = keep[k] - (float)(e * m.grad[i][k]);
    double lm = tm_forward(&m, x, y, B);
    memcpy(m.param[i], keep, sizeof(float) * m.count[i]);
    double num = (lp - lm) / (2.0 * e);
    checked++;
    if (fabs(num - g2) > 0.03 * g2) {
      bad++;
      fprintf(stderr, "%s: %s: directional derivative %.6g, |g|^2 %.6g\n", kind, m.pname[i], num, g2);
    }
  }
  free(keep);
  CHECK(bad == 0, "%s: %d of %d finite-difference checks off", kind, bad, checked);
  free(x);
  free(gbuf);
  free(gbuf2);
  tm_free(&m);
  tm_free(&mc);
}

static void schedule(void) {
  CHECK(fabs(train_lr(0.1, 0, 10, 100) - 0.01) < 1e-12, "warmup step 0");
  CHECK(fabs(train_lr(0.1, 9, 10, 100) - 0.1) < 1e-12, "end of warmup");
  CHECK(fabs(train_lr(0.1, 10, 10, 100) - 0.1) < 1e-12, "cosine start");
  CHECK(fabs(train_lr(0.1, 55, 10, 100) - 0.05) < 1e-12, "cosine middle %g", train_lr(0.1, 55, 10, 100));
  CHECK(train_lr(0.1, 100, 10, 100) < 1e-12, "cosine end");
  /* SGD: first step with zero buffer equals PyTorch's buf = g. */
  float p[2] = {1.0f, -2.0f}, g[2] = {0.5f, 0.25f}, buf[2] = {0, 0};
  train_sgd_step(p, g, buf, 2, 0.1f, 0.9f, 0.01f);
  CHECK(fabsf(buf[0] - 0.51f) < 1e-6f && fabsf(p[0] - (1.0f - 0.051f)) < 1e-6f, "sgd step %g %g",
        buf[0], p[0]);
  train_sgd_step(p, g, buf, 2, 0.1f, 0.9f, 0.0f);
  CHECK(fabsf(buf[1] - (0.9f * (0.25f - 0.02f) + 0.25f)) < 1e-6f, "momentum %g", buf[1]);
}

/* The optimizer interface: SGD with momentum equals train_sgd_step tensor by tensor and keeps
 * its momentum as state; momentum 0 and wd 0 is plain SGD (p -= lr g) without state. */
static void optimizer(void) {
  size_t counts[2] = {3, 2};
  float p0[3] = {1, 2, 3}, p1[2] = {-1, 0.5f}, g0[3] = {0.5f, -0.25f, 1}, g1[2] = {2, -4};
  float q0[3], q1[2], b0[3] = {0}, b1[2] = {0};
  memcpy(q0, p0, sizeof p0);
  memcpy(q1, p1, sizeof p1);
  float *p[2] = {p0, p1}, *g[2] = {g0, g1};
  train_optim_opts_t oo;
  CHECK(train_optim_opts_default(&oo) == 0 && oo.kind == TRAIN_OPTIM_SGD, "opts_default");
  oo.momentum = 0.9f;
  oo.wd = 0.01f;
  train_optim_t *opt = NULL;
  CHECK(train_optim_create(&oo, counts, 2, &opt) == 0 && opt, "create");
  if (!opt) return;
  for (int step = 0; step < 3; step++) {
    train_optim_step(opt, p, g, 0.1f);
    train_sgd_step(q0, g0, b0, 3, 0.1f, 0.9f, 0.01f);
    train_sgd_step(q1, g1, b1, 2, 0.1f, 0.9f, 0.01f);
  }
  float *const *st = train_optim_state(opt);
  CHECK(st && !memcmp(p0, q0, sizeof q0) && !memcmp(p1, q1, sizeof q1) &&
        !memcmp(st[0], b0, sizeof b0) && !memcmp(st[1], b1, sizeof b1) &&
        train_optim_state_block(opt) == st[0] && st[1] == st[0] + 3,
        "SGD through the interface differs from train_sgd_step");
  train_optim_destroy(&opt);
  CHECK(opt == NULL, "destroy must clear the handle");
  train_optim_destroy(&opt); /* NULL handle: no-op */
  oo.momentum = 0.0f;
  oo.wd = 0.0f;
  CHECK(train_optim_create(&oo, counts, 2, &opt) == 0 && opt && !train_optim_state(opt),
        "plain SGD keeps no state");
  if (opt) {
    float want = p0[0] - 0.5f * g0[0];
    train_optim_step(opt, p, g, 0.5f);
    CHECK(p0[0] == want, "plain SGD %g, expected %g", (double)p0[0], (double)want);
  }
  train_optim_destroy(&opt);
  oo.momentum = -1.0f;
  CHECK(train_optim_create(&oo, counts, 2, &opt) != 0 && !opt, "negative momentum accepted");
  oo.momentum = 0.9f;
  CHECK(train_optim_create(&oo, counts, 0, &opt) != 0 && !opt, "zero tensors accepted");
  CHECK(train_optim_create(NULL, counts, 2, &opt) != 0 && !opt, "NULL opts accepted");
}

/* AdamW against torch.optim.AdamW (tests/gen_adamw_fixtures.py): every parameter after every
 * step within 4 f32 ulps (of the larger of the new and the old value) of torch's: the same
 * formula, though torch's vector kernels may round a product differently. The step count starts at 1: a missing bias correction is off by 10x
 * on the first step. */
static void adamw_fixture(const char *path) {
  FILE *f = fopen(path, "r");
  CHECK(f != NULL, "cannot open the AdamW fixture %s", path);
  if (!f) return;
  char name[64];
  float b1, b2, eps, wd;
  size_t count, steps, ncases = 0, nchecked = 0;
  double worst = 0.0;
  char line[16];
  while (fscanf(f, "%15s", line) == 1) {
    if (line[0] == '#') {
      int ch;
      while ((ch = fgetc(f)) != EOF && ch != '\n') {}
      continue;
    }
    CHECK(line[0] == 'C' && fscanf(f, "%63s %a %a %a %a %zu %zu", name, &b1, &b2, &eps, &wd, &count,
                                   &steps) == 7, "fixture: bad case line");
    if (line[0] != 'C' || count == 0 || count > 4096) break;
    ncases++;
    float *p = malloc(count * sizeof *p), *g = malloc(count * sizeof *g), *want = malloc(count * sizeof *want);
    float *q = malloc(count * sizeof *q); /* the same tensor through the optimizer interface */
    train_optim_opts_t oo;
    train_optim_opts_adamw(&oo);
    oo.beta1 = b1, oo.beta2 = b2, oo.eps = eps, oo.wd = wd;
    train_optim_t *opt = NULL;
    CHECK(train_optim_create(&oo, &count, 1, &opt) == 0 && train_optim_nstate(opt) == 2, "adamw create");
    float *m = calloc(count, sizeof *m), *v = calloc(count, sizeof *v);
    int ok = fscanf(f, "%15s", line) == 1 && line[0] == 'P';
    for (size_t k = 0; k < count && ok; k++) ok = fscanf(f, "%a", &p[k]) == 1;
    memcpy(q, p, count * sizeof *q);
    for (size_t s = 1; s <= steps && ok && opt; s++) {
      size_t sn = 0, rn = 0;
      float lr = 0.0f;
      ok = fscanf(f, "%15s %zu %a", line, &sn, &lr) == 3 && line[0] == 'S' && sn == s;
      for (size_t k = 0; k < count && ok; k++) ok = fscanf(f, "%a", &g[k]) == 1;
      ok = ok && fscanf(f, "%15s %zu", line, &rn) == 2 && line[0] == 'R' && rn == s;
      for (size_t k = 0; k < count && ok; k++) ok = fscanf(f, "%a", &want[k]) == 1;
      if (!ok) break;
      float *before = malloc(count * sizeof *before);
      memcpy(before, p, count * sizeof *before);
      train_adamw_step(p, g, m, v, count, lr, b1, b2, eps, wd, s);
      train_optim_step(opt, &q, &g, lr);
      size_t bad = 0;
      for (size_t k = 0; k < count; k++) {
        double d = fabs((double)p[k] - (double)want[k]);
        /* ulps of the larger of the result and the parameter it came from (p + update
         * cancels when the update nearly undoes the parameter) */
        float mag = fmaxf(fabsf(want[k]), fabsf(before[k]));
        double ulp = nextafterf(mag, INFINITY) - mag;
        if (d / ulp > worst) worst = d / ulp;
        bad += !(d <= 4.0 * ulp);
        nchecked++;
      }
      free(before);
      CHECK(bad == 0, "AdamW case %s step %zu: %zu of %zu parameters differ from torch's", name, s, bad, count);
      CHECK(memcmp(p, q, count * sizeof *q) == 0, "case %s step %zu: the interface differs from train_adamw_step", name, s);
    }
    CHECK(ok, "fixture: case %s is malformed", name);
    CHECK(!opt || train_optim_steps(opt) == steps, "step count %llu", (unsigned long long)train_optim_steps(opt));
    CHECK(!opt || memcmp(train_optim_state_buf(opt, 0)[0], m, count * sizeof *m) == 0, "exp_avg state");
    CHECK(!opt || memcmp(train_optim_state_buf(opt, 1)[0], v, count * sizeof *v) == 0, "exp_avg_sq state");
    train_optim_destroy(&opt);
    free(p), free(g), free(want), free(q), free(m), free(v);
    if (!ok) break;
  }
  fclose(f);
  CHECK(ncases >= 4 && nchecked > 1000, "fixture: only %zu cases, %zu values", ncases, nchecked);
  printf("adamw vs torch: %zu cases, %zu values, worst %.1f ulp\n", ncases, nchecked, worst);
}

/* Both rules on shards: two optimizers over complementary ranges of every tensor (state for
 * their range only) end bitwise where one optimizer over the whole tensors ends. */
static void optimizer_shards(void) {
  /* [0,4) + [4,10); [0,1) + an empty shard; [0,3) + [3,7) */
  size_t counts[3] = {10, 1, 7}, lo[3] = {0, 0, 0}, nlo[3] = {4, 1, 3}, hi[3] = {4, 1, 3}, nhi[3] = {6, 0, 4};
  for (int kind = 0; kind < 2; kind++) {
    train_optim_opts_t oo;
    if (kind) train_optim_opts_adamw(&oo);
    else train_optim_opts_default(&oo), oo.wd = 1e-3f;
    float a[3][10], b[3][10], g[3][10];
    memset(a, 0, sizeof a), memset(b, 0, sizeof b);
    for (int i = 0; i < 3; i++)
      for (size_t k = 0; k < counts[i]; k++)
        a[i][k] = b[i][k] = 0.1f * (float)(k + 1) - (float)i, g[i][k] = 0.0f;
    float *pa[3] = {a[0], a[1], a[2]}, *pb[3] = {b[0], b[1], b[2]}, *pg[3] = {g[0], g[1], g[2]};
    train_optim_t *full = NULL, *s0 = NULL, *s1 = NULL;
    CHECK(train_optim_create(&oo, counts, 3, &full) == 0 && train_optim_create(&oo, nlo, 3, &s0) == 0 &&
          train_optim_create(&oo, nhi, 3, &s1) == 0, "create");
    if (!full || !s0 || !s1) return;
    CHECK(train_optim_state_bytes(s0) + train_optim_state_bytes(s1) == train_optim_state_bytes(full) &&
          train_optim_state_bytes(full) == (kind ? 2u : 1u) * 18 * sizeof(float), "state bytes %zu",
          train_optim_state_bytes(full));
    for (int s = 0; s < 4; s++) {
      for (int i = 0; i < 3; i++)
        for (size_t k = 0; k < counts[i]; k++) g[i][k] = (float)((int)((k * 3 + (size_t)i + (size_t)s) % 5) - 2) * 0.3f;
      float lr = 0.01f * (float)(s + 1);
      train_optim_step(full, pa, pg, lr);
      train_optim_step_at(s0, pb, pg, lo, lr);
      train_optim_step_at(s1, pb, pg, hi, lr);
    }
    CHECK(memcmp(a, b, sizeof a) == 0, "%s on two shards differs from the full update",
          train_optim_name(oo.kind));
    train_optim_destroy(&full), train_optim_destroy(&s0), train_optim_destroy(&s1);
  }
  train_optim_kind_t k;
  CHECK(train_optim_parse("adamw", &k) == 0 && k == TRAIN_OPTIM_ADAMW && train_optim_parse("adam", &k) != 0 &&
        !strcmp(train_optim_name(TRAIN_OPTIM_SGD), "sgd"), "names");
  train_optim_opts_t bad;
  train_optim_opts_adamw(&bad);
  bad.beta2 = 1.0f;
  train_optim_t *o = NULL;
  CHECK(train_optim_create(&bad, counts, 3, &o) != 0 && !o, "beta2 1 accepted");
}

static void rounding(void) {
  /* f16: exact values stay, ties go to even, overflow from 65520, subnormal steps 2^-24. */
  CHECK(train_round_fp16(1.0f) == 1.0f && train_round_fp16(-2.5f) == -2.5f, "exact values");
  CHECK(train_round_fp16(65504.0f) == 65504.0f, "f16 max");
  CHECK(train_round_fp16(65519.0f) == 65504.0f, "just below the overflow threshold");
  CHECK(isinf(train_round_fp16(65520.0f)) && train_round_fp16(-70000.0f) < 0 &&
            isinf(train_round_fp16(-70000.0f)), "overflow to inf");
  CHECK(train_round_fp16(1.0f + 1.0f / 2048.0f) == 1.0f, "tie to even (down) %g",
        (double)train_round_fp16(1.0f + 1.0f / 2048.0f));
  CHECK(train_round_fp16(1.0f + 3.0f / 2048.0f) == 1.0f + 2.0f / 1024.0f, "tie to even (up)");
  CHECK(train_round_fp16(0.1f) == 0.0999755859375f, "0.1 -> %.12g", (double)train_round_fp16(0.1f));
  const float q = 1.0f / 16777216.0f; /* 2^-24, the smallest f16 subnormal */
  CHECK(train_round_fp16(q) == q && train_round_fp16(0.5f * q) == 0.0f &&
            train_round_fp16(1.5f * q) == 2.0f * q && train_round_fp16(0.75f * q) == q,
        "subnormals");
  CHECK(train_round_fp16(1e-9f) == 0.0f, "underflow to zero");
  CHECK(isnan(train_round_fp16(NAN)) && isinf(train_round_fp16(INFINITY)), "nan/inf kept");
  /* bf16: 8-bit mantissa, f32 range. */
  CHECK(train_round_bf16(1.0f + 1.0f / 256.0f) == 1.0f, "bf16 tie to even");
  CHECK(train_round_bf16(1.0f + 3.0f / 256.0f) == 1.0f + 4.0f / 256.0f, "bf16 tie up");
  CHECK(train_round_bf16(1e30f) > 9.9e29f && !isinf(train_round_bf16(1e30f)), "bf16 range");
  CHECK(train_round_bf16(0.1f) == 0.10009765625f, "bf16 0.1 -> %.12g", (double)train_round_bf16(0.1f));
  /* Loss scaler: skip + halve on overflow, double after `interval` clean steps. */
  train_scaler_t sc = {.scale = 1024.0f, .interval = 3};
  float g[2] = {2048.0f, INFINITY};
  CHECK(!train_unscale_check(g, 2, sc.scale) && g[0] == 2.0f, "inf detected, values unscaled");
  train_scaler_update(&sc, 0);
  CHECK(sc.scale == 512.0f && sc.skipped == 1, "backoff %g", (double)sc.scale);
  for (int i = 0; i < 3; i++) train_scaler_update(&sc, 1);
  CHECK(sc.scale == 1024.0f && sc.clean == 0, "growth %g", (double)sc.scale);
}

/* Mixed precision keeps the gradients close to f32's (fp16 with a loss scale, bf16 without). */
static void amp_gradients(const char *kind) {
  const int B = 8, C = 10;
  char err[256];
  train_model_t m, a;
  CHECK(tm_create(&m, kind, B, C, 0, err, sizeof err) == 0, "%s", err);
  CHECK(tm_create(&a, kind, B, C, 0, err, sizeof err) == 0, "%s", err);
  uint64_t r1 = 3, r2 = 3;
  tm_init_params(&m, &r1);
  tm_init_params(&a, &r2);
  float *x = malloc(sizeof(float) * (size_t)B * 784);
  int32_t y[8];
  make_batch(x, y, B, C, 5);
  float *g = calloc(m.total, sizeof(float)), *ga = calloc(m.total, sizeof(float));
  for (size_t i = 0, off = 0; i < m.nparams; off += m.count[i], i++) m.grad[i] = g + off, a.grad[i] = ga + off;
  tm_forward(&m, x, y, B);
  tm_backward(&m, x, y, B, 0, NULL, NULL);
  for (int amp = TRAIN_AMP_FP16; amp <= TRAIN_AMP_BF16; amp++) {
    CHECK(tm_set_amp(&a, (train_amp_t)amp) == 0, "tm_set_amp");
    a.loss_scale = amp == TRAIN_AMP_FP16 ? 1024.0f : 1.0f;
    tm_forward(&a, x, y, B);
    tm_backward(&a, x, y, B, 0, NULL, NULL);
    CHECK(train_unscale_check(ga, a.total, a.loss_scale), "%s amp %d: non-finite gradient", kind, amp);
    double num = 0, den = 0;
    for (size_t k = 0; k < m.total; k++) {
      double d = (double)ga[k] - (double)g[k];
      num += d * d;
      den += (double)g[k] * (double)g[k];
    }
    double rel = sqrt(num / den), lim = amp == TRAIN_AMP_FP16 ? 0.03 : 0.1;
    printf("%s %s: gradient relative error %.4f\n", kind, amp == TRAIN_AMP_FP16 ? "fp16" : "bf16", rel);
    CHECK(rel < lim && rel > 0, "%s amp %d: gradient relative error %.3g (limit %g)", kind, amp, rel, lim);
  }
  free(x);
  free(g);
  free(ga);
  tm_free(&m);
  tm_free(&a);
}

static int write_bytes(const char *path, const void *b, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  size_t w = fwrite(b, 1, n, f);
  return fclose(f) == 0 && w == n ? 0 : -1;
}

static void checkpoint_format(const char *dir) {
  float p0[3] = {1, 2, 3}, p1[2] = {-1, 0.5f}, m0[3] = {0.1f, 0.2f, 0.3f}, m1[2] = {7, 8};
  float *params[2] = {p0, p1}, *mom[2] = {m0, m1};
  size_t counts[2] = {3, 2};
  ckpt_state_t st = {.nparams = 2, .world = 2, .batch = 64, .seed = 5, .epoch = 1,
                     .step_in_epoch = 17, .global_step = 486, .rng = 0xDEADBEEFCAFEULL,
                     .loss_sum = 12.5, .loss_steps = 17, .epochs = 3, .loss_scale = 4096.0f,
                     .scale_clean = 77};
  snprintf(st.model, sizeof st.model, "mlp");
  void *buf = NULL;
  size_t n = 0;
  char err[512];
  CHECK(ckpt_serialize(&st, params, mom, counts, &buf, &n, err, sizeof err) == 0, "%s", err);
  CHECK(n == ckpt_file_bytes(2, 5), "size %zu", n);
  ckpt_view_t v;
  CHECK(ckpt_parse(buf, n, &v, err, sizeof err) == 0, "parse: %s", err);
  CHECK(v.st.epoch == 1 && v.st.step_in_epoch == 17 && v.st.global_step == 486 &&
            v.st.rng == 0xDEADBEEFCAFEULL && v.st.loss_sum == 12.5 && v.st.world == 2 &&
            v.st.loss_scale == 4096.0f && v.st.scale_clean == 77 &&
            strcmp(v.st.model, "mlp") == 0,
        "fields did not round-trip");
  float back[5], mback[5];
  ckpt_copy_floats(buf, v.params_off, back, 5);
  ckpt_copy_floats(buf, v.momentum_off, mback, 5);
  CHECK(back[0] == 1 && back[2] == 3 && back[3] == -1 && back[4] == 0.5f, "params");
  CHECK(mback[0] == 0.1f && mback[4] == 8, "momentum");
  CHECK(ckpt_check_compatible(buf, &v, "mlp", counts, 2, 2, 64, 5, err, sizeof err) == 0, "%s", err);
  CHECK(ckpt_check_compatible(buf, &v, "cnn", counts, 2, 2, 64, 5, err, sizeof err) != 0 &&
            strstr(err, "model 'mlp'"), "model mismatch: %s", err);
  CHECK(ckpt_check_compatible(buf, &v, "mlp", counts, 2, 4, 64, 5, err, sizeof err) != 0 &&
            strstr(err, "2 ranks"), "world mismatch: %s", err);
  size_t other[2] = {3, 3};
  CHECK(ckpt_check_compatible(buf, &v, "mlp", other, 2, 2, 64, 5, err, sizeof err) != 0 &&
            strstr(err, "tensor 1"), "shape mismatch: %s", err);

  /* Every single-byte corruption and every truncation is refused. */
  unsigned char *c = malloc(n);
  int accepted = 0;
  for (size_t k = 0; k < n; k++) {
    memcpy(c, buf, n);
    c[k] ^= 0x5A;
    if (ckpt_parse(c, n, &v, err, sizeof err) == 0) accepted++;
  }
  CHECK(accepted == 0, "%d corrupted copies accepted", accepted);
  accepted = 0;
  for (size_t k = 0; k < n; k++)
    if (ckpt_parse(buf, k, &v, err, sizeof err) == 0) accepted++;
  CHECK(accepted == 0, "%d truncated copies accepted", accepted);
  CHECK(ckpt_parse(buf, n - 1, &v, err, sizeof err) != 0 && strstr(err, "truncated"), "msg: %s", err);
  memcpy(c, buf, n);
  c[20] ^= 1; /* model name byte: caught by the CRC */
  CHECK(ckpt_parse(c, n, &v, err, sizeof err) != 0 && strstr(err, "CRC32"), "msg: %s", err);
  memcpy(c, buf, n);
  c[8] = 9;
  CHECK(ckpt_parse(c, n, &v, err, sizeof err) != 0 && strstr(err, "version 9"), "msg: %s", err);
  memcpy(c, buf, n);
  c[0] = 'X';
  CHECK(ckpt_parse(c, n, &v, err, sizeof err) != 0 && strstr(err, "magic"), "msg: %s", err);
  CHECK(ckpt_parse(NULL, 0, &v, err, sizeof err) != 0, "empty buffer accepted");
  CHECK(ckpt_parse("DDPCKPT", 8, &v, err, sizeof err) != 0 && strstr(err, "truncated"), "msg: %s", err);
  CHECK(ckpt_parse("junk", 4, &v, err, sizeof err) != 0 && strstr(err, "magic"), "msg: %s", err);

  /* Files: atomic write, read back, failures leave the old file. */
  char path[1024], bad[1024];
  snprintf(path, sizeof path, "%s/unit.ckpt", dir);
  snprintf(bad, sizeof bad, "%s/no-such-dir/unit.ckpt", dir);
  CHECK(ckpt_write_atomic(path, buf, n, err, sizeof err) == 0, "%s", err);
  void *rb = NULL;
  size_t rn = 0;
  CHECK(ckpt_load_file(path, &rb, &rn, &v, err, sizeof err) == 0 && rn == n &&
            memcmp(rb, buf, n) == 0, "reload: %s", err);
  free(rb);
  CHECK(ckpt_write_atomic(bad, buf, n, err, sizeof err) != 0 && strstr(err, "no-such-dir"),
        "write into a missing folder: %s", err);
  CHECK(write_bytes(path, buf, n / 2) == 0, "cannot write truncated file");
  CHECK(ckpt_load_file(path, &rb, &rn, &v, err, sizeof err) != 0 && strstr(err, "truncated"),
        "truncated file: %s", err);
  snprintf(bad, sizeof bad, "%s/missing.ckpt", dir);
  CHECK(ckpt_load_file(bad, &rb, &rn, &v, err, sizeof err) != 0 && strstr(err, "missing.ckpt"),
        "missing file: %s", err);
  free(c);
  free(buf);

  /* Version 2 with AdamW state: two buffers and the step count round-trip; a version 1 file
   * (SGD momentum) still reads, as SGD with one buffer, and AdamW refuses it. */
  float e0[3] = {1e-3f, 2e-3f, 3e-3f}, e1[2] = {4e-3f, 5e-3f};
  float *adam[4] = {m0, m1, e0, e1};
  st.optim = 1, st.nstate = 2, st.optim_steps = 480;
  CHECK(ckpt_serialize(&st, params, adam, counts, &buf, &n, err, sizeof err) == 0, "%s", err);
  CHECK(n == ckpt_file_bytes_state(2, 5, 2), "size %zu", n);
  CHECK(ckpt_parse(buf, n, &v, err, sizeof err) == 0 && v.version == 2 && v.st.optim == 1 &&
        v.st.nstate == 2 && v.st.optim_steps == 480, "adamw header: %s", err);
  ckpt_copy_floats(buf, v.state_off + 4 * 5, mback, 5);
  CHECK(mback[0] == 1e-3f && mback[4] == 5e-3f, "exp_avg_sq did not round-trip");
  CHECK(ckpt_check_optim(&v, 1, "adamw", 2, err, sizeof err) == 0, "%s", err);
  CHECK(ckpt_check_optim(&v, 0, "sgd", 1, err, sizeof err) != 0 && strstr(err, "--optim sgd"), "msg: %s", err);
  free(buf);
  st.optim = 0, st.nstate = 1, st.optim_steps = 486;
  CHECK(ckpt_serialize(&st, params, mom, counts, &buf, &n, err, sizeof err) == 0, "%s", err);
  /* The same file as version 1 wrote it: 128-byte header, no optimizer fields. */
  size_t n1 = n - (CKPT_HEADER_BYTES - CKPT_V1_HEADER_BYTES);
  unsigned char *v1 = malloc(n1);
  memcpy(v1, buf, CKPT_V1_HEADER_BYTES);
  memcpy(v1 + CKPT_V1_HEADER_BYTES, (char *)buf + CKPT_HEADER_BYTES, n - CKPT_HEADER_BYTES);
  v1[8] = 1, v1[12] = (unsigned char)CKPT_V1_HEADER_BYTES;
  uint32_t crc = ckpt_crc32(v1, n1 - 4);
  for (int k = 0; k < 4; k++) v1[n1 - 4 + (size_t)k] = (unsigned char)(crc >> (8 * k));
  CHECK(ckpt_parse(v1, n1, &v, err, sizeof err) == 0 && v.version == 1 && v.st.optim == 0 &&
        v.st.nstate == 1 && v.st.optim_steps == 486, "version 1 file: %s", err);
  ckpt_copy_floats(v1, v.momentum_off, mback, 5);
  CHECK(mback[0] == 0.1f && mback[4] == 8, "version 1 momentum");
  CHECK(ckpt_check_optim(&v, 1, "adamw", 2, err, sizeof err) != 0 && strstr(err, "version 1"),
        "adamw from a version 1 file: %s", err);
  free(v1);
  free(buf);
}

/* The memory-traffic model of apps/kit/membw.c (docs/collectives.md, "The memory bound"). */
static void membw_model(void) {
  const double n = 1 << 20;
  CHECK(membw_allreduce_traffic("shm", 1 << 20, 2, 2, 1, 1) == 2 * n &&
            membw_allreduce_traffic("shm", 1 << 20, 4, 4, 0, 0) == 2 * n, "shm moves 2n");
  CHECK(membw_allreduce_traffic("ring", 1 << 20, 2, 2, 1, 0) == 2.5 * n &&
            membw_allreduce_traffic("raw", 1 << 20, 2, 2, 0, 0) == 4.5 * n, "ring/raw 2.5n in place, +2n out");
  CHECK(membw_allreduce_traffic("rhd", 1 << 20, 2, 2, 1, 0) == 3.5 * n, "rhd 3.5n at np 2");
  CHECK(membw_allreduce_traffic("hier", 1 << 20, 2, 2, 0, 1) == 2.5 * n, "hier on one node, pooled");
  CHECK(membw_allreduce_traffic("nccl", 1 << 20, 2, 2, 1, 0) < 0 && membw_allreduce_traffic(NULL, 1, 2, 2, 1, 0) < 0,
        "unknown algorithm");
  membw_t m = {.bytes = 1, .single_gbs = 10.0, .all_gbs = 5.0, .ranks = 2, .local = 2};
  CHECK(fabs(membw_bound_us(&m, 1e9) - 1e5) < 1e-6, "1 GB of traffic at 5 GB/s copy: %g us", membw_bound_us(&m, 1e9));
  CHECK(fabs(membw_percent(&m, "shm", 1000000, 1, 1, 800.0) - 25.0) < 1e-9, "2 MB at 10 GB/s: 200 of 800 us, %g%%",
        membw_percent(&m, "shm", 1000000, 1, 1, 800.0));
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : "/tmp";
  mkdir(dir, 0755);
  openblas_set_num_threads(1);
  gradcheck("mlp");
  gradcheck("cnn");
  schedule();
  membw_model();
  optimizer();
  optimizer_shards();
  if (argc > 2) adamw_fixture(argv[2]);
  rounding();
  amp_gradients("mlp");
  amp_gradients("cnn");
  checkpoint_format(dir);
  return ddp_test_finish("train_unit");
}
