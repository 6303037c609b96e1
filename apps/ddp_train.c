/* ddp_train: data-parallel training of an MLP (default) or a small CNN on Fashion-MNIST with
 * the library's sampler, loader and bucketed reducer. Launch it like any MPI program:
 *   mpirun -np 2 build/apps/ddp_train --epochs 3
 * Rank 0 prints one line per epoch (train loss, test accuracy over the whole test set split
 * across ranks, samples/s, time); --checkpoint/--resume continue a run step for step. */
#include <cblas.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app_blas.h"
#include "app_check.h"
#include "checkpoint.h"
#include "ddp.h"
#include "train_model.h"
#include "train_util.h"
#if DDP_TRAIN_GPU
#include "train_gpu.h"
/* The device kind that runs the model's arithmetic through train_gpu.h: a real CUDA device;
 * tests/train_gpu.cmake builds a variant with a host stand-in of train_gpu.cu for the
 * emulated device (DDP_DEVICE_EMULATED) to test this file's GPU wiring without a GPU. */
#ifndef DDP_TRAIN_GPU_KIND
#define DDP_TRAIN_GPU_KIND DDP_DEVICE_CUDA
#endif
#endif

/* SYNC_LANES (--deterministic L): each global batch is cut into L fixed lanes (sample position
 * mod L); every lane's gradient is computed on its own, weighted and summed in f64 and
 * exchanged with one f64 ddp_allreduce. A lane is the same samples in the same order at any
 * world size dividing L, and sums of a few f32 values are exact in f64, so np = 1, 2, 4 (L = 4)
 * follow the same trajectory bit for bit, not just within rounding. */
typedef enum { SYNC_REDUCER = 0, SYNC_MPI, SYNC_LANES } sync_kind_t;

typedef struct opts {
  int epochs;
  long batch;
  double lr, momentum, wd;
  long warmup; /* -1: default */
  const char *model;
  uint64_t seed;
  const char *algo;
  double bucket_cap_mb;
  ddp_hook_t hook;
  const char *data;
  const char *metrics;
  int checkpoint_activations;
  int threads;
  const char *checkpoint;
  long checkpoint_every;
  const char *resume;
  long limit_steps;  /* steps per epoch, 0 = all */
  long limit_test;   /* test samples, 0 = all */
  long stop_after;   /* stop (as if interrupted) after this global step, 0 = never */
  const char *log_steps;
  sync_kind_t sync;
  int device; /* 1: gradient buckets in device memory (--device cuda) */
  long lanes; /* --deterministic L */
  train_amp_t amp;
  double loss_scale; /* initial scale for --amp fp16 */
  int progress; /* -1 auto, 0 off, 1 on */
} opts_t;

static void usage(FILE *f) {
  fprintf(f,
          "usage: mpirun -np N ddp_train [options]\n"
          "  --epochs N               epochs (default 10)\n"
          "  --batch N                per-rank batch; global batch = N x ranks (default 64)\n"
          "  --lr X                   peak learning rate (default 0.05)\n"
          "  --momentum X             SGD momentum (default 0.9)\n"
          "  --wd X                   weight decay (default 5e-4)\n"
          "  --warmup N               warmup steps (default min(200, total/10))\n"
          "  --model mlp|cnn          MLP 784-512-256-10 or conv5x5(16)-pool-conv5x5(32)-pool-fc\n"
          "  --seed N                 parameter init and data-order seed (default 0)\n"
          "  --algo NAME              allreduce algorithm of the reducer (auto, mpi, ring, ...)\n"
          "  --bucket-cap-mb X        reducer bucket cap (default 25)\n"
          "  --hook none|fp16|bf16    gradient compression on the wire (default none)\n"
          "  --sync reducer|mpi       gradient exchange: the bucketed reducer (default) or one\n"
          "                           MPI_Allreduce of all gradients after backward (baseline)\n"
          "  --deterministic L        world-size-independent arithmetic: L fixed lanes per global\n"
          "                           batch, f64 gradient exchange (L a multiple of -np); the\n"
          "                           loss curve is then bitwise the same at every -np dividing L\n"
          "  --amp none|fp16|bf16     mixed precision: GEMM operands rounded to f16/bf16 (on the\n"
          "                           CPU; cublasGemmEx with f16/bf16 operands on a GPU), f32\n"
          "                           accumulation and master weights; fp16 with\n"
          "                           dynamic loss scaling (skip + halve on inf/nan, double after\n"
          "                           2000 clean steps)\n"
          "  --loss-scale X           initial fp16 loss scale (default 65536)\n"
          "  --device host|cuda       cuda: parameters and gradient buckets live in device memory\n"
          "                           and are exchanged by the device transports (CUDA-aware\n"
          "                           MPI, staged, NCCL: DDP_TRANSPORT). On a CUDA GPU the MLP's\n"
          "                           forward/backward and SGD run there (cuBLAS, CUDA kernels;\n"
          "                           the CNN stays on the CPU); DDP_DEVICE_EMULATE=1 runs the\n"
          "                           device path without a GPU, arithmetic on the CPU\n"
          "  --data DIR               Fashion-MNIST IDX files (default %s)\n"
          "  --metrics FILE.csv       per-epoch metrics (rank 0)\n"
          "  --checkpoint-activations recompute each block's activations during backward\n"
          "  --threads N              OpenBLAS threads per rank (default 1)\n"
          "  --checkpoint FILE        save model, optimizer, sampler position and RNG (rank 0)\n"
          "  --checkpoint-every N     ... every N steps (default: at the end of each epoch)\n"
          "  --resume FILE            continue from a checkpoint (same -np, --batch, --seed)\n"
          "  --limit-steps N          at most N steps per epoch (quick runs, tests)\n"
          "  --limit-test N           evaluate on the first N test images only\n"
          "  --stop-after N           stop after global step N, as if interrupted (tests)\n"
          "  --log-steps FILE         write every step's loss (rank 0's local batch) to FILE\n"
          "  --progress / --no-progress  progress line during an epoch (default: on when\n"
          "                           stdout is a terminal and not under mpirun, which gives\n"
          "                           every rank a pseudo-terminal even when piped)\n",
          DDP_FMNIST_DEFAULT_DIR);
}

/* Messages of the argument parser: every rank parses, only rank 0 speaks. */
#define PERR(...)                               \
  do {                                          \
    if (!quiet) fprintf(stderr, __VA_ARGS__);   \
  } while (0)

static int parse_long(const char *flag, const char *v, long lo, long hi, long *out, int quiet) {
  char *end = NULL;
  errno = 0;
  long x = v ? strtol(v, &end, 10) : 0;
  if (!v || errno || end == v || *end || x < lo || x > hi) {
    PERR("ddp_train: %s expects an integer in [%ld, %ld], got '%s'\n", flag, lo, hi,
            v ? v : "(missing)");
    return -1;
  }
  *out = x;
  return 0;
}

static int parse_double(const char *flag, const char *v, double lo, double hi, double *out,
                        int quiet) {
  char *end = NULL;
  errno = 0;
  double x = v ? strtod(v, &end) : 0;
  if (!v || errno || end == v || *end || !(x >= lo && x <= hi)) {
    PERR("ddp_train: %s expects a number in [%g, %g], got '%s'\n", flag, lo, hi,
            v ? v : "(missing)");
    return -1;
  }
  *out = x;
  return 0;
}

/* Returns 0 ok, 1 help printed, -1 error. */
static int parse_args(int argc, char **argv, opts_t *o, int quiet) {
  *o = (opts_t){.epochs = 10, .batch = 64, .lr = 0.05, .momentum = 0.9, .wd = 5e-4,
                .warmup = -1, .model = "mlp", .seed = 0, .algo = NULL, .bucket_cap_mb = 25.0,
                .hook = DDP_HOOK_NONE, .data = NULL, .threads = 1, .sync = SYNC_REDUCER, .progress = -1, .loss_scale = 65536.0};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    long x;
    double d;
#define FLAG(name) (strcmp(a, name) == 0)
    if (FLAG("-h") || FLAG("--help")) {
      if (!quiet) usage(stdout);
      return 1;
    } else if (FLAG("--epochs")) {
      if (parse_long(a, v, 1, 100000, &x, quiet)) return -1;
      o->epochs = (int)x, i++;
    } else if (FLAG("--batch")) {
      if (parse_long(a, v, 1, 65536, &x, quiet)) return -1;
      o->batch = x, i++;
    } else if (FLAG("--lr")) {
      if (parse_double(a, v, 0.0, 100.0, &o->lr, quiet)) return -1;
      i++;
    } else if (FLAG("--momentum")) {
      if (parse_double(a, v, 0.0, 0.999999, &o->momentum, quiet)) return -1;
      i++;
    } else if (FLAG("--wd")) {
      if (parse_double(a, v, 0.0, 1.0, &o->wd, quiet)) return -1;
      i++;
    } else if (FLAG("--warmup")) {
      if (parse_long(a, v, 0, LONG_MAX, &x, quiet)) return -1;
      o->warmup = x, i++;
    } else if (FLAG("--model")) {
      if (!v || (strcmp(v, "mlp") && strcmp(v, "cnn"))) {
        PERR("ddp_train: --model expects mlp or cnn, got '%s'\n", v ? v : "(missing)");
        return -1;
      }
      o->model = v, i++;
    } else if (FLAG("--seed")) {
      if (parse_long(a, v, 0, LONG_MAX, &x, quiet)) return -1;
      o->seed = (uint64_t)x, i++;
    } else if (FLAG("--algo")) {
      if (!v) {
        PERR("ddp_train: --algo needs a name\n");
        return -1;
      }
      o->algo = v, i++;
    } else if (FLAG("--bucket-cap-mb")) {
      if (parse_double(a, v, 0.001, 65536.0, &d, quiet)) return -1;
      o->bucket_cap_mb = d, i++;
    } else if (FLAG("--hook")) {
      if (v && strcmp(v, "none") == 0) o->hook = DDP_HOOK_NONE;
      else if (v && strcmp(v, "fp16") == 0) o->hook = DDP_HOOK_FP16;
      else if (v && strcmp(v, "bf16") == 0) o->hook = DDP_HOOK_BF16;
      else {
        PERR("ddp_train: --hook expects none, fp16 or bf16, got '%s'\n",
                v ? v : "(missing)");
        return -1;
      }
      i++;
    } else if (FLAG("--sync")) {
      if (v && strcmp(v, "reducer") == 0) o->sync = SYNC_REDUCER;
      else if (v && strcmp(v, "mpi") == 0) o->sync = SYNC_MPI;
      else {
        PERR("ddp_train: --sync expects reducer or mpi, got '%s'\n", v ? v : "(missing)");
        return -1;
      }
      i++;
    } else if (FLAG("--deterministic")) {
      if (parse_long(a, v, 1, 4096, &x, quiet)) return -1;
      o->lanes = x, o->sync = SYNC_LANES, i++;
    } else if (FLAG("--amp")) {
      if (v && strcmp(v, "none") == 0) o->amp = TRAIN_AMP_NONE;
      else if (v && strcmp(v, "fp16") == 0) o->amp = TRAIN_AMP_FP16;
      else if (v && strcmp(v, "bf16") == 0) o->amp = TRAIN_AMP_BF16;
      else {
        PERR("ddp_train: --amp expects none, fp16 or bf16, got '%s'\n", v ? v : "(missing)");
        return -1;
      }
      i++;
    } else if (FLAG("--loss-scale")) {
      if (parse_double(a, v, 1.0, 1e30, &o->loss_scale, quiet)) return -1;
      i++;
    } else if (FLAG("--device")) {
      if (v && strcmp(v, "host") == 0) o->device = 0;
      else if (v && strcmp(v, "cuda") == 0) o->device = 1;
      else {
        PERR("ddp_train: --device expects host or cuda, got '%s'\n", v ? v : "(missing)");
        return -1;
      }
      i++;
    } else if (FLAG("--data")) {
      if (!v) {
        PERR("ddp_train: --data needs a folder\n");
        return -1;
      }
      o->data = v, i++;
    } else if (FLAG("--metrics")) {
      if (!v) {
        PERR("ddp_train: --metrics needs a file\n");
        return -1;
      }
      o->metrics = v, i++;
    } else if (FLAG("--checkpoint-activations")) {
      o->checkpoint_activations = 1;
    } else if (FLAG("--threads")) {
      if (parse_long(a, v, 1, 1024, &x, quiet)) return -1;
      o->threads = (int)x, i++;
    } else if (FLAG("--checkpoint")) {
      if (!v) {
        PERR("ddp_train: --checkpoint needs a file\n");
        return -1;
      }
      o->checkpoint = v, i++;
    } else if (FLAG("--checkpoint-every")) {
      if (parse_long(a, v, 1, LONG_MAX, &x, quiet)) return -1;
      o->checkpoint_every = x, i++;
    } else if (FLAG("--resume")) {
      if (!v) {
        PERR("ddp_train: --resume needs a file\n");
        return -1;
      }
      o->resume = v, i++;
    } else if (FLAG("--limit-steps")) {
      if (parse_long(a, v, 1, LONG_MAX, &x, quiet)) return -1;
      o->limit_steps = x, i++;
    } else if (FLAG("--limit-test")) {
      if (parse_long(a, v, 1, LONG_MAX, &x, quiet)) return -1;
      o->limit_test = x, i++;
    } else if (FLAG("--stop-after")) {
      if (parse_long(a, v, 1, LONG_MAX, &x, quiet)) return -1;
      o->stop_after = x, i++;
    } else if (FLAG("--log-steps")) {
      if (!v) {
        PERR("ddp_train: --log-steps needs a file\n");
        return -1;
      }
      o->log_steps = v, i++;
    } else if (FLAG("--no-progress")) {
      o->progress = 0;
    } else if (FLAG("--progress")) {
      o->progress = 1;
    } else {
      PERR("ddp_train: unknown option '%s' (see --help)\n", a);
      return -1;
    }
#undef FLAG
  }
  if (o->device && o->sync != SYNC_REDUCER) {
    PERR("ddp_train: --device cuda needs the reducer (not --sync mpi or --deterministic)\n");
    return -1;
  }
  if (o->checkpoint_every && !o->checkpoint) {
    PERR("ddp_train: --checkpoint-every needs --checkpoint FILE\n");
    return -1;
  }
  return 0;
}

/* Gradient-ready callback of the backward pass: hands the gradient to the reducer. */
typedef struct ready_ctx {
  ddp_reducer_t *reducer;
  ddp_status_t st;
  /* --device cuda: the host gradient is copied into its device bucket view on `stream`
   * first; the reducer orders the bucket's allreduce after the stream's work. */
  ddp_comm_t *comm;
  ddp_stream_t *stream;
  float **host_grad;
  void **dev_grad;
  const size_t *count;
} ready_ctx_t;

static void on_grad_ready(size_t i, void *ctx) {
  ready_ctx_t *c = (ready_ctx_t *)ctx;
  if (!c->reducer || c->st != DDP_OK) return;
  if (c->dev_grad)
    c->st = ddp_memcpy_async(c->comm, c->dev_grad[i], c->host_grad[i], c->count[i] * sizeof(float),
                             c->stream);
  if (c->st == DDP_OK) c->st = ddp_reducer_grad_ready(c->reducer, i);
}

#if DDP_TRAIN_GPU
/* One training step with the model's arithmetic on the GPU (--device cuda on a CUDA device,
 * MLP): forward/backward write the gradients straight into the reducer's device bucket views
 * on the reducer's stream, grad_ready per parameter as on the host; after the exchange, fp16
 * unscale + inf/nan check (ddp_device_nonfinite_async) and the SGD step on the device. The
 * loss, the skip decision and the scaler follow the host run's rules exactly. */
static int gpu_step(tg_model_t *tg, ddp_comm_t *comm, ddp_reducer_t *reducer, ready_ctx_t *rctx,
                    const train_model_t *m, const ddp_batch_t *b, const opts_t *o,
                    train_scaler_t *scaler, int *dev_flag, float lr, double *loss) {
  char err[512];
  void *grad[TM_MAX_PARAMS];
  for (size_t i = 0; i < m->nparams; i++) APP_CHECK(ddp_reducer_grad(reducer, i, &grad[i]));
  if (tg_forward_backward(tg, b->x, b->y, (int)b->count, scaler->scale, grad, on_grad_ready, rctx,
                          err, sizeof err) != 0) {
    fprintf(stderr, "ddp_train: GPU forward/backward: %s\n", err);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  APP_CHECK(rctx->st);
  APP_CHECK(ddp_reducer_finish(reducer));
  /* finish() may rebuild the buckets (first iteration): fetch the views again. */
  for (size_t i = 0; i < m->nparams; i++) APP_CHECK(ddp_reducer_grad(reducer, i, &grad[i]));
  int take_step = 1;
  if (o->amp == TRAIN_AMP_FP16) {
    /* Every rank holds the same averaged gradients, so every rank decides the same. */
    int found = 0;
    if (tg_unscale(tg, grad, 1.0f / scaler->scale, err, sizeof err) != 0) {
      fprintf(stderr, "ddp_train: GPU unscale: %s\n", err);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    APP_CHECK(ddp_memset_async(comm, dev_flag, 0, sizeof(int), rctx->stream));
    for (size_t i = 0; i < m->nparams; i++)
      APP_CHECK(ddp_device_nonfinite_async(comm, grad[i], m->count[i], DDP_F32, dev_flag,
                                           rctx->stream));
    APP_CHECK(ddp_memcpy_async(comm, &found, dev_flag, sizeof(int), rctx->stream));
    APP_CHECK(ddp_stream_synchronize(comm, rctx->stream));
    take_step = !found;
    train_scaler_update(scaler, take_step);
  }
  if (tg_finish_step(tg, grad, take_step, lr, (float)o->momentum, (float)o->wd, loss, err,
                     sizeof err) != 0) {
    fprintf(stderr, "ddp_train: GPU SGD step: %s\n", err);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return 0;
}

/* The device's parameters and momentum back into the host model (checkpoints, evaluation). */
static void gpu_download(tg_model_t *tg, train_model_t *m, float **mom) {
  char err[512];
  if (tg && tg_download(tg, m->param, mom, err, sizeof err) != 0) {
    fprintf(stderr, "ddp_train: GPU download: %s\n", err);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}
#endif

/* Test accuracy over the first n_test images, split into contiguous ranges across ranks and
 * summed with one allreduce, so every image is counted exactly once. */
static int evaluate(train_model_t *m, const ddp_dataset_t *test, uint64_t n_test, MPI_Comm world,
                    int rank, int size, float *xbuf, int32_t *ybuf, double *acc) {
  uint64_t lo = n_test * (uint64_t)rank / (uint64_t)size;
  uint64_t hi = n_test * (uint64_t)(rank + 1) / (uint64_t)size;
  uint64_t counts[2] = {0, hi - lo};
  for (uint64_t i = lo; i < hi;) {
    int b = 0;
    for (; b < m->max_batch && i < hi; b++, i++)
      if (ddp_dataset_get(test, i, xbuf + (size_t)b * m->in_elems, m->in_elems, &ybuf[b]) != DDP_OK)
        return -1;
    counts[0] += tm_count_correct(m, xbuf, ybuf, b);
  }
  if (MPI_Allreduce(MPI_IN_PLACE, counts, 2, MPI_UINT64_T, MPI_SUM, world) != MPI_SUCCESS) return -1;
  *acc = counts[1] ? (double)counts[0] / (double)counts[1] : 0.0;
  return 0;
}

/* Rank 0: serialises st plus the model, momentum and loss-scaler state, writes it atomically.
 * A failed write is reported and training goes on (the previous checkpoint stays intact). */
static void save_checkpoint(const opts_t *o, const train_model_t *m, float *const *mom,
                            const train_scaler_t *scaler, ckpt_state_t *st) {
  char err[1024];
  snprintf(st->model, sizeof st->model, "%s", o->model);
  st->loss_scale = o->amp == TRAIN_AMP_FP16 ? scaler->scale : 0.0f;
  st->scale_clean = o->amp == TRAIN_AMP_FP16 ? scaler->clean : 0;
  void *cb = NULL;
  size_t cbytes = 0;
  if (ckpt_serialize(st, (float *const *)m->param, mom, m->count, &cb, &cbytes, err, sizeof err) != 0 ||
      ckpt_write_atomic(o->checkpoint, cb, cbytes, err, sizeof err) != 0)
    fprintf(stderr, "ddp_train: checkpoint not written: %s\n", err);
  free(cb);
}

static const char *amp_name(train_amp_t a) {
  return a == TRAIN_AMP_FP16 ? "fp16" : a == TRAIN_AMP_BF16 ? "bf16" : "none";
}

static const char *hook_name(ddp_hook_t h) {
  return h == DDP_HOOK_FP16 ? "fp16" : h == DDP_HOOK_BF16 ? "bf16" : "none";
}

int main(int argc, char **argv) {
  app_blas_auto(argv); /* before MPI starts: may re-execute with a faster OpenBLAS kernel */
  ddp_comm_t *comm = NULL;
  APP_CHECK(ddp_init(&argc, &argv, MPI_COMM_NULL, &comm));
  int rank = 0, size = 1;
  APP_CHECK(ddp_comm_rank(comm, &rank));
  APP_CHECK(ddp_comm_size(comm, &size));
  MPI_Comm world;
  APP_CHECK(ddp_comm_mpi(comm, DDP_COMM_WORLD, &world));

  opts_t o;
  int pr = parse_args(argc, argv, &o, rank != 0);
  if (pr == 0 && o.sync == SYNC_LANES && o.lanes % size != 0) {
    if (rank == 0)
      fprintf(stderr, "ddp_train: --deterministic %ld needs a lane count that is a multiple of the "
              "%d ranks\n", o.lanes, size);
    pr = -1;
  }
  if (pr == 0 && o.device) {
    /* Every rank needs a device; all of them learn whether one lacks it, and leave together. */
    int have = ddp_device_available(comm), all = 0;
    MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, world);
    if (!have) {
      char why[160];
      ddp_device_describe(comm, why, sizeof why);
      fprintf(stderr, "ddp_train: --device cuda: no device on rank %d: %s (a GPU, or "
              "DDP_DEVICE_EMULATE=1 for the host emulation)\n", rank, why);
    }
    if (!all) pr = -1;
  }
  if (pr != 0) {
    /* Every rank parses the same arguments, so every rank leaves here together. */
    if (ddp_finalize(&comm) != DDP_OK) return 1;
    return pr < 0 ? 2 : 0;
  }
  ddp_comm_info_t cinfo;
  APP_CHECK(ddp_comm_info(comm, &cinfo));
  app_blas_note(cinfo.local_rank == 0, 1); /* before the header: rank 0 prints first */
  openblas_set_num_threads(o.threads);

  ddp_dataset_t *train = NULL, *test = NULL;
  APP_CHECK(ddp_dataset_open_fmnist(o.data, 1, &train));
  APP_CHECK(ddp_dataset_open_fmnist(o.data, 0, &test));
  ddp_dataset_info_t tri, tei;
  APP_CHECK(ddp_dataset_info(train, &tri));
  APP_CHECK(ddp_dataset_info(test, &tei));

  train_model_t m;
  char err[1024];
  if (tm_create(&m, o.model, (int)o.batch, tri.classes, o.checkpoint_activations, err, sizeof err)) {
    if (rank == 0) fprintf(stderr, "ddp_train: %s\n", err);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  uint64_t rng = o.seed * 0x2545F4914F6CDD1DULL + 1;
  tm_init_params(&m, &rng);
  if (tm_set_amp(&m, o.amp) != 0) {
    fprintf(stderr, "ddp_train: out of memory for --amp\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  train_scaler_t scaler = {.scale = o.amp == TRAIN_AMP_FP16 ? (float)o.loss_scale : 1.0f,
                           .clean = 0, .interval = 2000, .skipped = 0};
  float *mom_block = calloc(m.total, sizeof(float));
  float *flat_grad = calloc(m.total, sizeof(float)); /* --sync mpi, --deterministic, --device */
  float *mom[TM_MAX_PARAMS];
  float *xbuf = malloc(sizeof(float) * (size_t)o.batch * m.in_elems);
  int32_t *ybuf = malloc(sizeof(int32_t) * (size_t)o.batch);
  if (!mom_block || !flat_grad || !xbuf || !ybuf) {
    fprintf(stderr, "ddp_train: out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (size_t i = 0, off = 0; i < m.nparams; off += m.count[i], i++) mom[i] = mom_block + off;

  double *grad64 = NULL; /* --deterministic: lane-weighted gradient sum, then the sample count */
  float *lane_x = NULL;
  int32_t *lane_y = NULL;
  if (o.sync == SYNC_LANES) {
    grad64 = malloc(sizeof(double) * (m.total + 1));
    lane_x = malloc(sizeof(float) * (size_t)o.batch * m.in_elems);
    lane_y = malloc(sizeof(int32_t) * (size_t)o.batch);
    if (!grad64 || !lane_x || !lane_y) {
      fprintf(stderr, "ddp_train: out of memory\n");
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }

  /* ---- resume: rank 0 reads and checks the file, every rank gets its bytes ---- */
  uint64_t start_epoch = 0, start_step = 0, global_step = 0;
  double resume_loss_sum = 0.0;
  uint64_t resume_loss_steps = 0;
  if (o.resume) {
    void *buf = NULL;
    size_t bytes = 0;
    ckpt_view_t view;
    long long hdr[1] = {0};
    int ok = 1;
    if (rank == 0) {
      ok = ckpt_load_file(o.resume, &buf, &bytes, &view, err, sizeof err) == 0;
      if (ok)
        ok = ckpt_check_compatible(buf, &view, o.model, m.count, (uint32_t)m.nparams, size,
                                   (uint64_t)o.batch, o.seed, err, sizeof err) == 0;
      if (!ok) fprintf(stderr, "ddp_train: cannot resume from %s: %s\n", o.resume, err);
      hdr[0] = ok ? (long long)bytes : -1;
    }
    MPI_Bcast(hdr, 1, MPI_LONG_LONG, 0, world);
    if (hdr[0] < 0) {
      free(buf);
      tm_free(&m);
      ddp_dataset_destroy(&train);
      ddp_dataset_destroy(&test);
      free(mom_block), free(flat_grad), free(xbuf), free(ybuf), free(grad64), free(lane_x), free(lane_y);
      ddp_finalize(&comm);
      return 3;
    }
    bytes = (size_t)hdr[0];
    if (rank != 0) buf = malloc(bytes);
    if (!buf) MPI_Abort(MPI_COMM_WORLD, 1);
    for (size_t off = 0; off < bytes;) {
      int n = bytes - off > (1u << 30) ? (1 << 30) : (int)(bytes - off);
      MPI_Bcast((char *)buf + off, n, MPI_BYTE, 0, world);
      off += (size_t)n;
    }
    if (rank != 0 && ckpt_parse(buf, bytes, &view, err, sizeof err) != 0) {
      fprintf(stderr, "ddp_train: rank %d: checkpoint damaged in transit: %s\n", rank, err);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    ckpt_copy_floats(buf, view.params_off, m.param_block, m.total);
    ckpt_copy_floats(buf, view.momentum_off, mom_block, m.total);
    start_epoch = view.st.epoch;
    start_step = view.st.step_in_epoch;
    global_step = view.st.global_step;
    rng = view.st.rng;
    resume_loss_sum = view.st.loss_sum;
    resume_loss_steps = view.st.loss_steps;
    if (o.amp == TRAIN_AMP_FP16 && view.st.loss_scale >= 1.0f) {
      scaler.scale = view.st.loss_scale;
      scaler.clean = view.st.scale_clean;
    }
    free(buf);
  }

  /* ---- data: PyTorch-identical DistributedSampler + prefetching loader ---- */
  ddp_sampler_opts_t so;
  ddp_sampler_opts_default(&so);
  so.dataset_size = tri.count;
  so.num_replicas = size;
  so.rank = rank;
  so.shuffle = 1;
  so.seed = o.seed;
  ddp_sampler_t *sampler = NULL;
  APP_CHECK(ddp_sampler_create(&so, &sampler));
  ddp_loader_opts_t lo;
  ddp_loader_opts_default(&lo);
  lo.batch_size = (size_t)o.batch;
  ddp_loader_t *loader = NULL;
  APP_CHECK(ddp_loader_create(sampler, train, &lo, &loader));
  size_t nb = 0;
  APP_CHECK(ddp_loader_num_batches(loader, &nb));
  uint64_t steps_min = 0, steps_max = 0;
  APP_CHECK(ddp_sampler_agree_steps(comm, nb, &steps_min, &steps_max));
  uint64_t steps = steps_min;
  if (o.limit_steps && (uint64_t)o.limit_steps < steps) steps = (uint64_t)o.limit_steps;
  uint64_t total_steps = steps * (uint64_t)o.epochs;
  uint64_t warmup = o.warmup >= 0 ? (uint64_t)o.warmup : train_default_warmup(total_steps);
  uint64_t n_test = tei.count;
  if (o.limit_test && (uint64_t)o.limit_test < n_test) n_test = (uint64_t)o.limit_test;
  if (o.resume && (start_epoch > (uint64_t)o.epochs || start_step > steps)) {
    if (rank == 0)
      fprintf(stderr, "ddp_train: checkpoint position epoch %llu step %llu is beyond this run "
              "(%d epochs of %llu steps)\n", (unsigned long long)start_epoch,
              (unsigned long long)start_step, o.epochs, (unsigned long long)steps);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }

  /* ---- gradient exchange ---- */
  ddp_reducer_t *reducer = NULL;
  ddp_param_t params[TM_MAX_PARAMS];
  for (size_t i = 0; i < m.nparams; i++)
    params[i] = (ddp_param_t){.data = m.param[i], .count = m.count[i], .dtype = DDP_F32,
                              .mem = DDP_MEM_HOST, .name = m.pname[i], .grad = NULL};
  ddp_reducer_stats_t rs = {0};
  ddp_stream_t *stream = NULL;
  void *dev_param[TM_MAX_PARAMS] = {0}, *dev_grad[TM_MAX_PARAMS] = {0};
  float *host_grad[TM_MAX_PARAMS] = {0};
  char devdesc[160] = "host";
  if (o.device) {
    APP_CHECK(ddp_device_describe(comm, devdesc, sizeof devdesc));
    APP_CHECK(ddp_stream_create(comm, &stream));
    for (size_t i = 0, off = 0; i < m.nparams; off += m.count[i], i++) {
      host_grad[i] = flat_grad + off;
      APP_CHECK(ddp_device_malloc(comm, m.count[i] * sizeof(float), &dev_param[i]));
      APP_CHECK(ddp_memcpy_async(comm, dev_param[i], m.param[i], m.count[i] * sizeof(float), stream));
      params[i].data = dev_param[i];
      params[i].mem = DDP_MEM_CUDA;
    }
    APP_CHECK(ddp_stream_synchronize(comm, stream));
  }
  if (o.sync == SYNC_REDUCER) {
    ddp_reducer_opts_t ro;
    APP_CHECK(ddp_reducer_opts_default(&ro));
    ro.bucket_cap_mb = o.bucket_cap_mb;
    /* PyTorch's smaller first bucket (1 MB), but never larger than the cap asked for. */
    if (ro.first_bucket_mb > o.bucket_cap_mb) ro.first_bucket_mb = o.bucket_cap_mb;
    ro.hook = o.hook;
    ro.algo = o.algo;
    ro.stream = stream;
    APP_CHECK(ddp_reducer_create(comm, params, m.nparams, &ro, &reducer));
    APP_CHECK(ddp_reducer_stats(reducer, &rs));
    if (o.device) {
      /* The reducer broadcast rank 0's parameters on the device: take them back. */
      for (size_t i = 0; i < m.nparams; i++)
        APP_CHECK(ddp_memcpy_async(comm, m.param[i], dev_param[i], m.count[i] * sizeof(float), stream));
      APP_CHECK(ddp_stream_synchronize(comm, stream));
    }
  } else {
    /* Same starting point on every rank, as the reducer's creation guarantees. */
    MPI_Bcast(m.param_block, (int)m.total, MPI_FLOAT, 0, world);
    for (size_t i = 0, off = 0; i < m.nparams; off += m.count[i], i++) m.grad[i] = flat_grad + off;
  }

  /* --device cuda on a real GPU: the MLP's arithmetic moves there (the emulated device keeps
   * it on the CPU, as does the CNN). Every rank sees the same kind and model, so every rank
   * takes the same path. */
  int gpu_math = 0;
  const char *gpu_note = NULL;
#if DDP_TRAIN_GPU
  tg_model_t *tg = NULL;
  int *dev_flag = NULL;
  if (o.device && reducer && ddp_device_kind(comm) == DDP_TRAIN_GPU_KIND) {
    int sizes[TM_MAX_LAYERS + 1], relu[TM_MAX_LAYERS], dense = m.nlayers <= TG_MAX_LAYERS;
    for (int l = 0; l < m.nlayers && dense; l++) {
      dense = m.layer[l].kind == TM_DENSE && m.layer[l].wi == 2 * l;
      sizes[l] = m.layer[l].c;
      sizes[l + 1] = m.layer[l].oc;
      relu[l] = m.layer[l].relu;
    }
    if (!dense) {
      gpu_note = "host (the CNN is not ported to the GPU; buckets and exchange on the device)";
    } else {
      if (tg_create(&tg, m.nlayers, sizes, relu, (int)o.batch, (int)o.amp, stream, dev_param,
                    err, sizeof err) != 0 ||
          tg_upload(tg, NULL, (const float *const *)mom, err, sizeof err) != 0) {
        fprintf(stderr, "ddp_train: rank %d: cannot set up the model on the GPU: %s\n", rank, err);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      APP_CHECK(ddp_device_malloc(comm, sizeof(int), (void **)&dev_flag));
      gpu_math = 1;
      gpu_note = tg_describe(tg);
    }
  }
#endif
  if (o.device && !gpu_note)
    gpu_note = "host (cblas; parameters and buckets on the device)";

  FILE *metrics = NULL, *steplog = NULL;
  if (rank == 0 && o.metrics) {
    metrics = fopen(o.metrics, o.resume ? "a" : "w");
    if (!metrics) fprintf(stderr, "ddp_train: cannot write %s: %s\n", o.metrics, strerror(errno));
    else if (!o.resume)
      fprintf(metrics, "epoch,global_step,train_loss,test_acc,samples_per_s,epoch_s,lr\n");
  }
  if (rank == 0 && o.log_steps) {
    steplog = fopen(o.log_steps, "w");
    if (!steplog) fprintf(stderr, "ddp_train: cannot write %s: %s\n", o.log_steps, strerror(errno));
  }
  int progress = o.progress > 0 || (o.progress < 0 && isatty(STDOUT_FILENO) &&
                                     !getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMI_RANK") &&
                                     !getenv("PMIX_RANK"));
  progress = progress && rank == 0;

  if (rank == 0) {
    printf("# ddp_train: %s (%zu parameters), Fashion-MNIST %llu train / %llu test images\n",
           m.desc, m.total, (unsigned long long)tri.count, (unsigned long long)n_test);
    printf("# ranks %d, per-rank batch %ld, global batch %ld, %llu steps/epoch, %d epochs\n",
           size, o.batch, o.batch * size, (unsigned long long)steps, o.epochs);
    printf("# SGD lr %g momentum %g wd %g, warmup %llu steps then cosine to 0 over %llu steps\n",
           o.lr, o.momentum, o.wd, (unsigned long long)warmup, (unsigned long long)total_steps);
    if (o.sync == SYNC_REDUCER)
      printf("# grad sync: reducer, %zu bucket(s) (cap %g MB), hook %s, algo %s, buckets on %s; "
             "BLAS threads %d\n", rs.nbuckets, o.bucket_cap_mb, hook_name(o.hook),
             o.algo ? o.algo : "auto", o.device ? devdesc : "host", o.threads);
    else if (o.sync == SYNC_LANES)
      printf("# grad sync: deterministic, %ld lanes (%ld per rank), one f64 allreduce of %zu "
             "gradients after backward; BLAS threads %d\n", o.lanes, o.lanes / size, m.total,
             o.threads);
    else
      printf("# grad sync: one MPI_Allreduce of all %zu gradients after backward; BLAS threads %d\n",
             m.total, o.threads);
    if (o.device)
      printf("# model arithmetic: %s%s%s\n", gpu_math ? "GPU, " : "", gpu_note,
             gpu_math && o.checkpoint_activations ? " (--checkpoint-activations: host model only)"
                                                  : "");
    if (o.amp != TRAIN_AMP_NONE)
      printf("# mixed precision (%s): %s operands, f32 accumulation and master weights%s\n",
             gpu_math ? "GPU" : "CPU emulation", amp_name(o.amp),
             o.amp == TRAIN_AMP_FP16 ? ", dynamic loss scaling" : "");
    printf("# activation memory per rank: %.2f MB %s (%.2f MB %s, %.0f%% saved)\n",
           (double)m.act_bytes / 1048576.0,
           o.checkpoint_activations ? "with checkpointing" : "without checkpointing",
           (double)(o.checkpoint_activations ? m.act_bytes_full : m.act_bytes_ckpt) / 1048576.0,
           o.checkpoint_activations ? "without" : "with --checkpoint-activations",
           100.0 * (1.0 - (double)m.act_bytes_ckpt / (double)m.act_bytes_full));
    if (o.resume)
      printf("# resumed from %s at epoch %llu step %llu (global step %llu)\n", o.resume,
             (unsigned long long)start_epoch + 1, (unsigned long long)start_step,
             (unsigned long long)global_step);
    printf("%5s %11s %9s %11s %8s\n", "epoch", "train_loss", "test_acc", "samples/s", "time_s");
    fflush(stdout);
  }

  ready_ctx_t rctx = {.reducer = reducer, .st = DDP_OK, .comm = comm, .stream = stream,
                      .host_grad = host_grad, .dev_grad = o.device && !gpu_math ? dev_grad : NULL,
                      .count = m.count};
  double acc = 0.0, run_t0 = train_now();
  int stopped = 0;
  for (uint64_t epoch = start_epoch; epoch < (uint64_t)o.epochs && !stopped; epoch++) {
    double t0 = train_now();
    APP_CHECK(ddp_loader_start_epoch(loader, epoch));
    uint64_t first = epoch == start_epoch ? start_step : 0;
    double loss_sum = epoch == start_epoch ? resume_loss_sum : 0.0;
    uint64_t loss_steps = epoch == start_epoch ? resume_loss_steps : 0;
    ddp_batch_t b;
    for (uint64_t s = 0; s < first; s++) APP_CHECK(ddp_loader_next(loader, &b)); /* skip done */
    double lr = 0.0;
    uint64_t samples = 0;
    for (uint64_t s = first; s < steps; s++) {
      APP_CHECK(ddp_loader_next(loader, &b));
      if (b.count == 0) break;
      double loss = 0.0;
      lr = train_lr(o.lr, global_step, warmup, total_steps);
#if DDP_TRAIN_GPU
      if (gpu_math) {
        if (gpu_step(tg, comm, reducer, &rctx, &m, &b, &o, &scaler, dev_flag, (float)lr, &loss))
          return 1;
      } else
#endif
      {
        if (reducer && o.device) {
          for (size_t i = 0; i < m.nparams; i++) {
            APP_CHECK(ddp_reducer_grad(reducer, i, &dev_grad[i]));
            m.grad[i] = host_grad[i];
          }
        } else if (reducer) {
          for (size_t i = 0; i < m.nparams; i++) APP_CHECK(ddp_reducer_grad(reducer, i, (void **)&m.grad[i]));
        }
        m.loss_scale = scaler.scale;
        if (o.sync == SYNC_LANES) {
          /* Local sample j sits at position rank + j * size of the global batch, so its lane is
           * (rank + j * size) mod L: the rank owns lanes rank, rank + size, ... (local lane
           * j mod (L / size)). */
          size_t per = (size_t)(o.lanes / size), E = m.in_elems;
          memset(grad64, 0, sizeof(double) * (m.total + 1));
          for (size_t k = 0; k < per; k++) {
            size_t n = 0;
            for (size_t j = k; j < b.count; j += per, n++) {
              memcpy(lane_x + n * E, b.x + j * E, sizeof(float) * E);
              lane_y[n] = b.y[j];
            }
            if (n == 0) continue;
            loss += tm_forward(&m, lane_x, lane_y, (int)n) * (double)n;
            tm_backward(&m, lane_x, lane_y, (int)n, NULL, NULL);
            for (size_t e = 0; e < m.total; e++) grad64[e] += (double)flat_grad[e] * (double)n;
          }
          loss /= (double)b.count;
          grad64[m.total] = (double)b.count;
          APP_CHECK(ddp_allreduce(comm, DDP_IN_PLACE, grad64, m.total + 1, DDP_F64, DDP_SUM, NULL));
          for (size_t e = 0; e < m.total; e++) flat_grad[e] = (float)(grad64[e] / grad64[m.total]);
        } else {
          loss = tm_forward(&m, b.x, b.y, (int)b.count);
          tm_backward(&m, b.x, b.y, (int)b.count, on_grad_ready, &rctx);
          APP_CHECK(rctx.st);
        }
        if (o.sync == SYNC_LANES) {
          /* averaged above */
        } else if (reducer) {
          APP_CHECK(ddp_reducer_finish(reducer));
          /* finish() may rebuild the buckets (first iteration): fetch the views again. */
          if (o.device) {
            for (size_t i = 0; i < m.nparams; i++) {
              APP_CHECK(ddp_reducer_grad(reducer, i, &dev_grad[i]));
              APP_CHECK(ddp_memcpy_async(comm, host_grad[i], dev_grad[i], m.count[i] * sizeof(float), stream));
            }
            APP_CHECK(ddp_stream_synchronize(comm, stream));
          } else {
            for (size_t i = 0; i < m.nparams; i++) APP_CHECK(ddp_reducer_grad(reducer, i, (void **)&m.grad[i]));
          }
        } else {
          if (MPI_Allreduce(MPI_IN_PLACE, flat_grad, (int)m.total, MPI_FLOAT, MPI_SUM, world) != MPI_SUCCESS)
            MPI_Abort(MPI_COMM_WORLD, 1);
          float inv = 1.0f / (float)size;
          for (size_t k = 0; k < m.total; k++) flat_grad[k] *= inv;
        }
        int take_step = 1;
        if (o.amp == TRAIN_AMP_FP16) {
          /* Every rank holds the same averaged gradients, so every rank decides the same. */
          for (size_t i = 0; i < m.nparams; i++)
            take_step &= train_unscale_check(m.grad[i], m.count[i], scaler.scale);
          train_scaler_update(&scaler, take_step);
        }
        if (take_step)
          for (size_t i = 0; i < m.nparams; i++)
            train_sgd_step(m.param[i], m.grad[i], mom[i], m.count[i], (float)lr, (float)o.momentum,
                           (float)o.wd);
      }
      global_step++;
      loss_sum += loss;
      loss_steps++;
      samples += b.count;
      if (steplog) fprintf(steplog, "%llu %.9g %.9g\n", (unsigned long long)global_step, loss, lr);
      if (progress && (s % 20 == 0 || s + 1 == steps)) {
        printf("\r  epoch %llu [%5llu/%5llu] loss %.4f", (unsigned long long)epoch + 1,
               (unsigned long long)s + 1, (unsigned long long)steps, loss_sum / (double)loss_steps);
        fflush(stdout);
      }
      int last_step = s + 1 == steps;
      int do_ckpt = o.checkpoint && o.checkpoint_every &&
                    (global_step % (uint64_t)o.checkpoint_every == 0);
      int stop_now = o.stop_after && global_step >= (uint64_t)o.stop_after;
      if (do_ckpt && !last_step) {
        /* Mid-epoch position: this epoch, s + 1 batches done; the loss sum is the mean over
         * ranks so that every rank resumes with the same running value. */
#if DDP_TRAIN_GPU
        if (rank == 0) gpu_download(tg, &m, mom);
#endif
        double g = 0.0;
        MPI_Allreduce(&loss_sum, &g, 1, MPI_DOUBLE, MPI_SUM, world);
        if (rank == 0) {
          ckpt_state_t st = {.nparams = (uint32_t)m.nparams, .world = size,
                             .batch = (uint64_t)o.batch, .seed = o.seed, .epoch = epoch,
                             .step_in_epoch = s + 1, .global_step = global_step, .rng = rng,
                             .loss_sum = g / size, .loss_steps = loss_steps,
                             .epochs = (uint64_t)o.epochs};
          save_checkpoint(&o, &m, mom, &scaler, &st);
        }
      }
      if (stop_now) {
        stopped = 1;
        break;
      }
    }
    double t_train = train_now() - t0;
#if DDP_TRAIN_GPU
    gpu_download(tg, &m, mom); /* evaluation, checkpoint and the final CRC read the host copy */
#endif
    if (progress) printf("\r\033[K");
    if (stopped) {
      if (rank == 0) printf("# stopped after global step %llu (--stop-after)\n", (unsigned long long)global_step);
      break;
    }
    double gsum = 0.0;
    MPI_Allreduce(&loss_sum, &gsum, 1, MPI_DOUBLE, MPI_SUM, world);
    double epoch_loss = loss_steps ? gsum / size / (double)loss_steps : 0.0;
    uint64_t gsamples = 0;
    MPI_Allreduce(&samples, &gsamples, 1, MPI_UINT64_T, MPI_SUM, world);
    if (evaluate(&m, test, n_test, world, rank, size, xbuf, ybuf, &acc) != 0) {
      fprintf(stderr, "ddp_train: evaluation failed: %s\n", ddp_last_error());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    double t_epoch = train_now() - t0;
    double sps = t_train > 0 ? (double)gsamples / t_train : 0.0;
    if (rank == 0) {
      printf("%5llu %11.6f %8.2f%% %11.1f %8.2f\n", (unsigned long long)epoch + 1, epoch_loss,
             100.0 * acc, sps, t_epoch);
      fflush(stdout);
      if (metrics) {
        fprintf(metrics, "%llu,%llu,%.9g,%.6f,%.1f,%.3f,%.6g\n", (unsigned long long)epoch + 1,
                (unsigned long long)global_step, epoch_loss, acc, sps, t_epoch, lr);
        fflush(metrics);
      }
    }
    /* End-of-epoch checkpoint: position (next epoch, step 0). */
    if (o.checkpoint && (!o.checkpoint_every || global_step % (uint64_t)o.checkpoint_every == 0) &&
        rank == 0) {
      ckpt_state_t st = {.nparams = (uint32_t)m.nparams, .world = size, .batch = (uint64_t)o.batch,
                         .seed = o.seed, .epoch = epoch + 1, .step_in_epoch = 0,
                         .global_step = global_step, .rng = rng, .loss_sum = 0.0, .loss_steps = 0,
                         .epochs = (uint64_t)o.epochs};
      save_checkpoint(&o, &m, mom, &scaler, &st);
    }
  }
  if (!stopped && start_epoch >= (uint64_t)o.epochs &&
      evaluate(&m, test, n_test, world, rank, size, xbuf, ybuf, &acc) != 0) {
    /* Resumed from the end of the last epoch: nothing to train, report the model as is. */
    fprintf(stderr, "ddp_train: evaluation failed: %s\n", ddp_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (rank == 0 && !stopped) {
    printf("final: test accuracy %.2f%% after %d epochs (%d ranks, global batch %ld), %.1f s\n",
           100.0 * acc, o.epochs, size, o.batch * size, train_now() - run_t0);
    if (o.amp == TRAIN_AMP_FP16)
      printf("# amp fp16: %llu step(s) skipped for inf/nan gradients, loss scale now %g\n",
             (unsigned long long)scaler.skipped, (double)scaler.scale);
    printf("# final parameters: CRC32 0x%08x over %zu f32 values\n",
           ckpt_crc32(m.param_block, sizeof(float) * m.total), m.total);
    if (reducer && ddp_reducer_stats(reducer, &rs) == DDP_OK && rs.iterations)
      printf("# reducer: %zu buckets, comm %.3f ms/step, exposed %.3f ms/step, %.0f%% hidden\n",
             rs.nbuckets, rs.comm_ms_avg, rs.exposed_ms_avg, 100.0 * rs.hidden_fraction);
  }
  if (metrics) fclose(metrics);
  if (steplog) fclose(steplog);
#if DDP_TRAIN_GPU
  tg_destroy(tg);
  if (dev_flag) APP_CHECK(ddp_device_free(comm, dev_flag));
#endif
  if (reducer) APP_CHECK(ddp_reducer_destroy(&reducer));
  for (size_t i = 0; i < m.nparams; i++)
    if (dev_param[i]) APP_CHECK(ddp_device_free(comm, dev_param[i]));
  if (stream) APP_CHECK(ddp_stream_destroy(comm, &stream));
  ddp_loader_destroy(&loader);
  ddp_sampler_destroy(&sampler);
  ddp_dataset_destroy(&train);
  ddp_dataset_destroy(&test);
  tm_free(&m);
  free(mom_block);
  free(flat_grad);
  free(grad64);
  free(lane_x);
  free(lane_y);
  free(xbuf);
  free(ybuf);
  APP_CHECK(ddp_finalize(&comm));
  return 0;
}
