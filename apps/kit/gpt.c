/* The kit's GPT-2 decoder (see gpt.h): forward and backward on the CPU, GEMMs through cblas. */
#include "gpt.h"

#include <cblas.h>
#include <immintrin.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_model.h" /* train_rng_seed */
#include "train_util.h"

#define LN_EPS 1e-5f

double gpt_flops_per_token(const gpt_config_t *c) {
  double L = c->layers, C = c->dim, T = c->seq, V = c->vocab;
  return 6.0 * (12.0 * L * C * C + V * C) + 12.0 * L * T * C;
}

void gpt_describe(const gpt_config_t *c, char *buf, size_t cap) {
  snprintf(buf, cap, "GPT L%d H%d C%d T%d V%d", c->layers, c->heads, c->dim, c->seq, c->vocab);
}

/* ---- parameters ----------------------------------------------------------------------- */

static const char *const block_names[GPT_PER_BLOCK] = {
    "ln1.w", "ln1.b", "attn.qkv.w", "attn.qkv.b", "attn.proj.w", "attn.proj.b",
    "ln2.w", "ln2.b", "mlp.fc.w",   "mlp.fc.b",   "mlp.proj.w",  "mlp.proj.b"};

/* Element count and rank of block tensor k. */
static size_t block_count(int k, size_t C, int *ndim) {
  static const int nd[GPT_PER_BLOCK] = {1, 1, 2, 1, 2, 1, 1, 1, 2, 1, 2, 1};
  static const size_t mul[GPT_PER_BLOCK] = {1, 1, 3 * 1, 3, 1, 1, 1, 1, 4, 4, 4, 1};
  *ndim = nd[k];
  return nd[k] == 2 ? mul[k] * C * C : mul[k] * C;
}

void gpt_free(gpt_t *m) {
  if (!m) return;
  free(m->param_block);
  free(m->grad_block);
  free(m->param);
  free(m->grad);
  free(m->count);
  free(m->ndim);
  free(m->pname);
  free(m->act);
  free(m->tokens);
  free(m->arena);
  free(m->wbf);
  free(m->abf);
  memset(m, 0, sizeof *m);
}

/* Carves `n` floats out of the arena (64-byte aligned pieces). */
static float *take(float **cur, size_t n) {
  float *p = *cur;
  *cur += (n + 15) & ~(size_t)15;
  return p;
}

int gpt_create(gpt_t *m, const gpt_config_t *cfg, int max_batch, int recompute, char *err,
               size_t errlen) {
  memset(m, 0, sizeof *m);
  m->recompute = recompute != 0;
  if (!cfg) return train_fail(err, errlen, "no configuration");
  const gpt_config_t c = *cfg;
  if (c.layers < 1 || c.layers > 1024) return train_fail(err, errlen, "layers %d must be in 1 .. 1024", c.layers);
  if (c.heads < 1 || c.dim < 1 || c.dim % c.heads)
    return train_fail(err, errlen, "dim %d must be a positive multiple of heads %d", c.dim, c.heads);
  if (c.seq < 1 || c.seq > 65536) return train_fail(err, errlen, "seq %d must be in 1 .. 65536", c.seq);
  if (c.vocab < 1 || c.vocab > (1 << 24)) return train_fail(err, errlen, "vocab %d must be in 1 .. 2^24", c.vocab);
  if (max_batch < 1) return train_fail(err, errlen, "batch %d must be >= 1", max_batch);
  m->cfg = c;
  m->max_batch = max_batch;
  m->loss_scale = 1.0f;
  const size_t L = (size_t)c.layers, C = (size_t)c.dim, T = (size_t)c.seq, V = (size_t)c.vocab;
  const size_t H = (size_t)c.heads, B = (size_t)max_batch, N = B * T;
  m->nparams = 2 + GPT_PER_BLOCK * L + 2;
  size_t np = m->nparams;
  m->param = calloc(np, sizeof(float *));
  m->grad = calloc(np, sizeof(float *));
  m->count = calloc(np, sizeof(size_t));
  m->ndim = calloc(np, sizeof(int));
  m->pname = calloc(np, sizeof *m->pname);
  m->act = calloc(L, sizeof(gpt_block_act_t));
  m->tokens = malloc(sizeof(int32_t) * 2 * N);
  if (!m->param || !m->grad || !m->count || !m->ndim || !m->pname || !m->act || !m->tokens) {
    gpt_free(m);
    return train_fail(err, errlen, "out of memory");
  }
  m->targets = m->tokens + N;
  m->count[0] = V * C, m->ndim[0] = 2, snprintf(m->pname[0], sizeof m->pname[0], "wte");
  m->count[1] = T * C, m->ndim[1] = 2, snprintf(m->pname[1], sizeof m->pname[1], "wpe");
  for (size_t l = 0; l < L; l++)
    for (int k = 0; k < GPT_PER_BLOCK; k++) {
      size_t i = gpt_tensor((int)l, k);
      m->count[i] = block_count(k, C, &m->ndim[i]);
      snprintf(m->pname[i], sizeof m->pname[i], "h%zu.%s", l, block_names[k]);
    }
  m->count[np - 2] = C, m->ndim[np - 2] = 1, snprintf(m->pname[np - 2], sizeof m->pname[0], "lnf.w");
  m->count[np - 1] = C, m->ndim[np - 1] = 1, snprintf(m->pname[np - 1], sizeof m->pname[0], "lnf.b");
  for (size_t i = 0; i < np; i++) m->total += m->count[i];
  m->param_block = malloc(sizeof(float) * m->total);
  m->grad_block = calloc(m->total, sizeof(float));
  if (!m->param_block || !m->grad_block) {
    gpt_free(m);
    return train_fail(err, errlen, "out of memory for %zu parameters", m->total);
  }
  for (size_t i = 0, off = 0; i < np; off += m->count[i], i++) {
    m->param[i] = m->param_block + off;
    m->grad[i] = m->grad_block + off;
  }
  /* Activations: per block 16 N x C plus the attention probabilities, then the head. With
   * recompute, one such set shared by every block and each block's output (N x C) of its own:
   * backward recomputes a block's activations from its input before its backward pass. */
  const size_t pad = 16, sets = m->recompute ? 1 : L;
  const size_t sizes_block[] = {N * C, N, N, 3 * N * C, B * H * T * T, N * C, N * C,
                                N * C, N, N, 4 * N * C, 4 * N * C};
  size_t per_block = 0;
  for (size_t k = 0; k < sizeof sizes_block / sizeof sizes_block[0]; k++)
    per_block += sizes_block[k] + pad;
  size_t head = (N * C + 2 * N + 3 * pad) + (N * V + pad) + (N + pad);
  size_t scratch = 2 * (N * C + pad) + (4 * N * C + pad) + (3 * N * C + pad) + (T * T + pad);
  size_t floats = N * C + pad + sets * per_block + L * (N * C + pad) + head + scratch;
  m->act_bytes_full = sizeof(float) * (N * C + pad + L * (per_block + N * C + pad) + head + scratch);
  m->act_bytes_ckpt = sizeof(float) * (N * C + pad + per_block + L * (N * C + pad) + head + scratch);
  m->arena = aligned_alloc(64, sizeof(float) * ((floats + 15) & ~(size_t)15));
  if (!m->arena) {
    gpt_free(m);
    return train_fail(err, errlen, "out of memory for %.1f MB of activations", 4.0 * floats / 1048576.0);
  }
  m->act_bytes = sizeof(float) * floats;
  float *cur = m->arena;
  m->x0 = take(&cur, N * C);
  for (size_t l = 0; l < L; l++) {
    gpt_block_act_t *a = &m->act[l];
    if (l < sets) {
      a->ln1 = take(&cur, N * C), a->ln1_mean = take(&cur, N), a->ln1_rstd = take(&cur, N);
      a->qkv = take(&cur, 3 * N * C);
      a->att = take(&cur, B * H * T * T);
      a->atty = take(&cur, N * C);
      a->res1 = take(&cur, N * C);
      a->ln2 = take(&cur, N * C), a->ln2_mean = take(&cur, N), a->ln2_rstd = take(&cur, N);
      a->fch = take(&cur, 4 * N * C), a->fcg = take(&cur, 4 * N * C);
    } else {
      *a = m->act[0]; /* the shared set */
    }
    a->res2 = take(&cur, N * C);
  }
  m->lnf = take(&cur, N * C), m->lnf_mean = take(&cur, N), m->lnf_rstd = take(&cur, N);
  m->probs = take(&cur, N * V);
  m->losses = take(&cur, N);
  m->dres = take(&cur, N * C), m->dC = take(&cur, N * C);
  m->d4C = take(&cur, 4 * N * C), m->dqkv = take(&cur, 3 * N * C);
  m->dP = take(&cur, T * T);
  return 0;
}

void gpt_set_grads(gpt_t *m, void *const *g) {
  for (size_t i = 0, off = 0; i < m->nparams; off += m->count[i], i++)
    m->grad[i] = g ? (float *)g[i] : m->grad_block + off;
}

/* N(0, 1) from splitmix64 (Box-Muller on two 53-bit uniforms), one value per call. */
static double normal01(uint64_t *s) {
  double u1 = ((double)(train_rng_next(s) >> 11) + 1.0) * 0x1.0p-53; /* (0, 1] */
  double u2 = (double)(train_rng_next(s) >> 11) * 0x1.0p-53;
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void gpt_init_params(gpt_t *m, uint64_t seed) {
  uint64_t s = train_rng_seed(seed);
  const double std = 0.02, proj_std = 0.02 / sqrt(2.0 * m->cfg.layers);
  for (size_t i = 0; i < m->nparams; i++) {
    float *p = m->param[i];
    size_t n = m->count[i];
    int k = i >= 2 && i < m->nparams - 2 ? (int)((i - 2) % GPT_PER_BLOCK) : -1;
    int is_ln_w = k == GPT_LN1_W || k == GPT_LN2_W || i == m->nparams - 2;
    if (m->ndim[i] == 2) {
      double sd = (k == GPT_PROJ_W || k == GPT_FCPROJ_W) ? proj_std : std;
      for (size_t e = 0; e < n; e++) p[e] = (float)(sd * normal01(&s));
    } else {
      for (size_t e = 0; e < n; e++) p[e] = is_ln_w ? 1.0f : 0.0f;
    }
  }
}

/* ---- kernels -------------------------------------------------------------------------- */

/* The elementwise kernels are compiled three times (AVX-512, AVX2 + FMA, the baseline) and the
 * best one the CPU runs is picked when the program loads (GCC's ifunc dispatch): one binary for
 * every build machine. Their reductions are `omp simd` loops (gpt.c is compiled with
 * -fopenmp-simd: vectorised partial sums, no threads). */
#define GPT_VEC __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

/* rows x M matrix out += b (one row vector) */
GPT_VEC static void add_bias(float *restrict out, const float *restrict b, size_t rows, size_t M) {
  for (size_t r = 0; r < rows; r++) {
    float *restrict o = out + r * M;
    for (size_t j = 0; j < M; j++) o[j] += b[j];
  }
}

/* db = (acc ? db : 0) + the column sums of d (rows x M) */
GPT_VEC static void col_sums(float *restrict db, const float *restrict d, size_t rows, size_t M,
                             int acc) {
  if (!acc) memset(db, 0, sizeof(float) * M);
  for (size_t r = 0; r < rows; r++) {
    const float *restrict x = d + r * M;
    for (size_t j = 0; j < M; j++) db[j] += x[j];
  }
}

/* y += x */
GPT_VEC static void add_to(float *restrict y, const float *restrict x, size_t n) {
  for (size_t i = 0; i < n; i++) y[i] += x[i];
}

/* ---- bf16 mixed precision ------------------------------------------------------------ */

/* What VCVTNEPS2BF16 makes of an f32, widened back to f32: round to nearest even to 8 mantissa
 * bits, denormal inputs to a zero of their sign, NaNs quiet, overflow to inf. The emulation
 * gives the instruction's results bit for bit, so both paths train the same parameters. */
GPT_VEC static void bf16_round_emulated(float *restrict dst, const float *restrict src, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, &src[i], 4);
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    if ((u & 0x7fffffffu) > 0x7f800000u) r = (u | 0x00400000u) & 0xffff0000u;
    if ((u & 0x7f800000u) == 0) r = u & 0x80000000u;
    memcpy(&dst[i], &r, 4);
  }
}

/* The same with AVX-512-BF16 (compiled for it here, called only where the CPU has it). */
__attribute__((target("avx512f,avx512bf16"))) static void bf16_round_native(
    float *restrict dst, const float *restrict src, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(src + i));
    __m512i w = _mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)h), 16);
    _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(w));
  }
  if (i < n) bf16_round_emulated(dst + i, src + i, n - i);
}

int gpt_bf16_native_supported(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16") != 0;
}

const char *gpt_bf16_name(gpt_bf16_t mode) {
  return mode == GPT_BF16_NATIVE ? "native (AVX-512-BF16)" : mode == GPT_BF16_EMULATED ? "emulated" : "off";
}

int gpt_bf16_parse(const char *s, gpt_bf16_t *mode) {
  if (!s) return -1;
  if (!strcmp(s, "auto")) *mode = gpt_bf16_native_supported() ? GPT_BF16_NATIVE : GPT_BF16_EMULATED;
  else if (!strcmp(s, "native")) *mode = GPT_BF16_NATIVE;
  else if (!strcmp(s, "emulated")) *mode = GPT_BF16_EMULATED;
  else if (!strcmp(s, "off")) *mode = GPT_BF16_OFF;
  else return -1;
  return 0;
}

int gpt_set_bf16(gpt_t *m, gpt_bf16_t mode, char *err, size_t errlen) {
  if (mode == GPT_BF16_NATIVE && !gpt_bf16_native_supported())
    return train_fail(err, errlen, "bf16 native: this CPU has no AVX-512-BF16 (use the emulated path)");
  if (mode != GPT_BF16_OFF && !m->wbf) {
    const size_t N = (size_t)m->max_batch * (size_t)m->cfg.seq, C = (size_t)m->cfg.dim;
    const size_t V = (size_t)m->cfg.vocab, wide = 4 * C > V ? 4 * C : V;
    m->wbf = malloc(sizeof(float) * m->total);
    m->abf = malloc(sizeof(float) * N * (4 * C + wide));
    if (!m->wbf || !m->abf) {
      free(m->wbf), free(m->abf);
      m->wbf = m->abf = NULL;
      return train_fail(err, errlen, "out of memory for the bf16 copies (%zu parameters)", m->total);
    }
    m->dbf = m->abf + N * 4 * C;
  }
  m->bf16 = mode;
  return 0;
}

static void bf16_round(const gpt_t *m, float *dst, const float *src, size_t n) {
  if (m->bf16 == GPT_BF16_NATIVE) bf16_round_native(dst, src, n);
  else bf16_round_emulated(dst, src, n);
}

/* A GEMM operand in bf16 mode: the weights' rounded copy (refreshed by each forward), or an
 * activation rounded into the scratch `to`. */
static const float *bf16_weight(const gpt_t *m, const float *w) {
  return m->bf16 ? m->wbf + (w - m->param_block) : w;
}
static const float *bf16_operand(const gpt_t *m, float *to, const float *x, size_t n) {
  if (!m->bf16) return x;
  bf16_round(m, to, x, n);
  return to;
}

/* out = inp @ W^T + b: inp N x K, W M x K (PyTorch's Linear), out N x M. bf16 mode: inp and W
 * rounded to bf16, f32 products and sums (what a bf16 GEMM with f32 accumulation computes). */
static void linear_fwd(const gpt_t *m, float *out, const float *inp, const float *w,
                       const float *b, size_t N, size_t K, size_t M) {
  inp = bf16_operand(m, m->abf, inp, N * K);
  w = bf16_weight(m, w);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, (int)M, (int)K, 1.0f, inp, (int)K,
              w, (int)K, 0.0f, out, (int)M);
  if (b) add_bias(out, b, N, M);
}

/* Backward of linear_fwd: dinp (= or +=, beta) from dout @ W, dW (+)= dout^T @ inp, db (+)= the
 * column sums of dout. */
static void linear_bwd(const gpt_t *m, float *dinp, float dinp_beta, float *dw, float *db,
                       const float *dout, const float *inp, const float *w, size_t N, size_t K,
                       size_t M, int acc) {
  const float *d = bf16_operand(m, m->dbf, dout, N * M); /* the bias keeps dout's f32 sums */
  inp = bf16_operand(m, m->abf, inp, N * K);
  w = bf16_weight(m, w);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)N, (int)K, (int)M, 1.0f, d,
              (int)M, w, (int)K, dinp_beta, dinp, (int)K);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)M, (int)K, (int)N, 1.0f, d, (int)M,
              inp, (int)K, acc ? 1.0f : 0.0f, dw, (int)K);
  if (db) col_sums(db, dout, N, M, acc);
}

GPT_VEC static void layernorm_fwd(float *restrict out, float *restrict mean, float *restrict rstd,
                                  const float *restrict inp, const float *restrict w,
                                  const float *restrict b, size_t N, size_t C) {
  for (size_t r = 0; r < N; r++) {
    const float *x = inp + r * C;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (size_t i = 0; i < C; i++) s += x[i];
    float mu = s / (float)C, v = 0.0f;
#pragma omp simd reduction(+ : v)
    for (size_t i = 0; i < C; i++) v += (x[i] - mu) * (x[i] - mu);
    float rs = 1.0f / sqrtf(v / (float)C + LN_EPS);
    float *o = out + r * C;
    for (size_t i = 0; i < C; i++) o[i] = (x[i] - mu) * rs * w[i] + b[i];
    mean[r] = mu, rstd[r] = rs;
  }
}

/* dinp += (or =, with set) the LayerNorm's input gradient; dw, db (+)= its parameters'. */
GPT_VEC static void layernorm_bwd(float *restrict dinp, int set, float *restrict dw,
                                  float *restrict db, const float *restrict dout,
                                  const float *restrict inp, const float *restrict w,
                                  const float *restrict mean, const float *restrict rstd,
                                  size_t N, size_t C, int acc) {
  if (!acc) {
    memset(dw, 0, sizeof(float) * C);
    memset(db, 0, sizeof(float) * C);
  }
  for (size_t r = 0; r < N; r++) {
    const float *x = inp + r * C, *d = dout + r * C;
    float mu = mean[r], rs = rstd[r], dm = 0.0f, dnm = 0.0f;
#pragma omp simd reduction(+ : dm, dnm)
    for (size_t i = 0; i < C; i++) {
      float dn = w[i] * d[i];
      dm += dn;
      dnm += dn * ((x[i] - mu) * rs);
    }
    dm /= (float)C, dnm /= (float)C;
    float *di = dinp + r * C;
    if (set)
      for (size_t i = 0; i < C; i++) di[i] = (w[i] * d[i] - dm - (x[i] - mu) * rs * dnm) * rs;
    else
      for (size_t i = 0; i < C; i++) di[i] += (w[i] * d[i] - dm - (x[i] - mu) * rs * dnm) * rs;
    for (size_t i = 0; i < C; i++) {
      dw[i] += (x[i] - mu) * rs * d[i];
      db[i] += d[i];
    }
  }
}

/* expf without a call, so that the loops around it vectorise: 2^n * p(r) with n = round(x /
 * ln 2) (the 1.5 * 2^23 trick: no rounding instruction needed) and Cephes' degree-6 polynomial
 * on r = x - n ln 2 (split in two for exactness): within 2 ulp of expf on [-87, 88]; x is
 * clamped to that range (exp(-87) = 1.6e-38 stands for 0 next to the terms it is added to). */
static inline float exp_poly(float x) {
  x = x < -87.0f ? -87.0f : x > 88.0f ? 88.0f : x;
  float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = x - n * 0.693359375f - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t e = ((int32_t)n + 127) << 23;
  float scale;
  memcpy(&scale, &e, sizeof scale);
  return p * scale;
}

/* tanh(u) = 1 - 2 / (1 + e^(2u)): absolute error ~1e-7 (what the GELU needs next to 1 + t). */
static inline float tanh_poly(float u) { return 1.0f - 2.0f / (1.0f + exp_poly(2.0f * u)); }

#define GELU_K 0.7978845608028654f /* sqrt(2 / pi) */

GPT_VEC static void gelu_fwd(float *restrict out, const float *restrict inp, size_t n) {
  for (size_t i = 0; i < n; i++) {
    float x = inp[i];
    out[i] = 0.5f * x * (1.0f + tanh_poly(GELU_K * (x + 0.044715f * x * x * x)));
  }
}

/* d (in place: the output's gradient in, the input's out) of the tanh GELU at inp. */
GPT_VEC static void gelu_bwd(float *restrict d, const float *restrict inp, size_t n) {
  for (size_t i = 0; i < n; i++) {
    float x = inp[i], u = GELU_K * (x + 0.044715f * x * x * x), t = tanh_poly(u);
    float du = GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
    d[i] *= 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
  }
}

/* Causal softmax of rows r0 .. r1-1 of P (row stride T, already scaled): row i over columns
 * 0 .. i, zeros in i+1 .. r1-1. */
GPT_VEC static void softmax_causal(float *restrict P, int r0, int r1, int T) {
  for (int i = r0; i < r1; i++) {
    float *row = P + (size_t)i * T, mx = row[0], s = 0.0f;
#pragma omp simd reduction(max : mx)
    for (int j = 0; j <= i; j++) mx = row[j] > mx ? row[j] : mx;
    for (int j = 0; j <= i; j++) row[j] = exp_poly(row[j] - mx);
#pragma omp simd reduction(+ : s)
    for (int j = 0; j <= i; j++) s += row[j];
    float inv = 1.0f / s;
    for (int j = 0; j <= i; j++) row[j] *= inv;
    for (int j = i + 1; j < r1; j++) row[j] = 0.0f;
  }
}

/* Its backward on rows r0 .. r1-1: dS = P (dP - rowsum(P dP)) in place of dP. */
GPT_VEC static void softmax_causal_bwd(float *restrict dS, const float *restrict P, int r0, int r1,
                                       int T) {
  for (int i = r0; i < r1; i++) {
    const float *p = P + (size_t)i * T;
    float *d = dS + (size_t)i * T, s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int j = 0; j <= i; j++) s += p[j] * d[j];
    for (int j = 0; j <= i; j++) d[j] = p[j] * (d[j] - s);
    for (int j = i + 1; j < r1; j++) d[j] = 0.0f;
  }
}

/* Causal self-attention, one (sequence, head) at a time: S = Q K^T scaled (cblas on the
 * strided q and k columns of the qkv rows, no copies), a causal softmax into P, Y = P V into the
 * head's columns of atty. Only the lower block triangle is computed: row tiles of ATT_TILE,
 * tile [r0, r1) against columns [0, r1) (at T = 256 that is 10/16 of the full T x T products);
 * entries above the diagonal inside a tile are set to 0, those right of it are never read. */
#define ATT_TILE 64

static void attention_fwd(gpt_t *m, gpt_block_act_t *a, int B) {
  const int T = m->cfg.seq, C = m->cfg.dim, H = m->cfg.heads, hs = C / H, C3 = 3 * C;
  const float scale = 1.0f / sqrtf((float)hs);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++) {
      const float *q = a->qkv + (size_t)b * T * C3 + (size_t)h * hs, *k = q + C, *v = q + 2 * C;
      float *P = a->att + ((size_t)b * H + h) * T * T;
      float *y = a->atty + (size_t)b * T * C + (size_t)h * hs;
      for (int r0 = 0; r0 < T; r0 += ATT_TILE) {
        int r1 = r0 + ATT_TILE < T ? r0 + ATT_TILE : T;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, r1, hs, scale,
                    q + (size_t)r0 * C3, C3, k, C3, 0.0f, P + (size_t)r0 * T, T);
        softmax_causal(P, r0, r1, T);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, hs, r1, 1.0f,
                    P + (size_t)r0 * T, T, v, C3, 0.0f, y + (size_t)r0 * C, C);
      }
    }
}

/* Backward of attention_fwd: datty (N x C) -> dqkv (N x 3C, every element written). Row tiles
 * give dP = dY V^T, the softmax backward dS and dQ = dS K; column tiles [c0, c1) give dV = P^T dY
 * and dK = dS^T Q over the rows [c0, T) that attend to them. */
static void attention_bwd(gpt_t *m, const gpt_block_act_t *a, const float *datty, float *dqkv, int B) {
  const int T = m->cfg.seq, C = m->cfg.dim, H = m->cfg.heads, hs = C / H, C3 = 3 * C;
  const float scale = 1.0f / sqrtf((float)hs);
  float *dS = m->dP;
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++) {
      size_t qoff = (size_t)b * T * C3 + (size_t)h * hs;
      const float *q = a->qkv + qoff, *k = q + C, *v = q + 2 * C;
      float *dq = dqkv + qoff, *dk = dq + C, *dv = dq + 2 * C;
      const float *P = a->att + ((size_t)b * H + h) * T * T;
      const float *dY = datty + (size_t)b * T * C + (size_t)h * hs;
      for (int r0 = 0; r0 < T; r0 += ATT_TILE) {
        int r1 = r0 + ATT_TILE < T ? r0 + ATT_TILE : T;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, r1, hs, 1.0f,
                    dY + (size_t)r0 * C, C, v, C3, 0.0f, dS + (size_t)r0 * T, T);
        softmax_causal_bwd(dS, P, r0, r1, T);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, hs, r1, scale,
                    dS + (size_t)r0 * T, T, k, C3, 0.0f, dq + (size_t)r0 * C3, C3);
      }
      for (int c0 = 0; c0 < T; c0 += ATT_TILE) {
        int c1 = c0 + ATT_TILE < T ? c0 + ATT_TILE : T;
        size_t o = (size_t)c0 * T + (size_t)c0;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, c1 - c0, hs, T - c0, 1.0f, P + o, T,
                    dY + (size_t)c0 * C, C, 0.0f, dv + (size_t)c0 * C3, C3);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, c1 - c0, hs, T - c0, scale, dS + o, T,
                    q + (size_t)c0 * C3, C3, 0.0f, dk + (size_t)c0 * C3, C3);
      }
    }
}

/* Softmax of each logits row in place (N x V) and its cross-entropy at the target; returns the
 * sum of the N losses. */
GPT_VEC static double cross_entropy(float *restrict probs, const int32_t *restrict targets,
                                    float *restrict losses, size_t N, size_t V) {
  double loss = 0.0;
  for (size_t r = 0; r < N; r++) {
    float *row = probs + r * V, mx = row[0], s = 0.0f;
#pragma omp simd reduction(max : mx)
    for (size_t j = 0; j < V; j++) mx = row[j] > mx ? row[j] : mx;
    float zt = row[targets[r]] - mx;
    for (size_t j = 0; j < V; j++) row[j] = exp_poly(row[j] - mx);
#pragma omp simd reduction(+ : s)
    for (size_t j = 0; j < V; j++) s += row[j];
    float inv = 1.0f / s;
    for (size_t j = 0; j < V; j++) row[j] *= inv;
    losses[r] = logf(s) - zt;
    loss += losses[r];
  }
  return loss;
}

/* dlogits = (probs - onehot(target)) * scale, in place. */
GPT_VEC static void cross_entropy_bwd(float *restrict probs, const int32_t *restrict targets,
                                      size_t N, size_t V, float scale) {
  for (size_t r = 0; r < N; r++) {
    float *row = probs + r * V;
    row[targets[r]] -= 1.0f;
    for (size_t j = 0; j < V; j++) row[j] *= scale;
  }
}

/* ---- forward / backward --------------------------------------------------------------- */

/* Block l's forward pass from its input (the previous block's output, or the embeddings). */
static void block_fwd(gpt_t *m, int l, int batch) {
  const size_t C = (size_t)m->cfg.dim, N = (size_t)batch * (size_t)m->cfg.seq;
  gpt_block_act_t *a = &m->act[l];
  const float *x = l ? m->act[l - 1].res2 : m->x0;
  float *const *P = m->param + gpt_tensor(l, 0);
  layernorm_fwd(a->ln1, a->ln1_mean, a->ln1_rstd, x, P[GPT_LN1_W], P[GPT_LN1_B], N, C);
  linear_fwd(m, a->qkv, a->ln1, P[GPT_QKV_W], P[GPT_QKV_B], N, C, 3 * C);
  attention_fwd(m, a, batch);
  linear_fwd(m, a->res1, a->atty, P[GPT_PROJ_W], P[GPT_PROJ_B], N, C, C);
  add_to(a->res1, x, N * C);
  layernorm_fwd(a->ln2, a->ln2_mean, a->ln2_rstd, a->res1, P[GPT_LN2_W], P[GPT_LN2_B], N, C);
  linear_fwd(m, a->fch, a->ln2, P[GPT_FC_W], P[GPT_FC_B], N, C, 4 * C);
  gelu_fwd(a->fcg, a->fch, 4 * N * C);
  linear_fwd(m, a->res2, a->fcg, P[GPT_FCPROJ_W], P[GPT_FCPROJ_B], N, 4 * C, C);
  add_to(a->res2, a->res1, N * C);
}

double gpt_forward(gpt_t *m, const int32_t *tokens, const int32_t *targets, int batch) {
  const size_t C = (size_t)m->cfg.dim, T = (size_t)m->cfg.seq, V = (size_t)m->cfg.vocab;
  const size_t L = (size_t)m->cfg.layers, N = (size_t)batch * T;
  m->batch = batch;
  if (m->bf16) bf16_round(m, m->wbf, m->param_block, m->total); /* the weights of this step */
  memcpy(m->tokens, tokens, sizeof(int32_t) * N);
  memcpy(m->targets, targets, sizeof(int32_t) * N);
  const float *wte = m->param[0], *wpe = m->param[1];
  for (size_t r = 0; r < N; r++) {
    const float *e = wte + (size_t)tokens[r] * C, *p = wpe + (r % T) * C;
    float *x = m->x0 + r * C;
    for (size_t i = 0; i < C; i++) x[i] = e[i] + p[i];
  }
  for (size_t l = 0; l < L; l++) block_fwd(m, (int)l, batch);
  const float *x = L ? m->act[L - 1].res2 : m->x0;
  size_t np = m->nparams;
  layernorm_fwd(m->lnf, m->lnf_mean, m->lnf_rstd, x, m->param[np - 2], m->param[np - 1], N, C);
  linear_fwd(m, m->probs, m->lnf, wte, NULL, N, C, V); /* logits, then probabilities in place */
  double loss = cross_entropy(m->probs, targets, m->losses, N, V);
  return loss / (double)N;
}

/* Gradients are reported in exactly the reverse of the registration order (each bias before its
 * weight), the order a reducer builds its buckets in: its first-step rebuild from the observed
 * order then keeps them (reporting weights first made it allocate every bucket again and copy
 * the gradients over, 328 MB of node-shared memory at GPT-2 small size, for buckets that
 * differed by 0.01 MB). */
#define READY(i)                         \
  do {                                   \
    if (ready) ready((i), ctx);          \
  } while (0)

void gpt_backward(gpt_t *m, int acc, gpt_grad_ready_fn ready, void *ctx) {
  const size_t C = (size_t)m->cfg.dim, T = (size_t)m->cfg.seq, V = (size_t)m->cfg.vocab;
  const int L = m->cfg.layers, B = m->batch;
  const size_t N = (size_t)B * T, np = m->nparams;
  float **G = m->grad;
  /* dlogits = (probs - onehot) * loss_scale / N, in place */
  cross_entropy_bwd(m->probs, m->targets, N, V, m->loss_scale / (float)N);
  const float *xL = L ? m->act[L - 1].res2 : m->x0;
  /* head: dlnf = dlogits @ wte (into dC), dwte (+)= dlogits^T @ lnf (the rest comes last) */
  linear_bwd(m, m->dC, 0.0f, G[0], NULL, m->probs, m->lnf, m->param[0], N, C, V, acc);
  layernorm_bwd(m->dres, 1, G[np - 2], G[np - 1], m->dC, xL, m->param[np - 2], m->lnf_mean,
                m->lnf_rstd, N, C, acc);
  READY(np - 1);
  READY(np - 2);
  for (int l = L - 1; l >= 0; l--) {
    /* the shared set holds the last block's activations from the forward pass */
    if (m->recompute && l < L - 1) block_fwd(m, l, B);
    const gpt_block_act_t *a = &m->act[l];
    const float *x = l ? m->act[l - 1].res2 : m->x0;
    size_t i0 = gpt_tensor(l, 0);
    float *const *P = m->param + i0;
    float **g = G + i0;
    /* MLP: dres holds d(res2) */
    linear_bwd(m, m->d4C, 0.0f, g[GPT_FCPROJ_W], g[GPT_FCPROJ_B], m->dres, a->fcg, P[GPT_FCPROJ_W],
               N, 4 * C, C, acc);
    READY(i0 + GPT_FCPROJ_B);
    READY(i0 + GPT_FCPROJ_W);
    gelu_bwd(m->d4C, a->fch, 4 * N * C);
    linear_bwd(m, m->dC, 0.0f, g[GPT_FC_W], g[GPT_FC_B], m->d4C, a->ln2, P[GPT_FC_W], N, C, 4 * C, acc);
    READY(i0 + GPT_FC_B);
    READY(i0 + GPT_FC_W);
    layernorm_bwd(m->dres, 0, g[GPT_LN2_W], g[GPT_LN2_B], m->dC, a->res1, P[GPT_LN2_W],
                  a->ln2_mean, a->ln2_rstd, N, C, acc);
    READY(i0 + GPT_LN2_B);
    READY(i0 + GPT_LN2_W);
    /* attention: dres holds d(res1) */
    linear_bwd(m, m->dC, 0.0f, g[GPT_PROJ_W], g[GPT_PROJ_B], m->dres, a->atty, P[GPT_PROJ_W], N, C,
               C, acc);
    READY(i0 + GPT_PROJ_B);
    READY(i0 + GPT_PROJ_W);
    attention_bwd(m, a, m->dC, m->dqkv, B);
    linear_bwd(m, m->dC, 0.0f, g[GPT_QKV_W], g[GPT_QKV_B], m->dqkv, a->ln1, P[GPT_QKV_W], N, C,
               3 * C, acc);
    READY(i0 + GPT_QKV_B);
    READY(i0 + GPT_QKV_W);
    layernorm_bwd(m->dres, 0, g[GPT_LN1_W], g[GPT_LN1_B], m->dC, x, P[GPT_LN1_W], a->ln1_mean,
                  a->ln1_rstd, N, C, acc);
    READY(i0 + GPT_LN1_B);
    READY(i0 + GPT_LN1_W);
  }
  /* embeddings: dres holds d(x0) */
  float *dwte = G[0], *dwpe = G[1];
  if (!acc) memset(dwpe, 0, sizeof(float) * T * C);
  for (size_t r = 0; r < N; r++) {
    const float *d = m->dres + r * C;
    float *e = dwte + (size_t)m->tokens[r] * C, *p = dwpe + (r % T) * C;
    for (size_t i = 0; i < C; i++) e[i] += d[i], p[i] += d[i];
  }
  READY(1);
  READY(0);
}
