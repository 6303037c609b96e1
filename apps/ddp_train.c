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
#include <sys/mman.h>
#include <unistd.h>

#include "app_blas.h"
#include "app_check.h"
#include "app_opts.h"
#include "checkpoint.h"
#include "ddp.h"
#include "fmnist.h"
#include "train_model.h"
#include "train_optim.h"
#include "train_elastic.h"
#include "train_restart.h"
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
  const char *checkpoint_dir; /* --checkpoint-dir: numbered checkpoints + LATEST (ckpt_dir.h) */
  long keep;                  /* --keep: checkpoints kept in it */
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
  train_optim_kind_t optim; /* --optim */
  int zero;                 /* --zero 0|1|2 */
  int elastic_batch;        /* --elastic-batch: another world size may change the global batch */
} opts_t;

static void usage(FILE *f) {
  fprintf(f,
          "usage: mpirun -np N ddp_train [options]\n"
          "  --epochs N               epochs (default 10)\n"
          "  --batch N                per-rank batch; global batch = N x ranks (default 64)\n"
          "  --lr X                   peak learning rate (default 0.05 SGD, 0.001 AdamW)\n"
          "  --optim sgd|adamw        optimizer: SGD with momentum (default) or AdamW (betas 0.9,\n"
          "                           0.999, eps 1e-8, decoupled weight decay, torch.optim.AdamW)\n"
          "  --momentum X             SGD momentum (default 0.9)\n"
          "  --wd X                   weight decay (default 5e-4 SGD, 0.01 AdamW)\n"
          "  --zero 0|1|2             1 (ZeRO-1): gradients reduce-scattered, each rank updates and\n"
          "                           keeps optimizer state for its shard only, parameters\n"
          "                           allgathered; 2 (ZeRO-2): also gives the gradient memory\n"
          "                           outside its shard back between steps (default 0)\n"
          "  --warmup N               warmup steps (default min(200, total/10))\n"
          "  --model mlp|cnn          MLP 784-512-256-10 or conv5x5(16)-pool-conv5x5(32)-pool-fc\n"
          "  --seed N                 parameter init and data-order seed (default 0)\n"
          "  --algo NAME              allreduce algorithm of the reducer (auto, mpi, ring, ...)\n"
          "  --bucket-cap-mb X        reducer bucket cap (default 10)\n"
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
          "  --resume FILE            continue from a checkpoint (same --seed; same -np and\n"
          "                           --batch, or another -np with the checkpoint's global\n"
          "                           batch: per-rank batch x accumulation chosen to match)\n"
          "  --elastic-batch          another -np whose ranks cannot split the global batch\n"
          "                           evenly: take the closest one instead of refusing\n"
          "  --checkpoint-dir DIR     numbered checkpoints in DIR (instead of --checkpoint), a\n"
          "                           pointer DIR/LATEST to the newest complete one, and the\n"
          "                           newest --keep K kept (default 2); SIGTERM or SIGUSR1 then\n"
          "                           stops every rank at one agreed step, writes a checkpoint\n"
          "                           and exits with status 75 (resume it; apps/ddp_run)\n"
          "  --resume auto            the newest checkpoint of --checkpoint-dir that validates,\n"
          "                           falling back to older ones if it is damaged; none: start\n"
          "                           from scratch (with --checkpoint FILE: FILE if it exists)\n"
          "  --limit-steps N          at most N steps per epoch (quick runs, tests)\n"
          "  --limit-test N           evaluate on the first N test images only\n"
          "  --stop-after N           stop after global step N, as if interrupted (tests)\n"
          "  --log-steps FILE         write every step's loss (rank 0's local batch) to FILE\n"
          "  --progress / --no-progress  progress line during an epoch (default: on when\n"
          "                           stdout is a terminal and not under mpirun, which gives\n"
          "                           every rank a pseudo-terminal even when piped)\n",
          FMNIST_DEFAULT_DIR);
}

/* Messages of the argument parser: every rank parses, only rank 0 speaks. */
#define PERR(...)                               \
  do {                                          \
    if (!quiet) fprintf(stderr, __VA_ARGS__);   \
  } while (0)

/* The option table over o; the enum-valued options land in the ints of e (then copied: an
 * enum's storage need not be an int's). */
typedef struct {
  int model, hook, sync, amp, device, optim, sync_at, lanes_at;
} enum_args_t;

static int parse_table(int argc, char **argv, opts_t *o, enum_args_t *e, int quiet) {
  static const char *const models[] = {"mlp", "cnn", NULL}, *const syncs[] = {"reducer", "mpi", NULL},
                           *const halves[] = {"none", "fp16", "bf16", NULL},
                           *const devices[] = {"host", "cuda", NULL}, *const optims[] = {"sgd", "adamw", NULL};
  static const int hooks[] = {DDP_HOOK_NONE, DDP_HOOK_FP16, DDP_HOOK_BF16},
                   amps[] = {TRAIN_AMP_NONE, TRAIN_AMP_FP16, TRAIN_AMP_BF16}, sync_kinds[] = {SYNC_REDUCER, SYNC_MPI},
                   optim_kinds[] = {TRAIN_OPTIM_SGD, TRAIN_OPTIM_ADAMW};
  const app_opt_t table[] = {
      APP_INT("--epochs", &o->epochs, 1, 100000), APP_LONG("--batch", &o->batch, 1, 65536),
      APP_DOUBLE("--lr", &o->lr, 0.0, 100.0), APP_DOUBLE("--momentum", &o->momentum, 0.0, 0.999999),
      APP_DOUBLE("--wd", &o->wd, 0.0, 1.0), APP_ENUM("--optim", &e->optim, optims, optim_kinds),
      APP_INT("--zero", &o->zero, 0, 2), APP_LONG("--warmup", &o->warmup, 0, LONG_MAX),
      APP_ENUM("--model", &e->model, models, NULL), APP_U64("--seed", &o->seed),
      APP_STR("--algo", &o->algo), APP_DOUBLE("--bucket-cap-mb", &o->bucket_cap_mb, 0.001, 65536.0),
      APP_ENUM("--hook", &e->hook, halves, hooks), APP_ENUM("--amp", &e->amp, halves, amps),
      /* the later of --sync and --deterministic (its lanes) decides the exchange */
      {.names = "--sync", .kind = APP_OPT_ENUM, .target = &e->sync, .choices = syncs,
       .values = sync_kinds, .seen = &e->sync_at},
      {.names = "--deterministic", .kind = APP_OPT_LONG, .target = &o->lanes, .min = 1, .max = 4096,
       .seen = &e->lanes_at},
      APP_DOUBLE("--loss-scale", &o->loss_scale, 1.0, 1e30),
      APP_ENUM("--device", &e->device, devices, NULL), APP_STR("--data", &o->data),
      APP_STR("--metrics", &o->metrics), APP_FLAG("--checkpoint-activations", &o->checkpoint_activations, 1),
      APP_INT("--threads", &o->threads, 1, 1024), APP_STR("--checkpoint", &o->checkpoint),
      APP_LONG("--checkpoint-every", &o->checkpoint_every, 1, LONG_MAX), APP_STR("--resume", &o->resume),
      APP_STR("--checkpoint-dir", &o->checkpoint_dir), APP_LONG("--keep", &o->keep, 1, 1000000),
      APP_LONG("--limit-steps", &o->limit_steps, 1, LONG_MAX),
      APP_LONG("--limit-test", &o->limit_test, 1, LONG_MAX),
      APP_LONG("--stop-after", &o->stop_after, 1, LONG_MAX), APP_STR("--log-steps", &o->log_steps),
      APP_FLAG("--no-progress", &o->progress, 0), APP_FLAG("--progress", &o->progress, 1),
      APP_FLAG("--elastic-batch", &o->elastic_batch, 1),
      APP_OPTS_END};
  int pr = app_opts_parse("ddp_train", table, argc, argv, quiet ? NULL : stderr);
  if (pr == APP_OPTS_HELP && !quiet) usage(stdout);
  if (pr != APP_OPTS_OK) return pr;
  o->model = models[e->model];
  o->hook = (ddp_hook_t)e->hook;
  o->sync = e->lanes_at > e->sync_at ? SYNC_LANES : (sync_kind_t)e->sync;
  o->amp = (train_amp_t)e->amp;
  o->device = e->device;
  o->optim = (train_optim_kind_t)e->optim;
  return 0;
}

/* Returns 0 ok, 1 help printed, -1 error. */
static int parse_args(int argc, char **argv, opts_t *o, int quiet) {
  *o = (opts_t){.epochs = 10, .batch = 64, .lr = -1.0, .momentum = 0.9, .wd = -1.0,
                .warmup = -1, .model = "mlp", .seed = 0, .algo = NULL, .bucket_cap_mb = 10.0,
                .hook = DDP_HOOK_NONE, .data = NULL, .threads = 1, .sync = SYNC_REDUCER, .progress = -1, .loss_scale = 65536.0};
  o->keep = 2;
  enum_args_t e = {.hook = DDP_HOOK_NONE, .sync = SYNC_REDUCER, .amp = TRAIN_AMP_NONE,
                   .optim = TRAIN_OPTIM_SGD};
  int pr = parse_table(argc, argv, o, &e, quiet);
  if (pr != 0) return pr;
  int adamw = o->optim == TRAIN_OPTIM_ADAMW;
  if (o->lr < 0.0) o->lr = adamw ? 1e-3 : 0.05;
  if (o->wd < 0.0) o->wd = adamw ? 0.01 : 5e-4;
  if (o->zero && (o->sync == SYNC_MPI || o->device || o->hook != DDP_HOOK_NONE ||
                  o->amp == TRAIN_AMP_FP16)) {
    PERR("ddp_train: --zero %d needs the reducer or --deterministic, host buckets, no --hook and "
         "no --amp fp16\n", o->zero);
    return -1;
  }
  if (adamw && o->device) {
    PERR("ddp_train: --optim adamw runs on the host only (not with --device cuda)\n");
    return -1;
  }
  if (o->device && o->sync != SYNC_REDUCER) {
    PERR("ddp_train: --device cuda needs the reducer (not --sync mpi or --deterministic)\n");
    return -1;
  }
  if (o->checkpoint_every && !o->checkpoint && !o->checkpoint_dir) {
    PERR("ddp_train: --checkpoint-every needs --checkpoint FILE or --checkpoint-dir DIR\n");
    return -1;
  }
  if (o->checkpoint && o->checkpoint_dir) {
    PERR("ddp_train: --checkpoint FILE and --checkpoint-dir DIR exclude each other\n");
    return -1;
  }
  if (o->resume && strcmp(o->resume, "auto") == 0 && !o->checkpoint && !o->checkpoint_dir) {
    PERR("ddp_train: --resume auto needs --checkpoint-dir DIR (or --checkpoint FILE)\n");
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

typedef struct trainer trainer_t;

/* The training step, one signature for every way of averaging the gradients (the reducer,
 * --deterministic lanes, --sync mpi, the model on a GPU; chosen once, by pick_step): forward
 * and backward of batch b, the exchange and the optimizer update at learning rate lr; *loss is
 * the local batch's mean loss. Returns 0, or 1 after printing why (APP_CHECK). */
typedef int (*step_fn)(trainer_t *t, const ddp_batch_t *b, float lr, double *loss);

/* Everything one rank trains with. */
struct trainer {
  opts_t o;
  ddp_comm_t *comm;
  MPI_Comm world;
  int rank, size;
  ddp_dataset_t *train, *test;
  ddp_dataset_info_t tri, tei;
  ddp_sampler_t *sampler;
  ddp_loader_t *loader;
  uint64_t steps, total_steps, warmup, n_test; /* steps per epoch; test images evaluated */
  train_model_t m;       /* its own gradient storage is the flat buffer of --sync mpi,
                            --deterministic and --device cuda (host_grad) */
  train_optim_t *opt;    /* --zero: created at the first update, over this rank's shard */
  size_t shard_begin[TM_MAX_PARAMS], shard_count[TM_MAX_PARAMS]; /* the range of each tensor
                            the optimizer updates: all of it, or (--zero) this rank's shard */
  double *lane_blk;      /* --deterministic --zero: this rank's block of the f64 reduce-scatter */
  size_t lane_len;       /* grad64 elements (padded to a multiple of the ranks with --zero) */
  train_scaler_t scaler;
  uint64_t rng;
  uint64_t start_epoch, start_step, global_step; /* 0, or the checkpoint's position */
  double resume_loss_sum;
  uint64_t resume_loss_steps;
  /* Resumed at another world size (train_elastic.h): the plan, and the checkpoint's world and
   * per-rank batch; o.batch is then the plan's batch x accum. */
  int elastic;
  elastic_plan_t eplan;
  int from_world;
  uint64_t from_batch;
  float *xbuf;           /* evaluation batch */
  int32_t *ybuf;
  double *grad64;        /* --deterministic: lane-weighted gradient sum, then the sample count */
  float *lane_x;
  int32_t *lane_y;
  ddp_reducer_t *reducer;
  ddp_reducer_stats_t rs;
  ddp_stream_t *stream;  /* --device cuda */
  void *dev_param[TM_MAX_PARAMS], *dev_grad[TM_MAX_PARAMS];
  float *host_grad[TM_MAX_PARAMS];
  char devdesc[160];
  ready_ctx_t rctx;
  step_fn step;
  int gpu_math;          /* the model's arithmetic runs on the GPU */
  const char *gpu_note;
#if DDP_TRAIN_GPU
  tg_model_t *tg;
  int *dev_flag;
#endif
  FILE *metrics, *steplog;
  int progress;
  /* Restarts (train_restart.h): stop on request, checkpoints, the resumed one's bytes until
   * the optimizer takes its state (--zero: at the first update). */
  train_restart_t rst;
  float *state_ptr[CKPT_MAX_STATE * TM_MAX_PARAMS]; /* the optimizer's state, as the layout names it */
};

#if DDP_TRAIN_GPU
/* The optimizer's state (momentum buffers, NULL for plain SGD), as the GPU model reads and
 * writes it (checkpoints take gather_state's block). */
static float **opt_state(trainer_t *t) { return (float **)train_optim_state(t->opt); }
#endif

/* The optimizer options of the run (--optim, --momentum, --wd). */
static void optim_opts(const opts_t *o, train_optim_opts_t *oo) {
  if (o->optim == TRAIN_OPTIM_ADAMW) train_optim_opts_adamw(oo);
  else train_optim_opts_default(oo), oo->momentum = (float)o->momentum;
  oo->wd = (float)o->wd;
}

/* State buffers a checkpoint of this run holds (a stateless SGD stores one buffer of zeros). */
static uint32_t ckpt_nstate(const opts_t *o) { return o->optim == TRAIN_OPTIM_ADAMW ? 2u : 1u; }

/* --deterministic --zero: the flat gradient vector is cut into blocks of lane_blk_elems(t)
 * elements, rank r owning block r (the f64 reduce-scatter's blocks). */
static size_t lane_blk_elems(const trainer_t *t) {
  return (t->m.total + (size_t)t->size - 1) / (size_t)t->size;
}

/* The state a checkpoint of this run holds, as this rank sees it: the parameters, the
 * optimizer's buffers over this rank's ranges (all of every tensor, or its --zero shard). */
static train_restart_layout_t restart_layout(trainer_t *t) {
  size_t np = t->m.nparams, nst = t->opt ? train_optim_nstate(t->opt) : 0;
  for (size_t k = 0; k < nst; k++)
    for (size_t i = 0; i < np; i++) t->state_ptr[k * np + i] = train_optim_state_buf(t->opt, k)[i];
  return (train_restart_layout_t){.nparams = np, .count = t->m.count, .param = t->m.param,
                                  .nstate = nst, .state = t->state_ptr,
                                  .shard_begin = t->shard_begin, .shard_count = t->shard_count,
                                  .sharded = t->o.zero != 0};
}

/* A resumed checkpoint's optimizer state and step count, once the optimizer exists. */
static void restore_optim(trainer_t *t) {
  if (!t->opt || !t->rst.state_pending) return;
  train_restart_layout_t lay = restart_layout(t);
  train_restart_take_state(&t->rst, &lay);
  train_optim_set_steps(t->opt, t->rst.view.st.optim_steps);
}

/* The optimizer over the range of each tensor this rank updates: everything, or with --zero
 * its shard (the reducer's after its first finish; --deterministic: its block of the flat
 * vector), with state for that range only. A pending resume state is taken over here. */
static int ensure_optim(trainer_t *t) {
  train_model_t *m = &t->m;
  if (t->opt) return 0;
  if (t->o.zero && t->o.sync == SYNC_REDUCER) {
    for (size_t i = 0; i < m->nparams; i++)
      APP_CHECK(ddp_reducer_shard_range(t->reducer, i, &t->shard_begin[i], &t->shard_count[i]));
  } else { /* the whole model, or (--zero, --deterministic) this rank's block of it */
    elastic_flat_shard(m->count, m->nparams, t->o.zero ? t->size : 1, t->o.zero ? t->rank : 0,
                       t->shard_begin, t->shard_count);
  }
  train_optim_opts_t oo;
  optim_opts(&t->o, &oo);
  if (train_optim_create(&oo, t->shard_count, m->nparams, &t->opt) != 0) {
    fprintf(stderr, "ddp_train: out of memory for the optimizer\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  restore_optim(t);
  return 0;
}

/* --zero with the reducer: waits for the parameter allgather of the last update, before the
 * parameters are read (forward pass, evaluation, checkpoint, final CRC). */
static int params_sync(trainer_t *t) {
  if (t->reducer && t->o.zero) APP_CHECK(ddp_reducer_param_wait(t->reducer, SIZE_MAX));
  return 0;
}

/* --zero 2 without the reducer (--deterministic): gives the whole pages of buf[0 .. n) outside
 * elements [lo, hi) back to the system; they read as zeros when touched again. */
static void release_outside(void *buf, size_t es, size_t n, size_t lo, size_t hi) {
  long pg = sysconf(_SC_PAGESIZE);
  uintptr_t page = pg > 0 ? (uintptr_t)pg : 4096, base = (uintptr_t)buf;
  uintptr_t gaps[2][2] = {{base, base + lo * es}, {base + hi * es, base + n * es}};
  for (int g = 0; g < 2; g++) {
    uintptr_t a = (gaps[g][0] + page - 1) & ~(page - 1), e = gaps[g][1] & ~(page - 1);
    if (e > a) (void)madvise((void *)a, e - a, MADV_DONTNEED);
  }
}

/* After the gradients are averaged: fp16 unscale and inf/nan check (skip the step and back off
 * the scale), then the optimizer (on this rank's shard with --zero). Every rank holds the same
 * averaged gradients, so every rank decides the same. */
static int host_update(trainer_t *t, float lr) {
  train_model_t *m = &t->m;
  int take_step = 1;
  if (t->o.amp == TRAIN_AMP_FP16) {
    for (size_t i = 0; i < m->nparams; i++)
      take_step &= train_unscale_check(m->grad[i], m->count[i], t->scaler.scale);
    train_scaler_update(&t->scaler, take_step);
  }
  if (ensure_optim(t) != 0) return 1;
  if (take_step) train_optim_step_at(t->opt, m->param, m->grad, t->shard_begin, lr);
  return 0;
}

/* The reducer's gradient buffers for the host model: bucket views on the host, or (--device
 * cuda) the device views the host gradients are copied to, the model writing its own storage. */
static int point_grads(trainer_t *t) {
  void *g[TM_MAX_PARAMS];
  APP_CHECK(ddp_reducer_grads(t->reducer, g, t->m.nparams));
  if (!t->o.device) {
    tm_set_grads(&t->m, g);
    return 0;
  }
  memcpy(t->dev_grad, g, sizeof(void *) * t->m.nparams);
  tm_set_grads(&t->m, NULL);
  return 0;
}

/* The bucketed reducer: each gradient goes out as soon as backward completes it. */
static int step_reducer(trainer_t *t, const ddp_batch_t *b, float lr, double *loss) {
  train_model_t *m = &t->m;
  if (params_sync(t) != 0 || point_grads(t) != 0) return 1;
  m->loss_scale = t->scaler.scale;
  *loss = tm_forward(m, b->x, b->y, (int)b->count);
  tm_backward(m, b->x, b->y, (int)b->count, 0, on_grad_ready, &t->rctx);
  APP_CHECK(t->rctx.st);
  APP_CHECK(ddp_reducer_finish(t->reducer));
  /* finish() may rebuild the buckets (first iteration): fetch the views again. */
  if (point_grads(t) != 0) return 1;
  if (t->o.device) {
    for (size_t i = 0; i < m->nparams; i++)
      APP_CHECK(ddp_memcpy_async(t->comm, t->host_grad[i], t->dev_grad[i],
                                 m->count[i] * sizeof(float), t->stream));
    APP_CHECK(ddp_stream_synchronize(t->comm, t->stream));
  }
  if (host_update(t, lr) != 0) return 1;
  /* --zero: every rank updated its shard; the others' arrive while the next batch loads. */
  if (t->o.zero) APP_CHECK(ddp_reducer_allgather_params(t->reducer));
  return 0;
}

/* --deterministic --zero: the f64 lane sums are reduce-scattered instead of allreduced (the
 * sums are exact, so this rank's block holds bitwise what the allreduce gives), the update runs
 * on that block only and the f32 parameters are allgathered: the same bits as --zero 0. */
static int lanes_zero(trainer_t *t, double count, float lr) {
  train_model_t *m = &t->m;
  float *flat = m->grad_block;
  size_t blk = lane_blk_elems(t), lo = blk * (size_t)t->rank;
  lo = lo < m->total ? lo : m->total;
  size_t hi = lo + blk < m->total ? lo + blk : m->total;
  APP_CHECK(ddp_allreduce(t->comm, DDP_IN_PLACE, &count, 1, DDP_F64, DDP_SUM, NULL));
  APP_CHECK(ddp_reduce_scatter(t->comm, t->grad64, t->lane_blk, blk, DDP_F64, DDP_SUM, NULL));
  for (size_t e = lo; e < hi; e++) flat[e] = (float)(t->lane_blk[e - lo] / count);
  if (t->o.zero == 2) { /* only this rank's block of either gradient buffer is needed now */
    release_outside(t->grad64, sizeof(double), t->lane_len, blk * (size_t)t->rank,
                    blk * (size_t)(t->rank + 1));
    release_outside(flat, sizeof(float), m->total, lo, hi);
  }
  if (host_update(t, lr) != 0) return 1;
  int *counts = malloc(sizeof(int) * 2 * (size_t)t->size), *displs = counts + t->size;
  for (int q = 0; counts && q < t->size; q++) {
    size_t a = blk * (size_t)q, e = a + blk;
    a = a < m->total ? a : m->total;
    e = e < m->total ? e : m->total;
    counts[q] = (int)(e - a), displs[q] = (int)a;
  }
  int rc = counts ? MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, m->param_block, counts, displs,
                                   MPI_FLOAT, t->world) : MPI_ERR_NO_MEM;
  free(counts);
  if (rc != MPI_SUCCESS) {
    fprintf(stderr, "ddp_train: --deterministic --zero: parameter allgather failed\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return 0;
}

/* --deterministic L: local sample j sits at position rank + j * size of the global batch, so its
 * lane is (rank + j * size) mod L: the rank owns lanes rank, rank + size, ... (local lane
 * j mod (L / size)). Each lane's gradient is computed on its own, weighted and summed in f64,
 * and exchanged with one f64 allreduce. */
static int step_lanes(trainer_t *t, const ddp_batch_t *b, float lr, double *loss) {
  train_model_t *m = &t->m;
  float *flat = m->grad_block;
  size_t per = (size_t)(t->o.lanes / t->size), E = m->in_elems;
  m->loss_scale = t->scaler.scale;
  *loss = 0.0;
  memset(t->grad64, 0, sizeof(double) * t->lane_len);
  for (size_t k = 0; k < per; k++) {
    size_t n = 0;
    for (size_t j = k; j < b->count; j += per, n++) {
      memcpy(t->lane_x + n * E, b->x + j * E, sizeof(float) * E);
      t->lane_y[n] = b->y[j];
    }
    if (n == 0) continue;
    *loss += tm_forward(m, t->lane_x, t->lane_y, (int)n) * (double)n;
    tm_backward(m, t->lane_x, t->lane_y, (int)n, 0, NULL, NULL);
    for (size_t e = 0; e < m->total; e++) t->grad64[e] += (double)flat[e] * (double)n;
  }
  *loss /= (double)b->count;
  if (t->o.zero) return lanes_zero(t, (double)b->count, lr);
  t->grad64[m->total] = (double)b->count;
  APP_CHECK(ddp_allreduce(t->comm, DDP_IN_PLACE, t->grad64, m->total + 1, DDP_F64, DDP_SUM, NULL));
  for (size_t e = 0; e < m->total; e++) flat[e] = (float)(t->grad64[e] / t->grad64[m->total]);
  return host_update(t, lr);
}

/* --sync mpi: one MPI_Allreduce of all gradients after backward (the baseline). */
static int step_mpi(trainer_t *t, const ddp_batch_t *b, float lr, double *loss) {
  train_model_t *m = &t->m;
  m->loss_scale = t->scaler.scale;
  *loss = tm_forward(m, b->x, b->y, (int)b->count);
  tm_backward(m, b->x, b->y, (int)b->count, 0, NULL, NULL);
  if (MPI_Allreduce(MPI_IN_PLACE, m->grad_block, (int)m->total, MPI_FLOAT, MPI_SUM, t->world) != MPI_SUCCESS)
    MPI_Abort(MPI_COMM_WORLD, 1);
  float inv = 1.0f / (float)t->size;
  for (size_t k = 0; k < m->total; k++) m->grad_block[k] *= inv;
  return host_update(t, lr);
}

#if DDP_TRAIN_GPU
static void gpu_fail(const char *what, const char *err) {
  fprintf(stderr, "ddp_train: GPU %s: %s\n", what, err);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

/* The model's arithmetic on the GPU (--device cuda on a CUDA device, MLP): forward/backward
 * write the gradients straight into the reducer's device bucket views on the reducer's stream,
 * grad_ready per parameter as on the host; after the exchange, fp16 unscale + inf/nan check
 * (ddp_device_nonfinite_async) and the SGD step on the device. The loss, the skip decision and
 * the scaler follow the host run's rules exactly. */
static int step_gpu(trainer_t *t, const ddp_batch_t *b, float lr, double *loss) {
  char err[512];
  void *grad[TM_MAX_PARAMS];
  size_t np = t->m.nparams;
  APP_CHECK(ddp_reducer_grads(t->reducer, grad, np));
  if (tg_forward_backward(t->tg, b->x, b->y, (int)b->count, t->scaler.scale, grad, on_grad_ready,
                          &t->rctx, err, sizeof err) != 0)
    gpu_fail("forward/backward", err);
  APP_CHECK(t->rctx.st);
  APP_CHECK(ddp_reducer_finish(t->reducer));
  /* finish() may rebuild the buckets (first iteration): fetch the views again. */
  APP_CHECK(ddp_reducer_grads(t->reducer, grad, np));
  int take_step = 1;
  if (t->o.amp == TRAIN_AMP_FP16) {
    int found = 0;
    if (tg_unscale(t->tg, grad, 1.0f / t->scaler.scale, err, sizeof err) != 0) gpu_fail("unscale", err);
    APP_CHECK(ddp_memset_async(t->comm, t->dev_flag, 0, sizeof(int), t->stream));
    for (size_t i = 0; i < np; i++)
      APP_CHECK(ddp_device_nonfinite_async(t->comm, grad[i], t->m.count[i], DDP_F32, t->dev_flag,
                                           t->stream));
    APP_CHECK(ddp_memcpy_async(t->comm, &found, t->dev_flag, sizeof(int), t->stream));
    APP_CHECK(ddp_stream_synchronize(t->comm, t->stream));
    take_step = !found;
    train_scaler_update(&t->scaler, take_step);
  }
  if (tg_finish_step(t->tg, grad, take_step, lr, (float)t->o.momentum, (float)t->o.wd, loss, err,
                     sizeof err) != 0)
    gpu_fail("SGD step", err);
  return 0;
}
#endif

/* The one place the step kind is chosen. */
static step_fn pick_step(const trainer_t *t) {
#if DDP_TRAIN_GPU
  if (t->gpu_math) return step_gpu;
#endif
  switch (t->o.sync) {
    case SYNC_LANES: return step_lanes;
    case SYNC_MPI: return step_mpi;
    default: return step_reducer;
  }
}

/* The device's parameters and momentum back into the host model (checkpoints, evaluation;
 * only rank 0 with `rank0_only`). No-op without the GPU model. */
static void gpu_download(trainer_t *t, int rank0_only) {
#if DDP_TRAIN_GPU
  char err[512];
  if (t->tg && (!rank0_only || t->rank == 0) &&
      tg_download(t->tg, t->m.param, opt_state(t), err, sizeof err) != 0)
    gpu_fail("download", err);
#else
  (void)t, (void)rank0_only;
#endif
}

/* Parses and checks the arguments on every rank (same verdict everywhere): the lane count, and
 * with --device cuda a device on every rank. Returns 0, 1 (help printed) or -1. */
static int parse_and_check(trainer_t *t, int argc, char **argv) {
  opts_t *o = &t->o;
  int pr = parse_args(argc, argv, o, t->rank != 0);
  if (pr == 0 && o->sync == SYNC_LANES && o->lanes % t->size != 0) {
    if (t->rank == 0)
      fprintf(stderr, "ddp_train: --deterministic %ld needs a lane count that is a multiple of the "
              "%d ranks\n", o->lanes, t->size);
    pr = -1;
  }
  if (pr == 0 && o->device) {
    /* Every rank needs a device; all of them learn whether one lacks it, and leave together. */
    int have = ddp_device_available(t->comm), all = 0;
    MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, t->world);
    if (!have) {
      char why[160];
      ddp_device_describe(t->comm, why, sizeof why);
      fprintf(stderr, "ddp_train: --device cuda: no device on rank %d: %s (a GPU, or "
              "DDP_DEVICE_EMULATE=1 for the host emulation)\n", t->rank, why);
    }
    if (!all) pr = -1;
  }
  return pr;
}

static void *alloc_or_abort(size_t bytes) {
  void *p = malloc(bytes);
  if (!p) {
    fprintf(stderr, "ddp_train: out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return p;
}

/* The datasets, the model (seeded parameters), the optimizer, the loss scaler and the buffers. */
static int setup_model(trainer_t *t) {
  const opts_t *o = &t->o;
  ddp_comm_info_t cinfo;
  APP_CHECK(ddp_comm_info(t->comm, &cinfo));
  app_blas_note(cinfo.local_rank == 0, 1); /* before the header: rank 0 prints first */
  openblas_set_num_threads(o->threads);
  char err[1024];
  if (fmnist_open(o->data, 1, &t->train, err, sizeof err) != DDP_OK ||
      fmnist_open(o->data, 0, &t->test, err, sizeof err) != DDP_OK) {
    fprintf(stderr, "ddp_train: rank %d: %s\n", t->rank, err);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  APP_CHECK(ddp_dataset_info(t->train, &t->tri));
  APP_CHECK(ddp_dataset_info(t->test, &t->tei));
  train_model_t *m = &t->m;
  if (tm_create(m, o->model, (int)o->batch, t->tri.classes, o->checkpoint_activations, err, sizeof err)) {
    if (t->rank == 0) fprintf(stderr, "ddp_train: %s\n", err);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  t->rng = train_rng_seed(o->seed);
  tm_init_params(m, &t->rng);
  if (tm_set_amp(m, o->amp) != 0) {
    fprintf(stderr, "ddp_train: out of memory for --amp\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  t->scaler = (train_scaler_t){.scale = o->amp == TRAIN_AMP_FP16 ? (float)o->loss_scale : 1.0f,
                               .clean = 0, .interval = 2000, .skipped = 0};
  if (!o->zero && ensure_optim(t) != 0) return 1; /* --zero: at the first update */
  t->xbuf = alloc_or_abort(sizeof(float) * (size_t)o->batch * m->in_elems);
  t->ybuf = alloc_or_abort(sizeof(int32_t) * (size_t)o->batch);
  if (o->sync == SYNC_LANES) {
    /* --zero: padded to equal blocks for the reduce-scatter (the padding stays zero) */
    t->lane_len = o->zero ? lane_blk_elems(t) * (size_t)t->size : m->total + 1;
    if (t->lane_len < m->total + 1) t->lane_len = m->total + 1;
    t->grad64 = calloc(t->lane_len, sizeof(double));
    t->lane_blk = alloc_or_abort(sizeof(double) * (lane_blk_elems(t) + 1));
    if (!t->grad64) MPI_Abort(MPI_COMM_WORLD, 1);
    t->lane_x = alloc_or_abort(sizeof(float) * (size_t)o->batch * m->in_elems);
    t->lane_y = alloc_or_abort(sizeof(int32_t) * (size_t)o->batch);
  }
  return 0;
}

/* The batch plan for a checkpoint of another world size (train_elastic.h). --deterministic
 * computes lane by lane, so a step's samples may be any split b' x a' (its micro-batches are one
 * pass over the lanes, whose sizes do not change); the other exchanges have no gradient
 * accumulation: a' = 1 and b' within the model's batch (this run's --batch). Every rank gets
 * the same plan from the same header. Returns 0, or -1 with the reason in err. */
static int elastic_plan_for(const trainer_t *t, const ckpt_view_t *v, elastic_plan_t *p,
                            char *err, size_t errlen) {
  int lanes = t->o.sync == SYNC_LANES;
  if (elastic_plan(v->st.world, v->st.batch, 1, t->size, lanes ? 0 : (uint64_t)t->m.max_batch,
                   lanes ? 0 : 1, t->o.elastic_batch, p, err, errlen) != 0)
    return -1;
  if (lanes) { /* a lane's samples must fit the model's batch */
    uint64_t per = (uint64_t)(t->o.lanes / t->size), mine = p->batch * p->accum;
    if ((mine + per - 1) / per > (uint64_t)t->m.max_batch) {
      snprintf(err, errlen, "%llu samples per rank in %llu lanes need a batch of %llu, this run's "
               "--batch is %d", (unsigned long long)mine, (unsigned long long)per,
               (unsigned long long)((mine + per - 1) / per), t->m.max_batch);
      return -1;
    }
  }
  return 0;
}

/* train_restart's question for a checkpoint of another world size: does its batch fit? */
static int elastic_fits(void *ctx, const ckpt_view_t *v, char *err, size_t errlen) {
  elastic_plan_t p;
  return elastic_plan_for((const trainer_t *)ctx, v, &p, err, errlen);
}

/* --resume (train_restart_load: --resume FILE, or auto: the newest checkpoint that validates;
 * one of another run is refused): the parameters, the optimizer state (--zero: at the first
 * update, once the shard is known), the position, the RNG and the loss scaler. Returns 0 (also
 * when --resume auto found nothing), or 3 when the checkpoint is refused (rank 0 said why). */
static int resume(trainer_t *t) {
  const opts_t *o = &t->o;
  ckpt_state_t want = {.nparams = (uint32_t)t->m.nparams, .world = t->size, .batch = (uint64_t)o->batch,
                       .seed = o->seed, .optim = (uint32_t)o->optim, .nstate = ckpt_nstate(o)};
  snprintf(want.model, sizeof want.model, "%s", o->model);
  int rc = train_restart_load(&t->rst, &want, t->m.count, train_optim_name(o->optim));
  if (rc != 0 || !t->rst.resumed) return rc;
  train_restart_layout_t lay = restart_layout(t);
  train_restart_take_params(&t->rst, &lay);
  restore_optim(t);
  const ckpt_state_t *st = &t->rst.view.st;
  t->start_epoch = st->epoch;
  t->start_step = st->step_in_epoch;
  if (st->world != t->size) {
    /* Elastic: the same global batch (o.batch becomes b' x a' per rank, the loader's), so
     * global step s still covers samples [s B, (s + 1) B) of the epoch's order; a changed
     * global batch (--elastic-batch) starts at the step that repeats rather than skips. The
     * optimizer state is re-cut for this world size as it is taken (restore_optim). */
    char err[512];
    if (elastic_plan_for(t, &t->rst.view, &t->eplan, err, sizeof err) != 0) { /* rank 0 checked */
      fprintf(stderr, "ddp_train: rank %d: %s\n", t->rank, err);
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
    t->elastic = 1;
    t->from_world = st->world;
    t->from_batch = st->batch;
    t->o.batch = (long)(t->eplan.batch * t->eplan.accum);
    if (!t->eplan.exact) t->start_step = st->step_in_epoch * t->eplan.old_global / t->eplan.global_batch;
  }
  t->global_step = st->global_step;
  t->rng = st->rng;
  t->resume_loss_sum = st->loss_sum;
  t->resume_loss_steps = st->loss_steps;
  if (o->amp == TRAIN_AMP_FP16 && st->loss_scale >= 1.0f) {
    t->scaler.scale = st->loss_scale;
    t->scaler.clean = st->scale_clean;
  }
  return 0;
}

/* PyTorch-identical DistributedSampler + prefetching loader; steps per epoch agreed by all
 * ranks, the schedule, the test subset; a resume position beyond this run ends the job. */
static int setup_data(trainer_t *t) {
  const opts_t *o = &t->o;
  ddp_sampler_opts_t so;
  APP_CHECK(ddp_sampler_opts_default(&so));
  so.dataset_size = t->tri.count;
  so.num_replicas = t->size;
  so.rank = t->rank;
  so.shuffle = 1;
  so.seed = o->seed;
  APP_CHECK(ddp_sampler_create(&so, &t->sampler));
  ddp_loader_opts_t lo;
  APP_CHECK(ddp_loader_opts_default(&lo));
  lo.batch_size = (size_t)o->batch;
  APP_CHECK(ddp_loader_create(t->sampler, t->train, &lo, &t->loader));
  size_t nb = 0;
  APP_CHECK(ddp_loader_num_batches(t->loader, &nb));
  uint64_t steps_min = 0, steps_max = 0;
  APP_CHECK(ddp_sampler_agree_steps(t->comm, nb, &steps_min, &steps_max));
  t->steps = steps_min;
  if (o->limit_steps && (uint64_t)o->limit_steps < t->steps) t->steps = (uint64_t)o->limit_steps;
  t->total_steps = t->steps * (uint64_t)o->epochs;
  t->warmup = o->warmup >= 0 ? (uint64_t)o->warmup : train_default_warmup(t->total_steps);
  t->n_test = t->tei.count;
  if (o->limit_test && (uint64_t)o->limit_test < t->n_test) t->n_test = (uint64_t)o->limit_test;
  if (t->rst.resumed && (t->start_epoch > (uint64_t)o->epochs || t->start_step > t->steps)) {
    if (t->rank == 0)
      fprintf(stderr, "ddp_train: checkpoint position epoch %llu step %llu is beyond this run "
              "(%d epochs of %llu steps)\n", (unsigned long long)t->start_epoch,
              (unsigned long long)t->start_step, o->epochs, (unsigned long long)t->steps);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  return 0;
}

/* The gradient exchange: device copies of the parameters (--device cuda), the reducer (rank 0's
 * parameters broadcast at creation), or one broadcast of rank 0's parameters. */
static int setup_exchange(trainer_t *t) {
  const opts_t *o = &t->o;
  train_model_t *m = &t->m;
  ddp_param_t params[TM_MAX_PARAMS];
  for (size_t i = 0; i < m->nparams; i++)
    params[i] = (ddp_param_t){.data = m->param[i], .count = m->count[i], .dtype = DDP_F32,
                              .mem = DDP_MEM_HOST, .name = m->pname[i], .grad = NULL};
  snprintf(t->devdesc, sizeof t->devdesc, "host");
  if (o->device) {
    APP_CHECK(ddp_device_describe(t->comm, t->devdesc, sizeof t->devdesc));
    APP_CHECK(ddp_stream_create(t->comm, &t->stream));
    for (size_t i = 0; i < m->nparams; i++) {
      t->host_grad[i] = m->grad[i]; /* the model's own storage */
      APP_CHECK(ddp_device_malloc(t->comm, m->count[i] * sizeof(float), &t->dev_param[i]));
      APP_CHECK(ddp_memcpy_async(t->comm, t->dev_param[i], m->param[i], m->count[i] * sizeof(float), t->stream));
      params[i].data = t->dev_param[i];
      params[i].mem = DDP_MEM_CUDA;
    }
    APP_CHECK(ddp_stream_synchronize(t->comm, t->stream));
  }
  if (o->sync != SYNC_REDUCER) {
    /* Same starting point on every rank, as the reducer's creation guarantees. */
    MPI_Bcast(m->param_block, (int)m->total, MPI_FLOAT, 0, t->world);
    return 0;
  }
  ddp_reducer_opts_t ro;
  APP_CHECK(ddp_reducer_opts_default(&ro));
  ro.bucket_cap_mb = o->bucket_cap_mb;
  /* PyTorch's smaller first bucket (1 MB), but never larger than the cap asked for. */
  if (ro.first_bucket_mb > o->bucket_cap_mb) ro.first_bucket_mb = o->bucket_cap_mb;
  ro.hook = o->hook;
  ro.shard = o->zero; /* --zero 1|2: reduce-scatter, shard-only update, parameter allgather */
  if (o->algo) APP_CHECK(ddp_algo_parse(o->algo, &ro.algo));
  ro.stream = t->stream;
  APP_CHECK(ddp_reducer_create(t->comm, params, m->nparams, &ro, &t->reducer));
  APP_CHECK(ddp_reducer_stats(t->reducer, &t->rs));
  if (o->device) {
    /* The reducer broadcast rank 0's parameters on the device: take them back. */
    for (size_t i = 0; i < m->nparams; i++)
      APP_CHECK(ddp_memcpy_async(t->comm, m->param[i], t->dev_param[i], m->count[i] * sizeof(float), t->stream));
    APP_CHECK(ddp_stream_synchronize(t->comm, t->stream));
  }
  return 0;
}

/* --device cuda on a real GPU: the MLP's arithmetic moves there (the emulated device keeps it on
 * the CPU, as does the CNN). Every rank sees the same kind and model, so every rank takes the
 * same path. Also fills the gradient-ready context every step kind uses. */
static int setup_gpu(trainer_t *t) {
  const opts_t *o = &t->o;
  train_model_t *m = &t->m;
#if DDP_TRAIN_GPU
  char err[512];
  if (o->device && t->reducer && ddp_device_kind(t->comm) == DDP_TRAIN_GPU_KIND) {
    int sizes[TM_MAX_LAYERS + 1], relu[TM_MAX_LAYERS], dense = m->nlayers <= TG_MAX_LAYERS;
    for (int l = 0; l < m->nlayers && dense; l++) {
      dense = m->layer[l].kind == TM_DENSE && m->layer[l].wi == 2 * l;
      sizes[l] = m->layer[l].c;
      sizes[l + 1] = m->layer[l].oc;
      relu[l] = m->layer[l].relu;
    }
    if (!dense) {
      t->gpu_note = "host (the CNN is not ported to the GPU; buckets and exchange on the device)";
    } else {
      if (tg_create(&t->tg, m->nlayers, sizes, relu, (int)o->batch, (int)o->amp, t->stream,
                    t->dev_param, err, sizeof err) != 0 ||
          tg_upload(t->tg, NULL, (const float *const *)opt_state(t), err, sizeof err) != 0) {
        fprintf(stderr, "ddp_train: rank %d: cannot set up the model on the GPU: %s\n", t->rank, err);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      APP_CHECK(ddp_device_malloc(t->comm, sizeof(int), (void **)&t->dev_flag));
      t->gpu_math = 1;
      t->gpu_note = tg_describe(t->tg);
    }
  }
#endif
  if (o->device && !t->gpu_note) t->gpu_note = "host (cblas; parameters and buckets on the device)";
  t->rctx = (ready_ctx_t){.reducer = t->reducer, .st = DDP_OK, .comm = t->comm, .stream = t->stream,
                          .host_grad = t->host_grad,
                          .dev_grad = o->device && !t->gpu_math ? t->dev_grad : NULL,
                          .count = m->count};
  return 0;
}

/* Rank 0: the metrics CSV and the per-step log; every rank: whether to draw a progress line. */
static void open_outputs(trainer_t *t) {
  const opts_t *o = &t->o;
  if (t->rank == 0 && o->metrics) {
    t->metrics = fopen(o->metrics, t->rst.resumed ? "a" : "w");
    if (!t->metrics) fprintf(stderr, "ddp_train: cannot write %s: %s\n", o->metrics, strerror(errno));
    else if (ftell(t->metrics) == 0) { /* new, or empty: a run killed before its first line */
      fprintf(t->metrics, "epoch,global_step,train_loss,test_acc,samples_per_s,epoch_s,lr\n");
      fflush(t->metrics);
    }
  }
  if (t->rank == 0 && o->log_steps) {
    t->steplog = fopen(o->log_steps, "w");
    if (!t->steplog) fprintf(stderr, "ddp_train: cannot write %s: %s\n", o->log_steps, strerror(errno));
  }
  int progress = o->progress > 0 || (o->progress < 0 && isatty(STDOUT_FILENO) &&
                                     !getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMI_RANK") &&
                                     !getenv("PMIX_RANK"));
  t->progress = progress && t->rank == 0;
}

static const char *amp_name(train_amp_t a) {
  return a == TRAIN_AMP_FP16 ? "fp16" : a == TRAIN_AMP_BF16 ? "bf16" : "none";
}

static const char *hook_name(ddp_hook_t h) {
  return h == DDP_HOOK_FP16 ? "fp16" : h == DDP_HOOK_BF16 ? "bf16" : "none";
}

/* Rank 0's header: model, data, schedule, exchange, precision, memory, resume position. */
static void print_header(const trainer_t *t) {
  const opts_t *o = &t->o;
  const train_model_t *m = &t->m;
  if (t->rank != 0) return;
  int size = t->size;
  printf("# ddp_train: %s (%zu parameters), Fashion-MNIST %llu train / %llu test images\n",
         m->desc, m->total, (unsigned long long)t->tri.count, (unsigned long long)t->n_test);
  printf("# ranks %d, per-rank batch %ld, global batch %ld, %llu steps/epoch, %d epochs\n",
         size, o->batch, o->batch * size, (unsigned long long)t->steps, o->epochs);
  if (o->optim == TRAIN_OPTIM_ADAMW)
    printf("# AdamW lr %g betas 0.9/0.999 eps 1e-08 wd %g", o->lr, o->wd);
  else
    printf("# SGD lr %g momentum %g wd %g", o->lr, o->momentum, o->wd);
  printf(", warmup %llu steps then cosine to 0 over %llu steps\n", (unsigned long long)t->warmup,
         (unsigned long long)t->total_steps);
  if (o->zero)
    printf("# ZeRO-%d: optimizer state sharded over %d ranks (%s)%s\n", o->zero, size,
           o->sync == SYNC_LANES ? "f64 reduce-scatter, f32 parameter allgather"
                                 : "reducer reduce-scatter, parameter allgather",
           o->zero == 2 ? "; gradient pages outside the shard released between steps" : "");
  if (o->sync == SYNC_REDUCER)
    printf("# grad sync: reducer, %zu bucket(s) (cap %g MB), hook %s, algo %s, buckets on %s; "
           "BLAS threads %d\n", t->rs.nbuckets, o->bucket_cap_mb, hook_name(o->hook),
           o->algo ? o->algo : "auto", o->device ? t->devdesc : "host", o->threads);
  else if (o->sync == SYNC_LANES)
    printf("# grad sync: deterministic, %ld lanes (%ld per rank), one f64 allreduce of %zu "
           "gradients after backward; BLAS threads %d\n", o->lanes, o->lanes / size, m->total,
           o->threads);
  else
    printf("# grad sync: one MPI_Allreduce of all %zu gradients after backward; BLAS threads %d\n",
           m->total, o->threads);
  if (o->device)
    printf("# model arithmetic: %s%s%s\n", t->gpu_math ? "GPU, " : "", t->gpu_note,
           t->gpu_math && o->checkpoint_activations ? " (--checkpoint-activations: host model only)"
                                                    : "");
  if (o->amp != TRAIN_AMP_NONE)
    printf("# mixed precision (%s): %s operands, f32 accumulation and master weights%s\n",
           t->gpu_math ? "GPU" : "CPU emulation", amp_name(o->amp),
           o->amp == TRAIN_AMP_FP16 ? ", dynamic loss scaling" : "");
  printf("# activation memory per rank: %.2f MB %s (%.2f MB %s, %.0f%% saved)\n",
         (double)m->act_bytes / 1048576.0,
         o->checkpoint_activations ? "with checkpointing" : "without checkpointing",
         (double)(o->checkpoint_activations ? m->act_bytes_full : m->act_bytes_ckpt) / 1048576.0,
         o->checkpoint_activations ? "without" : "with --checkpoint-activations",
         100.0 * (1.0 - (double)m->act_bytes_ckpt / (double)m->act_bytes_full));
  if (t->rst.resumed)
    printf("# resumed from %s at epoch %llu step %llu (global step %llu)\n", t->rst.resume_path,
           (unsigned long long)t->start_epoch + 1, (unsigned long long)t->start_step,
           (unsigned long long)t->global_step);
  if (t->elastic) {
    char line[512];
    elastic_describe(t->from_world, t->from_batch, 1, &t->eplan, line, sizeof line);
    printf("# %s%s%s\n", line, o->zero ? "; optimizer state re-partitioned" : "",
           o->sync == SYNC_LANES && t->eplan.accum > 1 ? "; --deterministic: a step's micro-batches "
           "are one pass over its lanes" : "");
  }
  printf("%5s %11s %9s %11s %8s\n", "epoch", "train_loss", "test_acc", "samples/s", "time_s");
  fflush(stdout);
}

/* Test accuracy over the first n_test images, split into contiguous ranges across ranks and
 * summed with one allreduce, so every image is counted exactly once. Ends the job on error. */
static double evaluate(trainer_t *t) {
  train_model_t *m = &t->m;
  uint64_t lo = t->n_test * (uint64_t)t->rank / (uint64_t)t->size;
  uint64_t hi = t->n_test * (uint64_t)(t->rank + 1) / (uint64_t)t->size;
  int64_t counts[2] = {0, (int64_t)(hi - lo)};
  int bad = 0;
  for (uint64_t i = lo; i < hi && !bad;) {
    int b = 0;
    for (; b < m->max_batch && i < hi && !bad; b++, i++)
      bad = ddp_dataset_get(t->test, i, t->xbuf + (size_t)b * m->in_elems, m->in_elems,
                            &t->ybuf[b]) != DDP_OK;
    if (!bad) counts[0] += tm_count_correct(m, t->xbuf, t->ybuf, b);
  }
  /* a library collective: the watchdog (DDP_TIMEOUT_S) also covers a rank lost here */
  if (bad || ddp_allreduce(t->comm, DDP_IN_PLACE, counts, 2, DDP_I64, DDP_SUM, NULL) != DDP_OK) {
    fprintf(stderr, "ddp_train: evaluation failed: %s\n", ddp_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return counts[1] ? (double)counts[0] / (double)counts[1] : 0.0;
}

/* Every rank calls this (train_restart_save gathers the sharded state first); rank 0 writes
 * the model, optimizer state, loss scaler and position atomically, to --checkpoint FILE or as
 * the next numbered checkpoint of --checkpoint-dir (then LATEST, then pruning to --keep). A
 * failed write is reported and training goes on (the previous checkpoint stays intact).
 * Returns 0 when written (rank 0), 0 on the other ranks. */
static int save_checkpoint(trainer_t *t, uint64_t epoch, uint64_t step_in_epoch, double loss_sum,
                           uint64_t loss_steps) {
  const opts_t *o = &t->o;
  if (params_sync(t) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
  ckpt_state_t st = {.batch = (uint64_t)o->batch, .seed = o->seed, .epoch = epoch,
                     .step_in_epoch = step_in_epoch, .global_step = t->global_step, .rng = t->rng,
                     .loss_sum = loss_sum, .loss_steps = loss_steps,
                     .epochs = (uint64_t)o->epochs, .optim = (uint32_t)o->optim,
                     .nstate = ckpt_nstate(o), .optim_steps = train_optim_steps(t->opt)};
  snprintf(st.model, sizeof st.model, "%s", o->model);
  st.loss_scale = o->amp == TRAIN_AMP_FP16 ? t->scaler.scale : 0.0f;
  st.scale_clean = o->amp == TRAIN_AMP_FP16 ? t->scaler.clean : 0;
  train_restart_layout_t lay = restart_layout(t);
  return train_restart_save(&t->rst, &lay, &st);
}

/* Checkpointing on: rank 0 makes sure --checkpoint-dir can be written (before any data is
 * read), and every rank stops on request from here on (train_restart_init). Returns 0, or -1
 * with every rank (rank 0 said why). */
static int prepare_restarts(trainer_t *t) {
  const opts_t *o = &t->o;
  train_restart_opts_t ro = {.app = "ddp_train", .file = o->checkpoint, .dir = o->checkpoint_dir,
                             .resume = o->resume, .keep = (unsigned)o->keep,
                             .elastic = elastic_fits, .elastic_ctx = t};
  return train_restart_init(&t->rst, &ro, t->comm);
}

/* Where an epoch stands: batches done (from the resume position in the first), the running
 * loss sum of the ranks' means and its step count, samples seen here, the last learning rate. */
typedef struct epoch_pos {
  uint64_t done, loss_steps, samples;
  double loss_sum, lr;
} epoch_pos_t;

/* The steps of one epoch from p->done on, mid-epoch checkpoints, --stop-after and stopping on
 * request (t->rst.stop_sig). *stopped: one of those ended the run. */
static int run_steps(trainer_t *t, uint64_t epoch, epoch_pos_t *p, int *stopped) {
  const opts_t *o = &t->o;
  ddp_batch_t b;
  for (uint64_t s = 0; s < p->done; s++) APP_CHECK(ddp_loader_next(t->loader, &b)); /* skip done */
  for (uint64_t s = p->done; s < t->steps; s++) {
    APP_CHECK(ddp_loader_next(t->loader, &b));
    if (b.count == 0) break;
    double loss = 0.0;
    p->lr = train_lr(o->lr, t->global_step, t->warmup, t->total_steps);
    if (t->step(t, &b, (float)p->lr, &loss) != 0) return 1;
    t->global_step++;
    p->done = s + 1;
    int stop = 0;
    p->loss_sum += train_restart_agree(&t->rst, loss, &stop); /* the ranks' mean: the same on every rank */
    p->loss_steps++;
    p->samples += b.count;
    if (t->steplog) {
      fprintf(t->steplog, "%llu %.9g %.9g\n", (unsigned long long)t->global_step, loss, p->lr);
      fflush(t->steplog); /* a run killed at any step leaves every step it finished */
    }
    if (t->progress && (s % 20 == 0 || s + 1 == t->steps)) {
      printf("\r  epoch %llu [%5llu/%5llu] loss %.4f", (unsigned long long)epoch + 1,
             (unsigned long long)s + 1, (unsigned long long)t->steps,
             p->loss_sum / (double)p->loss_steps);
      fflush(stdout);
    }
    if ((o->checkpoint || o->checkpoint_dir) && o->checkpoint_every &&
        t->global_step % (uint64_t)o->checkpoint_every == 0 &&
        s + 1 != t->steps) {
      /* Mid-epoch position: this epoch, s + 1 batches done; the loss sum (of the ranks'
       * means) is the same on every rank, so every rank resumes with the same value. */
      gpu_download(t, 1);
      save_checkpoint(t, epoch, s + 1, p->loss_sum, p->loss_steps);
    }
    if (stop) t->rst.stop_sig = stop;
    if (stop || (o->stop_after && t->global_step >= (uint64_t)o->stop_after)) {
      *stopped = 1;
      break;
    }
  }
  return 0;
}

/* The run stopped mid-epoch. On request every rank is here after the same step: rank 0 writes
 * its position (unless the --checkpoint-every save of this very step just did). */
static void report_stop(trainer_t *t, uint64_t epoch, const epoch_pos_t *p) {
  if (!t->rst.stop_sig) {
    if (t->rank == 0) printf("# stopped after global step %llu (--stop-after)\n", (unsigned long long)t->global_step);
    return;
  }
  int ok = t->rst.saved_ok;
  if (t->rst.saved_step != t->global_step)
    ok = save_checkpoint(t, epoch, p->done, p->loss_sum, p->loss_steps) == 0;
  char where[96];
  snprintf(where, sizeof where, "epoch %llu, step %llu", (unsigned long long)epoch + 1,
           (unsigned long long)p->done);
  train_restart_print_stop(&t->rst, t->global_step, where, ok);
}

/* One epoch: the steps, then (unless stopped: report_stop) the epoch's loss, the evaluation,
 * rank 0's line and the end-of-epoch checkpoint. *stopped: --stop-after or a signal
 * (t->rst.stop_sig) ended the run. */
static int train_epoch(trainer_t *t, uint64_t epoch, int *stopped, double *acc) {
  const opts_t *o = &t->o;
  double t0 = train_now();
  APP_CHECK(ddp_loader_start_epoch(t->loader, epoch));
  int first_epoch = epoch == t->start_epoch;
  epoch_pos_t p = {.done = first_epoch ? t->start_step : 0,
                   .loss_sum = first_epoch ? t->resume_loss_sum : 0.0,
                   .loss_steps = first_epoch ? t->resume_loss_steps : 0};
  if (run_steps(t, epoch, &p, stopped) != 0) return 1;
  double t_train = train_now() - t0;
  gpu_download(t, 0); /* evaluation, checkpoint and the final CRC read the host copy */
  if (params_sync(t) != 0) return 1; /* --zero: the last update's allgather */
  if (t->progress) printf("\r\033[K");
  if (*stopped) {
    report_stop(t, epoch, &p);
    return 0;
  }
  double epoch_loss = p.loss_steps ? p.loss_sum / (double)p.loss_steps : 0.0;
  int64_t lsamples = (int64_t)p.samples, gsamples = 0; /* watchdog-covered, as evaluate() */
  APP_CHECK(ddp_allreduce(t->comm, &lsamples, &gsamples, 1, DDP_I64, DDP_SUM, NULL));
  *acc = evaluate(t);
  double t_epoch = train_now() - t0;
  double sps = t_train > 0 ? (double)gsamples / t_train : 0.0;
  if (t->rank == 0) {
    printf("%5llu %11.6f %8.2f%% %11.1f %8.2f\n", (unsigned long long)epoch + 1, epoch_loss,
           100.0 * *acc, sps, t_epoch);
    fflush(stdout);
    if (t->metrics) {
      fprintf(t->metrics, "%llu,%llu,%.9g,%.6f,%.1f,%.3f,%.6g\n", (unsigned long long)epoch + 1,
              (unsigned long long)t->global_step, epoch_loss, *acc, sps, t_epoch, p.lr);
      fflush(t->metrics);
    }
  }
  /* End-of-epoch checkpoint: position (next epoch, step 0). */
  if ((o->checkpoint || o->checkpoint_dir) &&
      (!o->checkpoint_every || t->global_step % (uint64_t)o->checkpoint_every == 0))
    save_checkpoint(t, epoch + 1, 0, 0.0, 0);
  return 0;
}

/* Rank 0's closing lines: accuracy, loss scaler, the parameters' CRC, the reducer's overlap. */
static void report(trainer_t *t, int stopped, double acc, double run_t0) {
  const opts_t *o = &t->o;
  unsigned long long sb = train_optim_state_bytes(t->opt), sbmax = 0;
  MPI_Allreduce(&sb, &sbmax, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, t->world);
  if (t->rank != 0 || stopped) return;
  printf("final: test accuracy %.2f%% after %d epochs (%d ranks, global batch %ld), %.1f s\n",
         100.0 * acc, o->epochs, t->size, o->batch * t->size, train_now() - run_t0);
  if (o->amp == TRAIN_AMP_FP16)
    printf("# amp fp16: %llu step(s) skipped for inf/nan gradients, loss scale now %g\n",
           (unsigned long long)t->scaler.skipped, (double)t->scaler.scale);
  printf("# final parameters: CRC32 0x%08x over %zu f32 values\n",
         ckpt_crc32(t->m.param_block, sizeof(float) * t->m.total), t->m.total);
  printf("# optimizer %s: state %.2f MB on the largest rank (--zero %d)\n", train_optim_name(o->optim),
         (double)sbmax / 1048576.0, o->zero);
  train_restart_print_stats(&t->rst);
  if (t->reducer && ddp_reducer_stats(t->reducer, &t->rs) == DDP_OK && t->rs.iterations)
    printf("# reducer: %zu buckets, comm %.3f ms/step, exposed %.3f ms/step, %.0f%% hidden\n",
           t->rs.nbuckets, t->rs.comm_ms_avg, t->rs.exposed_ms_avg, 100.0 * t->rs.hidden_fraction);
}

/* Frees everything setup made (any prefix of it). */
static int cleanup(trainer_t *t) {
  if (t->metrics) fclose(t->metrics);
  if (t->steplog) fclose(t->steplog);
#if DDP_TRAIN_GPU
  tg_destroy(t->tg);
  if (t->dev_flag) APP_CHECK(ddp_device_free(t->comm, t->dev_flag));
#endif
  APP_CHECK(ddp_reducer_destroy(&t->reducer));
  for (size_t i = 0; i < t->m.nparams; i++)
    if (t->dev_param[i]) APP_CHECK(ddp_device_free(t->comm, t->dev_param[i]));
  if (t->stream) APP_CHECK(ddp_stream_destroy(t->comm, &t->stream));
  ddp_loader_destroy(&t->loader);
  ddp_sampler_destroy(&t->sampler);
  ddp_dataset_destroy(&t->train);
  ddp_dataset_destroy(&t->test);
  tm_free(&t->m);
  train_optim_destroy(&t->opt);
  free(t->grad64);
  free(t->lane_blk);
  train_restart_destroy(&t->rst);
  free(t->lane_x);
  free(t->lane_y);
  free(t->xbuf);
  free(t->ybuf);
  return 0;
}

int main(int argc, char **argv) {
  app_blas_auto(argv); /* before MPI starts: may re-execute with a faster OpenBLAS kernel */
  trainer_t t;
  memset(&t, 0, sizeof t);
  APP_CHECK(ddp_init(&argc, &argv, MPI_COMM_NULL, &t.comm));
  APP_CHECK(ddp_comm_rank(t.comm, &t.rank));
  APP_CHECK(ddp_comm_size(t.comm, &t.size));
  APP_CHECK(ddp_comm_mpi(t.comm, DDP_COMM_WORLD, &t.world));
  int pr = parse_and_check(&t, argc, argv);
  if (pr != 0) {
    /* Every rank parses the same arguments, so every rank leaves here together. */
    if (ddp_finalize(&t.comm) != DDP_OK) return 1;
    return pr < 0 ? 2 : 0;
  }
  if (prepare_restarts(&t) != 0) { /* every rank leaves together, nothing written */
    ddp_finalize(&t.comm);
    return 2;
  }
  if (setup_model(&t) != 0) return 1;
  int rc = resume(&t);
  if (rc != 0) { /* refused checkpoint: every rank leaves with 3, nothing written */
    cleanup(&t);
    ddp_finalize(&t.comm);
    return rc;
  }
  if (setup_data(&t) != 0 || setup_exchange(&t) != 0 || setup_gpu(&t) != 0) return 1;
  t.step = pick_step(&t);
  open_outputs(&t);
  print_header(&t);
  double acc = 0.0, run_t0 = train_now();
  int stopped = 0;
  for (uint64_t epoch = t.start_epoch; epoch < (uint64_t)t.o.epochs && !stopped; epoch++)
    if (train_epoch(&t, epoch, &stopped, &acc) != 0) return 1;
  /* Resumed from the end of the last epoch: nothing to train, report the model as is. */
  if (!stopped && t.start_epoch >= (uint64_t)t.o.epochs) acc = evaluate(&t);
  report(&t, stopped, acc, run_t0);
  if (cleanup(&t) != 0) return 1;
  APP_CHECK(ddp_finalize(&t.comm));
  return t.rst.stop_sig ? TRAIN_RESTART_EXIT : 0;
}
