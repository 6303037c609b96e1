/* ddp_bench: the W-DDP workload (MLP 784-2048-2048-2048-10, SGD, per-rank batch 64,
 * synthetic data, OpenBLAS on one thread per rank). In one run it times --steps steps without
 * any communication (compute only), then the same number with the reducer, and reports
 * efficiency = compute_only_step / ddp_step, exposed communication and samples/s.
 * --sweep runs several reducer configurations side by side (overlap on/off, algorithms,
 * bucket caps, views off, hooks) against the same compute-only baseline.
 * Every configuration is also checked once: one DDP step against a single-process reference
 * step on the concatenated batch of all ranks (as tests/reducer_equiv.c): the averaged
 * gradients must match the reference's within a tolerance (f32: 1e-4 relative, fp16/bf16
 * hooks: 1e-2), else the row says WRONG and the exit status is 1. A reducer that returned a
 * sum, or one rank's gradient, fails here even though every rank agrees.
 *
 * --optim adamw trains with AdamW instead of plain SGD; --zero 0,1,2 runs the reducer unsharded,
 * ZeRO-1 (reduce-scatter, shard-only update and state, parameter allgather) and ZeRO-2 (also the
 * gradient pages outside the shard released between steps) side by side, and reports each
 * configuration's optimizer-state bytes per rank and the process's peak resident memory
 * (VmHWM, max over ranks; per process, so bench/zero_memory.sh runs each mode in its own
 * mpirun for the memory figures).
 *
 *   mpirun -np 2 build/apps/ddp_bench --steps 30 [-J ddp_bench.json]
 *   mpirun -np 2 build/apps/ddp_bench --steps 30 --sweep -J sweep.json
 *   mpirun -np 2 build/apps/ddp_bench --steps 30 --optim adamw --zero 0,1,2 -J zero.json */
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app_blas.h"
#include "app_check.h"
#include "app_opts.h"
#include "ddp.h"
#include "train_model.h"
#include "train_optim.h"
#include "train_util.h"

typedef struct cfg {
  char label[48];
  double cap_mb, first_mb;
  ddp_algo_t algo;
  int overlap, views, predivided;
  ddp_hook_t hook;
  int zero; /* reducer opts.shard: 0, 1 (ZeRO-1) or 2 (ZeRO-2) */
} cfg_t;

typedef struct result {
  cfg_t cfg;
  double compute_min_ms, step_min_ms; /* best single step (least disturbed by other load) */
  double compute_mean_ms, step_mean_ms;
  double compute_ms, step_ms, exposed_ms, comm_ms, hidden, samples_per_s, efficiency;
  size_t nbuckets, wire_bytes;
  int wrong; /* parameters differ across ranks at the end */
  double grad_err; /* checked step: worst relative L2 error of a gradient vs the reference */
  double grad_tol;
  int step_wrong;  /* checked step: gradients or parameters differ from the reference */
  char algo_used[32];
  size_t state_bytes; /* optimizer state of this configuration, max over ranks */
} result_t;

typedef struct bench {
  ddp_comm_t *comm;
  int rank, size;
  int steps, warmup, batch, device_cuda;
  int no_check; /* --no-check: skip the reference step (memory runs: /usr/bin/time's peak is then
                   the training's, not the reference model's) */
  int sizes[16], nsizes;
  train_model_t m;
  train_optim_kind_t optim;   /* plain SGD (default) or AdamW */
  train_optim_t *opt[16];     /* per configuration; sharded ones created at their first update */
  size_t begin[16][TM_MAX_PARAMS], count[16][TM_MAX_PARAMS]; /* the ranges each one updates */
  ddp_reducer_t *rs[16];      /* the configurations' reducers */
  float *zgrad[TM_MAX_PARAMS]; /* AdamW: all-zero gradients (one calloc'd block, never written,
                                 so never resident) for the compute-only step's update */
  float *zblock;              /* that block */
  long peak_rss_kib;          /* VmHWM after the timed steps (before the checks), max over ranks */
  const train_model_t *ref;   /* check_step: the reference gradients, compared right after finish */
  double ref_err;
  float *x;
  int *labels;
  float lr;
  ddp_reducer_t *r; /* while a DDP phase runs */
  /* --device cuda: parameters and gradient buckets in device memory; the MLP computes on the
   * host, each gradient is copied to the device (H2D) before grad_ready and the averaged
   * gradients come back (D2H) after finish, so this measures the device bucket path. */
  ddp_stream_t *stream;
  void *dparam[32], *dgrad[32];
  double compute_ms;
} bench_t;

static void usage(void) {
  fprintf(stderr,
          "usage: ddp_bench [--steps N] [--warmup N] [--batch B] [--layers 784,2048,...]\n"
          "                 [--bucket-cap-mb MB] [--first-bucket-mb MB] [--algo NAME] [--hook none|fp16|bf16]\n"
          "                 [--no-overlap] [--no-views] [--no-predivide] [--sweep] [--device host|cuda] [-J file.json]\n"
          "                 [--optim sgd|adamw] [--zero 0|1|2[,...]] [--no-check]\n");
}

/* --layers 784,2048,...,10: at least two sizes, each in 1 .. 2^20, at most 16. */
static int parse_layers(const char *s, void *target) {
  bench_t *b = target;
  b->nsizes = 0;
  while (*s && b->nsizes < 16) {
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || errno || v < 1 || v > 1 << 20) return -1;
    b->sizes[b->nsizes++] = (int)v;
    if (*end == ',') end++;
    else if (*end) return -1;
    s = end;
  }
  return b->nsizes >= 2 && !*s ? 0 : -1;
}

static int parse_hook(const char *s, void *target) {
  return ddp_hook_parse(s, (ddp_hook_t *)target) == DDP_OK ? 0 : -1;
}

static int parse_algo(const char *s, void *target) {
  return ddp_algo_parse(s, (ddp_algo_t *)target) == DDP_OK ? 0 : -1;
}

/* The command line beyond bench_t: the base configuration and what to run beside it. */
typedef struct cli {
  cfg_t base;
  const char *json;
  int sweep;
  int zeros[3], nzero; /* --zero 0,1,2: one configuration per mode */
} cli_t;

static int parse_zero_list(const char *v, void *target) {
  cli_t *c = target;
  c->nzero = 0;
  for (const char *q = v; *q;) {
    if (*q < '0' || *q > '2' || c->nzero == 3) return -1;
    c->zeros[c->nzero++] = *q - '0';
    q++;
    if (*q == ',') q++;
    else if (*q) return -1;
  }
  return c->nzero ? 0 : -1;
}

/* Returns 0 ok, 1 help printed, -1 error (said, with the usage, on every process: this runs
 * before MPI starts). */
static int parse_args(int argc, char **argv, bench_t *b, cli_t *c) {
  b->steps = 30, b->warmup = 5, b->batch = 64, b->lr = 0.01f;
  static const int mlp[] = {784, 2048, 2048, 2048, 10};
  memcpy(b->sizes, mlp, sizeof mlp);
  b->nsizes = 5;
  /* The loss carries 1/world (predivided) by default: the same averaged gradients without a
   * division pass over the buckets; --no-predivide makes the reducer divide instead. */
  c->base = (cfg_t){"ddp", 10.0, 1.0, DDP_ALGO_AUTO, 1, 1, 1, DDP_HOOK_NONE, 0};
  static const char *const devices[] = {"host", "cuda", NULL}, *const optims[] = {"sgd", "adamw", NULL};
  static const int optim_ids[] = {TRAIN_OPTIM_SGD, TRAIN_OPTIM_ADAMW};
  int optim = TRAIN_OPTIM_SGD;
  const app_opt_t table[] = {
      APP_INT("--steps", &b->steps, 1, 1000000), APP_INT("--warmup", &b->warmup, 1, 1000000),
      APP_INT("--batch", &b->batch, 1, 1 << 20),
      APP_CUSTOM("--layers", b, parse_layers, "a list of 2 to 16 sizes such as 784,2048,10"),
      APP_DOUBLE("--bucket-cap-mb", &c->base.cap_mb, 1e-6, 65536.0),
      APP_DOUBLE("--first-bucket-mb", &c->base.first_mb, 1e-6, 65536.0),
      APP_CUSTOM("--algo", &c->base.algo, parse_algo, "an allreduce algorithm"),
      APP_CUSTOM("--hook", &c->base.hook, parse_hook, "none, fp16 or bf16"), APP_ENUM("--device", &b->device_cuda, devices, NULL),
      APP_STR("-J", &c->json), APP_ENUM("--optim", &optim, optims, optim_ids),
      APP_CUSTOM("--zero", c, parse_zero_list, "a list of ZeRO modes such as 0,1,2"),
      APP_FLAG("--no-overlap", &c->base.overlap, 0), APP_FLAG("--no-views", &c->base.views, 0),
      APP_FLAG("--predivide", &c->base.predivided, 1), APP_FLAG("--no-predivide", &c->base.predivided, 0),
      APP_FLAG("--sweep", &c->sweep, 1), APP_FLAG("--no-check", &b->no_check, 1), APP_OPTS_END};
  int pr = app_opts_parse("ddp_bench", table, argc, argv, stderr);
  if (pr != APP_OPTS_OK) usage();
  b->optim = (train_optim_kind_t)optim;
  return pr;
}

static double max_over_ranks(double v) {
  double o = v;
  MPI_Allreduce(&v, &o, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return o;
}

/* The model's GEMM phases on the timeline (DDP_TIMELINE; no-ops otherwise), beside the
 * library's reducer and collective events: "fwd 1", "dW 2", "dX 2", "sgd". */
static void on_trace(void *ctx, int begin, const char *what, int layer) {
  bench_t *b = ctx;
  char name[16];
  if (layer >= 0) snprintf(name, sizeof name, "%s %d", what, layer);
  else snprintf(name, sizeof name, "%s", what);
  if (begin) ddp_timeline_begin(b->comm, name, "compute", NULL);
  else ddp_timeline_end(b->comm, name, "compute", NULL);
}

/* Configuration k's optimizer over the ranges it updates: every element, or (zero) this rank's
 * shard, known once its reducer finished a synced step (-1 until then: no update yet). */
static int ensure_opt(bench_t *b, int k, const cfg_t *c) {
  if (b->opt[k]) return 0;
  for (size_t i = 0; i < b->m.nparams; i++) {
    b->begin[k][i] = 0, b->count[k][i] = b->m.count[i];
    if (c->zero && ddp_reducer_shard_range(b->rs[k], i, &b->begin[k][i], &b->count[k][i]) != DDP_OK)
      return -1; /* before the first finish */
  }
  train_optim_opts_t oo;
  if (b->optim == TRAIN_OPTIM_ADAMW) train_optim_opts_adamw(&oo);
  else train_optim_opts_default(&oo), oo.momentum = 0.0f; /* plain SGD: p -= lr g */
  if (train_optim_create(&oo, b->count[k], b->m.nparams, &b->opt[k]) != 0) {
    fprintf(stderr, "ddp_bench: out of memory for the optimizer\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return 0;
}

/* Worst relative L2 error of the averaged gradients against b->ref over the ranges
 * configuration k updates (with zero only its shard's gradients are averaged). */
static double grad_rel_err_k(const bench_t *b, int k, const cfg_t *c) {
  double worst = 0.0;
  for (size_t i = 0; i < b->m.nparams; i++) {
    size_t lo = 0, n = b->m.count[i];
    if (c->zero) APP_CHECK(ddp_reducer_shard_range(b->rs[k], i, &lo, &n));
    double d = 0.0, r = 0.0;
    for (size_t e = lo; e < lo + n; e++) {
      double x = b->m.grad[i][e], y = b->ref->grad[i][e];
      d += (x - y) * (x - y);
      r += y * y;
    }
    double e = sqrt(d) / (sqrt(r) > 1e-30 ? sqrt(r) : 1e-30);
    worst = e > worst ? e : worst;
  }
  return worst;
}

static void on_ready(size_t i, void *ctx) {
  bench_t *b = ctx;
  ddp_status_t st = DDP_OK;
  if (b->device_cuda) {
    void *g = NULL;
    st = ddp_reducer_grad(b->r, i, &g);
    if (st == DDP_OK) st = ddp_memcpy_async(b->comm, g, b->m.grad[i], b->m.count[i] * sizeof(float), b->stream);
  }
  if (st == DDP_OK) st = ddp_reducer_grad_ready(b->r, i);
  if (st != DDP_OK) {
    fprintf(stderr, "grad_ready(%zu): %s\n", i, ddp_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

/* One training step of configuration k; with a reducer, gradients are exchanged while backward
 * runs (overlap) or all at once after it; with zero the update covers this rank's shard and the
 * parameter allgather is waited for inside the step (charged to it, not overlapped). */
static int step(bench_t *b, const cfg_t *c, int k, float lr) {
  /* predivided: the loss carries 1/world, so the reducer only sums */
  b->m.loss_scale = c->predivided ? 1.0f / (float)b->size : 1.0f;
  tm_forward(&b->m, b->x, b->labels, b->batch);
  if (b->r && c->overlap) {
    tm_backward(&b->m, b->x, b->labels, b->batch, 0, on_ready, b);
  } else {
    tm_backward(&b->m, b->x, b->labels, b->batch, 0, NULL, NULL);
    if (b->r) /* same order as backward produces them: last layer first */
      for (size_t i = b->m.nparams; i-- > 0;) on_ready(i, b);
  }
  if (b->r) {
    void *g[TM_MAX_PARAMS];
    APP_CHECK(ddp_reducer_finish(b->r));
    /* Views move once, when the buckets are rebuilt after the first iteration. */
    APP_CHECK(ddp_reducer_grads(b->r, g, b->m.nparams));
    if (b->device_cuda) {
      for (size_t i = 0; i < b->m.nparams; i++)
        APP_CHECK(ddp_memcpy_async(b->comm, b->m.grad[i], g[i], b->m.count[i] * sizeof(float), b->stream));
      APP_CHECK(ddp_stream_synchronize(b->comm, b->stream));
    } else {
      tm_set_grads(&b->m, g);
    }
    if (b->ref) b->ref_err = grad_rel_err_k(b, k, c);
  }
  if (ensure_opt(b, k, c) == 0) {
    /* The compute-only step (no reducer, lr 0) of a stateful optimizer updates on zero
     * gradients: its local, unaveraged ones would make the state differ between ranks. */
    float *const *g = !b->r && b->zgrad[0] ? b->zgrad : b->m.grad;
    on_trace(b, 1, "sgd", -1);
    train_optim_step_at(b->opt[k], b->m.param, g, b->begin[k], lr);
    on_trace(b, 0, "sgd", -1);
  }
  if (b->r && c->zero) {
    APP_CHECK(ddp_reducer_allgather_params(b->r));
    APP_CHECK(ddp_reducer_param_wait(b->r, SIZE_MAX));
  }
  return 0;
}

/* Gradient buffers of configuration c for the host model: the reducer's views, or the model's
 * own buffers (views off, and --device cuda where the model computes on the host). */
static int point_grads(bench_t *b, ddp_reducer_t *r, const cfg_t *c) {
  void *g[TM_MAX_PARAMS];
  if (!c->views || b->device_cuda) {
    tm_set_grads(&b->m, NULL);
    return 0;
  }
  APP_CHECK(ddp_reducer_grads(r, g, b->m.nparams));
  tm_set_grads(&b->m, g);
  return 0;
}

static int create_reducer(bench_t *b, const cfg_t *c) {
  ddp_param_t p[32];
  char names[32][32];
  for (size_t i = 0; i < b->m.nparams; i++) {
    snprintf(names[i], sizeof names[i], "fc%zu.%s", i / 2, i % 2 ? "bias" : "weight");
    tm_set_grad(&b->m, i, NULL);
    p[i] = (ddp_param_t){.data = b->m.param[i], .count = b->m.count[i], .dtype = DDP_F32,
                         .mem = DDP_MEM_HOST, .name = names[i], .grad = b->m.grad[i]};
    if (b->device_cuda) {
      size_t bytes = b->m.count[i] * sizeof(float);
      if (!b->dparam[i]) APP_CHECK(ddp_device_malloc(b->comm, bytes, &b->dparam[i]));
      if (!b->dgrad[i] && !c->views) APP_CHECK(ddp_device_malloc(b->comm, bytes, &b->dgrad[i]));
      APP_CHECK(ddp_memcpy_async(b->comm, b->dparam[i], b->m.param[i], bytes, b->stream));
      p[i].data = b->dparam[i];
      p[i].grad = b->dgrad[i];
      p[i].mem = DDP_MEM_CUDA;
    }
  }
  if (b->device_cuda) APP_CHECK(ddp_stream_synchronize(b->comm, b->stream));
  ddp_reducer_opts_t o;
  APP_CHECK(ddp_reducer_opts_default(&o));
  o.bucket_cap_mb = c->cap_mb;
  o.first_bucket_mb = c->first_mb;
  o.algo = c->algo;
  o.grad_as_bucket_view = c->views;
  o.hook = c->hook;
  o.predivided = c->predivided;
  o.shard = c->zero;
  o.stream = b->stream;
  APP_CHECK(ddp_reducer_create(b->comm, p, b->m.nparams, &o, &b->r));
  if (b->device_cuda) { /* rank 0's parameters, broadcast on the device, back to the host model */
    for (size_t i = 0; i < b->m.nparams; i++)
      APP_CHECK(ddp_memcpy_async(b->comm, b->m.param[i], b->dparam[i], b->m.count[i] * sizeof(float), b->stream));
    APP_CHECK(ddp_stream_synchronize(b->comm, b->stream));
    return 0;
  }
  return c->views ? point_grads(b, b->r, c) : 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median of n values (sorts them). */
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* One DDP step of configuration k checked against a single process that takes the same step
 * on the concatenated batch of every rank (samples 0 .. size*batch-1, the order of the ranks'
 * batches): the averaged gradients within `tol` (relative L2 per tensor, over this rank's shard
 * with zero; compared right after finish, before the allgather reuses the buckets) and, with
 * plain SGD, the parameters after the update within 1e-5 relative (as tests/reducer_equiv.c;
 * not with a fp16/bf16 hook, whose rounding the gradient tolerance covers; AdamW's parameters
 * are covered by ddp_train's --deterministic CRC tests). Every rank computes the reference and
 * every rank gets the verdict. Returns 0 when both match. */
static int check_step(bench_t *b, int k, const cfg_t *c, double tol, double *err) {
  size_t total = b->m.total;
  int in = b->sizes[0], classes = b->sizes[b->nsizes - 1], n = b->batch * b->size;
  train_model_t ref;
  char msg[256];
  float *x = malloc(sizeof(float) * (size_t)n * (size_t)in);
  int *y = malloc(sizeof(int) * (size_t)n);
  if (!x || !y || tm_create_mlp(&ref, b->sizes, b->nsizes, NULL, n, 0, msg, sizeof msg) != 0) {
    fprintf(stderr, "ddp_bench: out of memory (reference model)\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (int s = 0; s < n; s++) train_synth_sample(7, (uint64_t)s, in, classes, x + (size_t)s * in, &y[s]);
  memcpy(ref.param_block, b->m.param_block, total * sizeof(float));
  tm_forward(&ref, x, y, n);
  tm_backward(&ref, x, y, n, 0, NULL, NULL);
  b->r = b->rs[k];
  b->ref = &ref;
  b->ref_err = 1e30;
  int failed = point_grads(b, b->rs[k], c) != 0;
  MPI_Barrier(MPI_COMM_WORLD);
  if (failed || step(b, c, k, b->lr) != 0) {
    free(x), free(y), tm_free(&ref);
    return 1;
  }
  b->ref = NULL;
  double res[2] = {b->ref_err, 0.0}; /* worst gradient error, parameters out of tolerance */
  if (b->optim == TRAIN_OPTIM_SGD && c->hook == DDP_HOOK_NONE) {
    for (size_t e = 0; e < total; e++) ref.param_block[e] -= b->lr * ref.grad_block[e];
    for (size_t e = 0; e < total; e++) {
      double p = b->m.param_block[e], q = ref.param_block[e];
      res[1] += fabs(p - q) > 1e-5 * fmax(fabs(q), 1e-2);
    }
  }
  tm_free(&ref);
  free(x);
  free(y);
  MPI_Allreduce(MPI_IN_PLACE, res, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  *err = res[0];
  return !(res[0] <= tol) || res[1] > 0;
}

/* Peak resident memory of this process (VmHWM in /proc/self/status), in KiB; 0 if unknown. */
static long peak_rss_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kib = 0;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "VmHWM: %ld kB", &kib) == 1) break;
  if (f) fclose(f);
  return kib;
}

/* The measured step times of run_all: sums, minima and every step (for medians, robust to the
 * odd step another process disturbs); the compute-only step's and each configuration's. */
typedef struct timings {
  double comp, comp_min, sum[16], mins[16];
  double *tc, *td; /* [step], [configuration][step] */
} timings_t;

/* Iteration s's compute-only step, on configuration 0's gradient buffers. Its SGD runs with lr
 * 0 (same memory traffic) so that the ranks' parameters stay identical. */
static int time_compute_step(bench_t *b, const cfg_t *cfgs, int n, int s, timings_t *t) {
  /* With one configuration on its buffers (views: the buckets, so the model's own gradient
   * memory is never touched, see the RSS figures); with several, on the model's own buffers,
   * so that no configuration shares its buffers with the baseline. */
  if (n == 1 && point_grads(b, b->rs[0], &cfgs[0]) != 0) return 1;
  if (n > 1) tm_set_grads(&b->m, NULL);
  b->r = NULL;
  /* Untimed barrier: ranks drift apart in a step without communication, and that drift must
   * not be charged to the DDP step that follows. */
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  ddp_timeline_begin(b->comm, "compute-only step", "bench", NULL);
  if (step(b, &cfgs[0], 0, 0.0f) != 0) return 1;
  ddp_timeline_end(b->comm, "compute-only step", "bench", NULL);
  double dt = MPI_Wtime() - t0;
  if (s >= 0) t->comp += dt, t->comp_min = dt < t->comp_min ? dt : t->comp_min, t->tc[s] = dt;
  return 0;
}

/* Iteration s's DDP step of configuration k. */
static int time_ddp_step(bench_t *b, const cfg_t *cfgs, int k, int s, timings_t *t) {
  b->r = b->rs[k];
  if (point_grads(b, b->rs[k], &cfgs[k]) != 0) return 1;
  MPI_Barrier(MPI_COMM_WORLD);
  double t1 = MPI_Wtime();
  char span[64];
  snprintf(span, sizeof span, "ddp step (%s)", cfgs[k].label);
  ddp_timeline_begin(b->comm, span, "bench", NULL);
  if (step(b, &cfgs[k], k, b->lr) != 0) return 1;
  ddp_timeline_end(b->comm, span, "bench", NULL);
  double dt = MPI_Wtime() - t1;
  if (s >= 0) t->sum[k] += dt, t->mins[k] = dt < t->mins[k] ? dt : t->mins[k], t->td[(size_t)k * b->steps + s] = dt;
  return 0;
}

/* Like nccl-tests' #wrong: 1 unless every rank ends with the same parameters. */
static int params_differ(const bench_t *b) {
  uint64_t h = 1469598103934665603ULL;
  const unsigned char *pb = (const unsigned char *)b->m.param_block;
  for (size_t k = 0; k < b->m.total * sizeof(float); k++) h = (h ^ pb[k]) * 1099511628211ULL;
  unsigned long long hv[2] = {h, ~h}, ho[2];
  MPI_Allreduce(hv, ho, 2, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  return !(ho[0] == h && ~ho[1] == h);
}

/* Configuration k's figures (the slowest rank's) and the algorithm its buckets ran. */
static int fill_result(bench_t *b, int k, const timings_t *t, double comp_mean, result_t *r) {
  const cfg_t *c = &r->cfg;
  double ms = max_over_ranks(median(t->td + (size_t)k * b->steps, b->steps) * 1e3);
  ddp_reducer_stats_t st;
  APP_CHECK(ddp_reducer_stats(b->rs[k], &st));
  r->state_bytes = (size_t)max_over_ranks((double)train_optim_state_bytes(b->opt[k]));
  r->compute_ms = b->compute_ms;
  r->compute_min_ms = max_over_ranks(t->comp_min * 1e3);
  r->compute_mean_ms = comp_mean;
  r->step_mean_ms = max_over_ranks(t->sum[k] * 1e3 / b->steps);
  r->step_min_ms = max_over_ranks(t->mins[k] * 1e3);
  r->step_ms = ms;
  r->exposed_ms = ms - b->compute_ms;
  r->comm_ms = max_over_ranks(st.comm_ms_avg);
  r->hidden = st.hidden_fraction;
  r->nbuckets = st.nbuckets;
  r->wire_bytes = st.wire_bytes;
  r->samples_per_s = (double)b->batch * b->size / (ms / 1e3);
  r->efficiency = b->compute_ms / ms;
  const char *name = "?";
  void *g0 = NULL;
  APP_CHECK(ddp_reducer_grad(b->rs[k], 0, &g0));
  ddp_coll_opts_t co;
  ddp_coll_opts_default(&co);
  co.algo = c->algo;
  co.mem = b->device_cuda ? DDP_MEM_CUDA : DDP_MEM_HOST;
  co.stream = b->stream;
  if (ddp_allreduce_choice(b->comm, g0, (size_t)(st.bucket_bytes_max / 4), DDP_F32, &co, &name) != DDP_OK)
    name = "?";
  snprintf(r->algo_used, sizeof r->algo_used, "%s%s%s", c->algo ? "" : "auto(", name, c->algo ? "" : ")");
  return 0;
}

/* All configurations run side by side: each measured iteration does one compute-only step and
 * one DDP step per configuration, in an order that rotates every iteration, so load from other
 * processes on the machine shifts every figure alike. Means over --steps, the slowest rank's. */
static int run_all(bench_t *b, const cfg_t *cfgs, int n, result_t *res) {
  for (int k = 0; k < n; k++) {
    memset(&res[k], 0, sizeof res[k]);
    res[k].cfg = cfgs[k];
    if (create_reducer(b, &cfgs[k]) != 0) return 1;
    b->rs[k] = b->r;
  }
  timings_t t = {.comp = 0.0, .comp_min = 1e30};
  for (int k = 0; k < n; k++) t.mins[k] = 1e30;
  t.tc = calloc((size_t)b->steps, sizeof *t.tc);
  t.td = calloc((size_t)b->steps * (size_t)n, sizeof *t.td);
  if (!t.tc || !t.td) {
    fprintf(stderr, "ddp_bench: out of memory\n");
    return 1;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  for (int s = -b->warmup; s < b->steps; s++) {
    /* n + 1 runs per iteration, the compute-only step as run n; the order rotates every
     * iteration so no configuration always follows the same one. */
    for (int q = 0; q < n + 1; q++) {
      int k = (q + s + b->warmup) % (n + 1);
      if ((k == n ? time_compute_step(b, cfgs, n, s, &t) : time_ddp_step(b, cfgs, k, s, &t)) != 0) return 1;
    }
  }
  /* Peak resident memory of the training steps, before the checked steps add a reference model. */
  b->peak_rss_kib = (long)max_over_ranks((double)peak_rss_kib());
  /* One checked step per configuration, against the single-process reference. */
  for (int k = 0; k < n; k++) {
    res[k].grad_tol = cfgs[k].hook == DDP_HOOK_NONE ? 1e-4 : 1e-2;
    res[k].grad_err = -1.0; /* not checked */
    if (!b->no_check)
      res[k].step_wrong = check_step(b, k, &cfgs[k], res[k].grad_tol, &res[k].grad_err);
  }
  b->r = NULL;
  b->compute_ms = max_over_ranks(median(t.tc, b->steps) * 1e3);
  double comp_mean = max_over_ranks(t.comp * 1e3 / b->steps);
  int wrong = params_differ(b);
  for (int k = 0; k < n; k++) {
    res[k].wrong = wrong;
    if (fill_result(b, k, &t, comp_mean, &res[k]) != 0) return 1;
  }
  free(t.tc);
  free(t.td);
  for (int k = 0; k < n; k++) APP_CHECK(ddp_reducer_destroy(&b->rs[k]));
  b->r = NULL;
  tm_set_grads(&b->m, NULL);
  return 0;
}


static void print_row(const bench_t *b, const result_t *r) {
  printf("%-22s %3d %9zu %10.2f %9.2f %7.3f %8.3f %9.2f %8.2f %6.0f%% %9.0f %4zu %7.1f %-12s %-3s %-3s %-4s %8.1e%s\n",
         r->cfg.label, b->size, b->m.total, r->compute_ms, r->step_ms, r->efficiency,
         r->compute_min_ms / r->step_min_ms, r->exposed_ms,
         r->comm_ms, r->hidden * 100.0, r->samples_per_s, r->nbuckets, r->cfg.cap_mb, r->algo_used,
         r->cfg.overlap ? "on" : "off", r->cfg.views ? "on" : "off", ddp_hook_name(r->cfg.hook),
         r->grad_err, r->step_wrong || r->wrong ? " WRONG" : "");
}

static void json_row(FILE *fp, const bench_t *b, const result_t *r) {
  fprintf(fp,
          "{\"config\":\"%s\",\"np\":%d,\"params\":%zu,\"batch\":%d,\"steps\":%d,"
          "\"compute_only_ms\":%.4f,\"ddp_step_ms\":%.4f,\"efficiency\":%.4f,"
          "\"exposed_comm_ms\":%.4f,\"comm_ms\":%.4f,\"hidden_fraction\":%.4f,"
          "\"samples_per_s\":%.1f,\"bucket_cap_mb\":%g,\"first_bucket_mb\":%g,\"nbuckets\":%zu,"
          "\"wire_bytes\":%zu,\"algo\":\"%s\",\"overlap\":%s,\"views\":%s,\"hook\":\"%s\",\"device\":\"%s\","
          "\"predivided\":%s,\"compute_only_min_ms\":%.4f,\"ddp_step_min_ms\":%.4f,\"efficiency_best\":%.4f,"
          "\"compute_only_mean_ms\":%.4f,\"ddp_step_mean_ms\":%.4f,\"efficiency_mean\":%.4f,"
          "\"grad_rel_err\":%.3e,\"grad_tol\":%.1e,\"wrong\":%s,\"zero\":%d,\"optim\":\"%s\","
          "\"opt_state_bytes\":%zu,\"peak_rss_kib\":%ld}",
          r->cfg.label, b->size, b->m.total, b->batch, b->steps, r->compute_ms, r->step_ms,
          r->efficiency, r->exposed_ms, r->comm_ms, r->hidden, r->samples_per_s, r->cfg.cap_mb,
          r->cfg.first_mb, r->nbuckets, r->wire_bytes, r->algo_used, r->cfg.overlap ? "true" : "false",
          r->cfg.views ? "true" : "false", ddp_hook_name(r->cfg.hook), b->device_cuda ? "cuda" : "host",
          r->cfg.predivided ? "true" : "false", r->compute_min_ms, r->step_min_ms,
          r->compute_min_ms / r->step_min_ms, r->compute_mean_ms, r->step_mean_ms,
          r->compute_mean_ms / r->step_mean_ms, r->grad_err, r->grad_tol,
          r->wrong || r->step_wrong ? "true" : "false", r->cfg.zero, train_optim_name(b->optim),
          r->state_bytes, b->peak_rss_kib);
}

/* MPI, the device stream, the model, the AdamW zero gradients and this rank's synthetic batch.
 * Returns 0, or the exit status (--device cuda without a device: 2). */
static int setup(bench_t *b, int *argc, char ***argv) {
  APP_CHECK(ddp_init(argc, argv, MPI_COMM_NULL, &b->comm));
  if (b->device_cuda) {
    if (!ddp_device_available(b->comm)) {
      char why[128];
      ddp_device_describe(b->comm, why, sizeof why);
      fprintf(stderr, "ddp_bench: --device cuda needs a device: %s (DDP_DEVICE_EMULATE=1 emulates one)\n", why);
      ddp_finalize(&b->comm);
      return 2;
    }
    APP_CHECK(ddp_stream_create(b->comm, &b->stream));
  }
  APP_CHECK(ddp_comm_rank(b->comm, &b->rank));
  APP_CHECK(ddp_comm_size(b->comm, &b->size));
  ddp_comm_info_t info;
  APP_CHECK(ddp_comm_info(b->comm, &info));
  app_blas_note(info.local_rank == 0, 0);
  openblas_set_num_threads(1);
  char err[256];
  if (tm_create_mlp(&b->m, b->sizes, b->nsizes, NULL, b->batch, 0, err, sizeof err) != 0) {
    fprintf(stderr, "ddp_bench: cannot build the model: %s\n", err);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (b->optim != TRAIN_OPTIM_SGD) {
    b->zblock = calloc(b->m.total, sizeof(float));
    if (!b->zblock) MPI_Abort(MPI_COMM_WORLD, 1);
    for (size_t i = 0, off = 0; i < b->m.nparams; off += b->m.count[i], i++) b->zgrad[i] = b->zblock + off;
  }
  uint64_t seed = train_rng_seed(42);
  tm_init_params(&b->m, &seed);
  b->m.trace = on_trace;
  b->m.trace_ctx = b;
  int in = b->sizes[0], classes = b->sizes[b->nsizes - 1];
  b->x = malloc(sizeof(float) * (size_t)b->batch * (size_t)in);
  b->labels = malloc(sizeof(int) * (size_t)b->batch);
  if (!b->x || !b->labels) MPI_Abort(MPI_COMM_WORLD, 1);
  for (int s = 0; s < b->batch; s++)
    train_synth_sample(7, (uint64_t)b->rank * (uint64_t)b->batch + (uint64_t)s, in, classes,
                     b->x + (size_t)s * in, &b->labels[s]);
  return 0;
}

/* The configurations to run: the base (or one per --zero mode), then --sweep's variants. */
static int make_configs(const cli_t *cli, cfg_t *cfgs) {
  const cfg_t base = cli->base;
  int ncfg = 0;
  if (!cli->nzero) cfgs[ncfg++] = base;
  for (int z = 0; z < cli->nzero; z++) { /* one configuration per --zero mode, same reducer options */
    cfg_t c = base;
    c.zero = cli->zeros[z];
    snprintf(c.label, sizeof c.label, "zero %d", cli->zeros[z]);
    cfgs[ncfg++] = c;
  }
  if (!cli->sweep) return ncfg;
  cfg_t c = base;
  c.overlap = 0, snprintf(c.label, sizeof c.label, "no-overlap");
  cfgs[ncfg++] = c;
  c = base, c.algo = DDP_ALGO_MPI, snprintf(c.label, sizeof c.label, "algo mpi");
  cfgs[ncfg++] = c;
  c = base, c.views = 0, snprintf(c.label, sizeof c.label, "views off");
  cfgs[ncfg++] = c;
  double caps[] = {1.0, 5.0, 25.0, 100.0}; /* 25: PyTorch's default cap */
  for (int k = 0; k < 4; k++) {
    c = base, c.cap_mb = caps[k];
    snprintf(c.label, sizeof c.label, "cap %g MB", caps[k]);
    cfgs[ncfg++] = c;
  }
  c = base, c.predivided = !base.predivided;
  snprintf(c.label, sizeof c.label, "%s", c.predivided ? "predivided" : "no-predivide");
  cfgs[ncfg++] = c;
  c = base, c.hook = DDP_HOOK_BF16, snprintf(c.label, sizeof c.label, "bf16 hook");
  cfgs[ncfg++] = c;
  c = base, c.hook = DDP_HOOK_FP16, snprintf(c.label, sizeof c.label, "fp16 hook");
  cfgs[ncfg++] = c;
  return ncfg;
}

/* The table's '#' header: the workload, the machine and how to read the columns. */
static void print_header(const bench_t *b) {
  char ver[128];
  ddp_mpi_library_version(ver, sizeof ver);
  printf("# ddp_bench: W-DDP MLP ");
  for (int i = 0; i < b->nsizes; i++) printf("%s%d", i ? "-" : "", b->sizes[i]);
  printf(", %zu parameters (%.1f MB of f32 gradients), per-rank batch %d, %s, 1 BLAS thread per rank\n",
         b->m.total, (double)b->m.total * 4 / 1048576.0, b->batch,
         b->optim == TRAIN_OPTIM_ADAMW ? "AdamW" : "SGD");
  printf("# np %d, steps %d (+%d warmup), mpiddp %s, %s\n", b->size, b->steps, b->warmup, ddp_version(), ver);
  char cpu[160], blas[256];
  app_cpu_describe(cpu, sizeof cpu);
  app_blas_describe(blas, sizeof blas);
  printf("# CPU %s; BLAS %s\n", cpu, blas);
  if (b->device_cuda) {
    char dev[128];
    ddp_device_describe(b->comm, dev, sizeof dev);
    printf("# device buckets on %s: host compute, gradients copied H2D before grad_ready and D2H after finish\n", dev);
  }
  printf("# compute_ms: the same steps without communication (the first configuration's optimizer update included;\n"
         "# AdamW updates there on zero gradients so its state stays the same on every rank); each measured iteration runs one compute-only step and one\n"
         "# DDP step per configuration, interleaved in a rotating order; efficiency = compute_ms / ddp_ms (medians over\n"
         "# the steps, slowest rank; means are in the JSON);\n"
         "# eff_best = fastest compute-only step / fastest DDP step (the figure least disturbed by other load)\n");
  printf("# every configuration checks that all ranks end with bitwise identical parameters, and one step against a\n"
         "# single process on the concatenated batch of all ranks: grad_err = worst relative L2 error of an averaged\n"
         "# gradient (limit 1e-4, 1e-2 with a fp16/bf16 hook; without a hook also parameters after SGD within 1e-5);\n"
         "# predivided: the loss\n"
         "# carries 1/world and the reducer sums (same averaged gradients, no division pass)\n");
}

/* Rank 0: the header, one row per configuration, the memory side of --zero, the step-time
 * ratios. */
static void print_report(const bench_t *b, const result_t *res, int ncfg, int nzero) {
  print_header(b);
  printf("%-22s %3s %9s %10s %9s %7s %8s %9s %8s %7s %9s %4s %7s %-12s %-3s %-3s %-4s %8s\n", "# config", "np",
         "params", "compute_ms", "ddp_ms", "effic", "eff_best", "exposed", "comm_ms", "hidden", "samples/s", "bkts",
         "cap_mb", "algo", "ovl", "vw", "hook", "grad_err");
  for (int k = 0; k < ncfg; k++) print_row(b, &res[k]);
  if (nzero) {
    /* The memory side: the optimizer's own accounting per configuration, and the process's
     * peak resident memory (all configurations of this run together). */
    printf("# %-20s %5s %14s %10s %8s %7s   peak RSS (VmHWM, max over ranks) of this process: %.1f MB\n",
           "config", "optim", "opt_state_MB", "ddp_ms", "effic", "vs_z0", (double)b->peak_rss_kib / 1024.0);
    for (int k = 0; k < ncfg; k++)
      printf("  %-20s %5s %14.2f %10.2f %8.3f %7.3f\n", res[k].cfg.label, train_optim_name(b->optim),
             (double)res[k].state_bytes / 1048576.0, res[k].step_ms, res[k].efficiency,
             res[k].step_ms / res[0].step_ms);
  }
  if (ncfg > 1)
    for (int k = 1; k < ncfg; k++)
      printf("# %-20s step time %.2fx of '%s'\n", res[k].cfg.label, res[k].step_ms / res[0].step_ms,
             res[0].cfg.label);
}

/* -J: one JSON object, or an array of them with several configurations. */
static void write_json(const bench_t *b, const result_t *res, int ncfg, const char *json) {
  FILE *fp = fopen(json, "w");
  if (!fp) {
    fprintf(stderr, "ddp_bench: cannot write %s\n", json);
    return;
  }
  if (ncfg == 1) {
    json_row(fp, b, &res[0]);
    fputc('\n', fp);
  } else {
    fputs("[\n", fp);
    for (int k = 0; k < ncfg; k++) {
      json_row(fp, b, &res[k]);
      fputs(k + 1 < ncfg ? ",\n" : "\n", fp);
    }
    fputs("]\n", fp);
  }
  fclose(fp);
  printf("# wrote %s\n", json);
}

/* The verdict lines; 1 when any configuration was wrong. */
static int verdict(const bench_t *b, const result_t *res, int ncfg) {
  int wrong = 0, step_wrong = 0;
  for (int k = 0; k < ncfg; k++) wrong |= res[k].wrong, step_wrong |= res[k].step_wrong;
  if (wrong && b->rank == 0) printf("# WRONG: parameters differ across ranks after a DDP run\n");
  for (int k = 0; k < ncfg && b->rank == 0; k++)
    if (res[k].step_wrong)
      printf("# WRONG: '%s': one DDP step differs from the single-process step on the concatenated batch "
             "(gradient error %.3g, limit %.0e)\n", res[k].cfg.label, res[k].grad_err, res[k].grad_tol);
  return wrong | step_wrong;
}

static void teardown(bench_t *b) {
  for (size_t i = 0; i < 32; i++) {
    if (b->dparam[i]) ddp_device_free(b->comm, b->dparam[i]);
    if (b->dgrad[i]) ddp_device_free(b->comm, b->dgrad[i]);
  }
  if (b->stream) ddp_stream_destroy(b->comm, &b->stream);
}

int main(int argc, char **argv) {
  app_blas_auto(argv); /* before MPI starts: may re-execute with a faster OpenBLAS kernel */
  bench_t b;
  memset(&b, 0, sizeof b);
  cli_t cli;
  memset(&cli, 0, sizeof cli);
  int pr = parse_args(argc, argv, &b, &cli);
  if (pr != APP_OPTS_OK) return pr == APP_OPTS_HELP ? 0 : 2;
  int st = setup(&b, &argc, &argv);
  if (st != 0) return st;
  if (cli.nzero && (cli.sweep || cli.base.hook != DDP_HOOK_NONE || !cli.base.views || b.device_cuda)) {
    if (b.rank == 0)
      fprintf(stderr, "ddp_bench: --zero runs host buckets with views, no hook, and not with --sweep\n");
    ddp_finalize(&b.comm);
    return 2;
  }
  cfg_t cfgs[16];
  int ncfg = make_configs(&cli, cfgs);
  result_t res[16];
  if (run_all(&b, cfgs, ncfg, res) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
  if (b.rank == 0) {
    print_report(&b, res, ncfg, cli.nzero);
    if (cli.json) write_json(&b, res, ncfg, cli.json);
  }
  teardown(&b);
  int wrong = verdict(&b, res, ncfg);
  free(b.x);
  free(b.labels);
  for (int k = 0; k < 16; k++) train_optim_destroy(&b.opt[k]);
  free(b.zblock);
  tm_free(&b.m);
  APP_CHECK(ddp_finalize(&b.comm));
  return wrong ? 1 : 0;
}
