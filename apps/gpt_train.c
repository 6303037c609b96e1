/* gpt_train: data-parallel pretraining of a GPT-2 decoder (apps/kit/gpt.h) on a byte-level
 * text corpus (apps/kit/gpt_data.h: Debian's fortunes by default) with the library's sampler,
 * loader and bucketed reducer: gradients go out bucket by bucket while backward still runs,
 * AdamW (decay on matrices only), warmup + cosine, global gradient-norm clipping, gradient
 * accumulation, ZeRO-1/2 through the reducer's shard mode. Launch it like any MPI program:
 *   mpirun -np 2 build/apps/gpt_train --steps 200
 * Rank 0 prints one line per --log-every steps (train loss, validation loss when computed,
 * tokens/s, ms/step); --deterministic L makes the run independent of the rank count;
 * --checkpoint-dir / --resume auto continue a run step for step, also after SIGTERM / SIGUSR1
 * (apps/kit/train_restart.h, apps/ddp_run). */
#include <cblas.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app_blas.h"
#include "app_check.h"
#include "app_opts.h"
#include "checkpoint.h"
#include "ddp.h"
#include "gpt.h"
#include "gpt_data.h"
#include "train_optim.h"
#include "train_restart.h"
#include "train_util.h"

typedef struct opts {
  gpt_config_t cfg;
  const char *preset;
  long batch, accum, steps, warmup, log_every, val_every, val_windows, lanes;
  double lr, wd, beta1, beta2, eps, clip, bucket_cap_mb;
  uint64_t seed;
  int zero, threads, recompute;
  const char *data, *algo, *dump_init, *dump_grads, *log_steps;
  const char *checkpoint_dir, *resume; /* --checkpoint-dir DIR, --resume auto|PATH */
  long checkpoint_every, keep, stop_after;
} opts_t;

static void usage(FILE *f) {
  fprintf(f,
          "usage: mpirun -np N gpt_train [options]\n"
          "  --layers N --heads N --dim N --seq N   model (default 6, 6, 384, 256)\n"
          "  --preset gpt2-124m       GPT-2 small: 12 layers, 12 heads, 768 dims, 1024 tokens,\n"
          "                           per-rank batch 1 (vocab: the byte tokenizer's 256)\n"
          "  --batch N                sequences per rank per micro-step (default 8)\n"
          "  --accum N                micro-steps per optimizer step (gradient accumulation,\n"
          "                           no communication but on the last; default 1)\n"
          "  --steps N                optimizer steps (default 1000)\n"
          "  --lr X                   peak learning rate (default 6e-4)\n"
          "  --warmup N               linear warmup steps, then cosine to 0 (default\n"
          "                           min(200, steps/10))\n"
          "  --wd X                   AdamW weight decay on the 2-D tensors (default 0.1)\n"
          "  --beta1 X --beta2 X --eps X   AdamW (default 0.9, 0.95, 1e-8)\n"
          "  --clip X                 clip the global gradient norm to X (default 1; 0: off)\n"
          "  --seed N                 initialisation and data-order seed (default 0)\n"
          "  --data PATH              corpus folder or file (default %s)\n"
          "  --log-every K            one line per K steps (default 10)\n"
          "  --val-every K            validation loss every K steps and at the end (default 100;\n"
          "                           0: never)\n"
          "  --val-windows N          validation sequences evaluated (default 64; 0: all)\n"
          "  --zero 0|1|2             ZeRO through the reducer's shard mode (default 0)\n"
          "  --recompute              activation checkpointing per block: keep each block's\n"
          "                           output only, recompute the rest during backward\n"
          "  --deterministic L        world-size-independent arithmetic: L lanes per global batch,\n"
          "                           f64 gradient exchange (L a multiple of -np): the same\n"
          "                           parameters, bit for bit, at every -np dividing L\n"
          "  --bucket-cap-mb X        reducer bucket cap (default 10)\n"
          "  --algo NAME              the reducer's allreduce algorithm (default auto)\n"
          "  --threads N              OpenBLAS threads per rank (default 1)\n"
          "  --dump-init FILE         write the initial parameters (rank 0; see torch_gpt.py)\n"
          "  --dump-grads FILE        write step 1's averaged gradients, before clipping\n"
          "  --log-steps FILE         every step's loss, learning rate and gradient norm\n"
          "  --checkpoint-dir DIR     numbered checkpoints (parameters, AdamW state, data position)\n"
          "                           in DIR, DIR/LATEST naming the newest, the newest --keep K\n"
          "                           kept (default 2); SIGTERM or SIGUSR1 then stops every rank\n"
          "                           at one agreed step, writes a checkpoint and exits with\n"
          "                           status 75 (resume it; apps/ddp_run)\n"
          "  --checkpoint-every K     ... every K steps (default: at the end of the run only)\n"
          "  --resume auto|PATH       auto: the newest checkpoint of --checkpoint-dir that\n"
          "                           validates (falling back to older ones; none: from scratch);\n"
          "                           PATH: that file (same -np, --batch, --seed, model)\n"
          "  --stop-after N           stop after step N, as if interrupted (tests)\n",
          GPT_DEFAULT_CORPUS);
}

/* ---- arguments ---------------------------------------------------------------------------- */

/* Returns 0 ok, 1 help printed, -1 error (said on rank 0 only: quiet elsewhere). */
static int parse_args(int argc, char **argv, opts_t *o, int quiet) {
  *o = (opts_t){.cfg = {.layers = 6, .heads = 6, .dim = 384, .seq = 256, .vocab = GPT_VOCAB_BYTES},
                .batch = -1, .accum = 1, .steps = 1000, .warmup = -1, .log_every = 10,
                .val_every = 100, .val_windows = 64, .lr = 6e-4, .wd = 0.1, .beta1 = 0.9,
                .beta2 = 0.95, .eps = 1e-8, .clip = 1.0, .bucket_cap_mb = 10.0, .threads = 1,
                .data = GPT_DEFAULT_CORPUS, .keep = 2};
  int layers = -1, heads = -1, dim = -1, seq = -1, preset = 0;
  static const char *const presets[] = {"gpt2-124m", NULL};
  const app_opt_t table[] = {
      APP_INT("--layers", &layers, 1, 1024), APP_INT("--heads", &heads, 1, 4096),
      APP_INT("--dim", &dim, 1, 65536), APP_INT("--seq", &seq, 1, 65536),
      APP_ENUM("--preset", &preset, presets, (const int[]){1}),
      APP_LONG("--batch", &o->batch, 1, 65536), APP_LONG("--accum", &o->accum, 1, 65536),
      APP_LONG("--steps", &o->steps, 1, LONG_MAX), APP_LONG("--warmup", &o->warmup, 0, LONG_MAX),
      APP_LONG("--log-every", &o->log_every, 1, LONG_MAX),
      APP_LONG("--val-every", &o->val_every, 0, LONG_MAX),
      APP_LONG("--val-windows", &o->val_windows, 0, LONG_MAX),
      APP_LONG("--deterministic", &o->lanes, 1, 4096), APP_U64("--seed", &o->seed),
      APP_INT("--zero", &o->zero, 0, 2), APP_INT("--threads", &o->threads, 1, 1024),
      APP_FLAG("--recompute", &o->recompute, 1),
      APP_DOUBLE("--lr", &o->lr, 0.0, 10.0), APP_DOUBLE("--wd", &o->wd, 0.0, 10.0),
      APP_DOUBLE("--beta1", &o->beta1, 0.0, 0.999999),
      APP_DOUBLE("--beta2", &o->beta2, 0.0, 0.999999999), APP_DOUBLE("--eps", &o->eps, 0.0, 1.0),
      APP_DOUBLE("--clip", &o->clip, 0.0, 1e30),
      APP_DOUBLE("--bucket-cap-mb", &o->bucket_cap_mb, 0.001, 65536.0),
      APP_STR("--data", &o->data), APP_STR("--algo", &o->algo), APP_STR("--dump-init", &o->dump_init),
      APP_STR("--dump-grads", &o->dump_grads), APP_STR("--log-steps", &o->log_steps),
      APP_STR("--checkpoint-dir", &o->checkpoint_dir), APP_STR("--resume", &o->resume),
      APP_LONG("--checkpoint-every", &o->checkpoint_every, 1, LONG_MAX),
      APP_LONG("--keep", &o->keep, 1, 1000000), APP_LONG("--stop-after", &o->stop_after, 1, LONG_MAX),
      APP_OPTS_END};
  int pr = app_opts_parse("gpt_train", table, argc, argv, quiet ? NULL : stderr);
  if (pr == APP_OPTS_HELP && !quiet) usage(stdout);
  if (pr != APP_OPTS_OK) return pr;
  if (preset) {
    o->preset = presets[0];
    o->cfg = (gpt_config_t){.layers = 12, .heads = 12, .dim = 768, .seq = 1024, .vocab = GPT_VOCAB_BYTES};
    if (o->batch < 0) o->batch = 1;
  }
  if (o->batch < 0) o->batch = 8;
  if (layers > 0) o->cfg.layers = layers; /* explicit sizes win over the preset's */
  if (heads > 0) o->cfg.heads = heads;
  if (dim > 0) o->cfg.dim = dim;
  if (seq > 0) o->cfg.seq = seq;
  if (o->cfg.dim % o->cfg.heads) {
    if (!quiet) fprintf(stderr, "gpt_train: --dim %d is not a multiple of --heads %d\n", o->cfg.dim, o->cfg.heads);
    return -1;
  }
  if (o->lanes && o->zero) {
    if (!quiet) fprintf(stderr, "gpt_train: --deterministic exchanges f64 lane sums: not with --zero\n");
    return -1;
  }
  if ((o->checkpoint_every || (o->resume && !strcmp(o->resume, "auto"))) && !o->checkpoint_dir) {
    if (!quiet) fprintf(stderr, "gpt_train: --checkpoint-every and --resume auto need --checkpoint-dir DIR\n");
    return -1;
  }
  return 0;
}

/* ---- the trainer ------------------------------------------------------------------------ */

typedef struct trainer {
  opts_t o;
  ddp_comm_t *comm;
  MPI_Comm world;
  int rank, size;
  gpt_t m;
  ddp_dataset_t *train, *val;
  ddp_dataset_info_t tri, vai;
  ddp_sampler_t *sampler;
  ddp_loader_t *loader;
  uint64_t epoch, steps_per_epoch, warmup;
  int32_t *tok, *tgt;       /* one micro-batch: batch x seq inputs and targets */
  ddp_reducer_t *reducer;
  ddp_status_t ready_st;
  /* AdamW in two groups: the matrices (weight decay) and the vectors (none) */
  train_optim_t *opt[2];
  size_t *grp[2], ngrp[2];  /* tensor indices of each group */
  size_t *shard_begin, *shard_count; /* per tensor: the elements this rank updates */
  float **pp, **gp;         /* scratch pointer lists of one group */
  size_t *bp, *cp;
  double *grad64;           /* --deterministic: lane-weighted sum, then the sequence count */
  int32_t *lane_tok, *lane_tgt;
  FILE *steplog;
  double comp_s;            /* time in the steps (not validation) since the last line */
  uint64_t mb_in_epoch;     /* micro-batches of epoch `epoch` taken (the data position) */
  /* Restarts: stop on request, checkpoints, the resumed position and log-line sums; the
   * optimizer's state pointers as a checkpoint layout names them (group and index of each
   * tensor in t->gidx). */
  train_restart_t rst;
  uint64_t start_step;
  double resume_loss_acc;
  long resume_n_acc;
  float **state_ptr;
  size_t *gidx;
} trainer_t;

static void *xmalloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "gpt_train: out of memory (%zu bytes)\n", bytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return p;
}

/* The corpus split into train and validation token streams, a window dataset on each. */
static int setup_data(trainer_t *t) {
  const opts_t *o = &t->o;
  char err[4400];
  uint8_t *all = NULL;
  size_t n = 0, ntr = 0, nva = 0;
  int files = 0;
  if (gpt_corpus_read(o->data, &all, &n, &files, err, sizeof err) != 0) {
    if (t->rank == 0) fprintf(stderr, "gpt_train: %s\n", err);
    return -1;
  }
  uint8_t *tr = xmalloc(n), *va = xmalloc(n);
  gpt_corpus_split(all, n, tr, &ntr, va, &nva);
  free(all);
  ddp_tokens_opts_t to;
  APP_CHECK(ddp_tokens_opts_default(&to));
  to.window = (size_t)o->cfg.seq + 1, to.stride = (size_t)o->cfg.seq, to.vocab = o->cfg.vocab;
  if (ntr < to.window || nva < to.window) {
    if (t->rank == 0)
      fprintf(stderr, "gpt_train: corpus %s too small for --seq %d (%zu train, %zu validation bytes)\n",
              o->data, o->cfg.seq, ntr, nva);
    free(tr), free(va);
    return -1;
  }
  to.tokens = tr, to.count = ntr;
  APP_CHECK(ddp_dataset_tokens(&to, &t->train));
  to.tokens = va, to.count = nva;
  APP_CHECK(ddp_dataset_tokens(&to, &t->val));
  free(tr), free(va);
  APP_CHECK(ddp_dataset_info(t->train, &t->tri));
  APP_CHECK(ddp_dataset_info(t->val, &t->vai));
  /* drop_last in the sampler and the loader: every step a full global batch, and an epoch the
   * same floor(windows / (batch x ranks)) steps at every rank count */
  ddp_sampler_opts_t so;
  APP_CHECK(ddp_sampler_opts_default(&so));
  so.dataset_size = t->tri.count, so.num_replicas = t->size, so.rank = t->rank;
  so.shuffle = 1, so.seed = o->seed, so.drop_last = 1;
  APP_CHECK(ddp_sampler_create(&so, &t->sampler));
  ddp_loader_opts_t lo;
  APP_CHECK(ddp_loader_opts_default(&lo));
  lo.batch_size = (size_t)o->batch, lo.drop_last_batch = 1;
  APP_CHECK(ddp_loader_create(t->sampler, t->train, &lo, &t->loader));
  size_t nb = 0;
  APP_CHECK(ddp_loader_num_batches(t->loader, &nb));
  if (nb == 0) {
    if (t->rank == 0) fprintf(stderr, "gpt_train: %llu training windows: fewer than one batch per rank\n",
                              (unsigned long long)t->tri.count);
    return -1;
  }
  t->steps_per_epoch = nb; /* micro-batches per epoch */
  APP_CHECK(ddp_loader_start_epoch(t->loader, 0));
  if (t->rank == 0)
    printf("# corpus %s: %d file(s), %zu bytes: %zu train (%llu windows of %d+1), %zu validation "
           "(%llu windows); byte tokens, vocab %d\n", o->data, files, n, ntr,
           (unsigned long long)t->tri.count, o->cfg.seq, nva, (unsigned long long)t->vai.count,
           o->cfg.vocab);
  return 0;
}

/* Next micro-batch of this rank into t->tok / t->tgt (a new epoch when one ends). */
static int next_batch(trainer_t *t) {
  ddp_batch_t b;
  APP_CHECK(ddp_loader_next(t->loader, &b));
  if (b.count == 0) {
    t->epoch++;
    t->mb_in_epoch = 0;
    APP_CHECK(ddp_loader_start_epoch(t->loader, t->epoch));
    APP_CHECK(ddp_loader_next(t->loader, &b));
  }
  t->mb_in_epoch++;
  const size_t T = (size_t)t->o.cfg.seq;
  for (size_t j = 0; j < b.count; j++)
    for (size_t k = 0; k < T; k++) {
      t->tok[j * T + k] = (int32_t)b.x[j * (T + 1) + k];
      t->tgt[j * T + k] = (int32_t)b.x[j * (T + 1) + k + 1];
    }
  return 0;
}

static void on_ready(size_t i, void *ctx) {
  trainer_t *t = ctx;
  if (t->ready_st == DDP_OK) t->ready_st = ddp_reducer_grad_ready(t->reducer, i);
}

/* The reducer's bucket views become the model's gradient buffers. */
static int point_grads(trainer_t *t) {
  void **g = xmalloc(sizeof(void *) * t->m.nparams);
  ddp_status_t st = ddp_reducer_grads(t->reducer, g, t->m.nparams);
  if (st == DDP_OK) gpt_set_grads(&t->m, g);
  free(g);
  APP_CHECK(st);
  return 0;
}

/* The state a checkpoint holds, as this rank sees it: the parameters and both AdamW groups'
 * moments over this rank's ranges (all of every tensor, or its --zero shard), in tensor order. */
static train_restart_layout_t restart_layout(trainer_t *t) {
  gpt_t *m = &t->m;
  size_t np = m->nparams, nst = t->opt[0] ? train_optim_nstate(t->opt[0]) : 0;
  for (size_t k = 0; k < nst; k++)
    for (size_t i = 0; i < np; i++)
      t->state_ptr[k * np + i] = train_optim_state_buf(t->opt[m->ndim[i] == 2 ? 0 : 1], k)[t->gidx[i]];
  return (train_restart_layout_t){.nparams = np, .count = m->count, .param = m->param,
                                  .nstate = nst, .state = t->state_ptr,
                                  .shard_begin = t->shard_begin, .shard_count = t->shard_count,
                                  .sharded = t->o.zero != 0};
}

/* The optimizer groups over the elements each rank updates: all of every tensor, or (--zero)
 * the reducer's shard, known after the first finish. */
static int ensure_optim(trainer_t *t) {
  if (t->opt[0]) return 0;
  gpt_t *m = &t->m;
  for (size_t i = 0; i < m->nparams; i++) {
    if (t->o.zero) APP_CHECK(ddp_reducer_shard_range(t->reducer, i, &t->shard_begin[i], &t->shard_count[i]));
    else t->shard_begin[i] = 0, t->shard_count[i] = m->count[i];
  }
  for (int g = 0; g < 2; g++) {
    train_optim_opts_t oo;
    train_optim_opts_adamw(&oo);
    oo.beta1 = (float)t->o.beta1, oo.beta2 = (float)t->o.beta2, oo.eps = (float)t->o.eps;
    oo.wd = g == 0 ? (float)t->o.wd : 0.0f;
    for (size_t k = 0; k < t->ngrp[g]; k++) t->cp[k] = t->shard_count[t->grp[g][k]];
    if (train_optim_create(&oo, t->cp, t->ngrp[g], &t->opt[g]) != 0) {
      fprintf(stderr, "gpt_train: out of memory for the optimizer\n");
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  if (t->rst.state_pending) { /* a resumed checkpoint's moments and step count */
    train_restart_layout_t lay = restart_layout(t);
    train_restart_take_state(&t->rst, &lay);
    for (int g = 0; g < 2; g++) train_optim_set_steps(t->opt[g], t->rst.view.st.optim_steps);
  }
  return 0;
}

/* Global gradient norm of the averaged gradients: every rank holds all of them (allreduce,
 * --deterministic) and computes it alone, or (--zero) its shard's share, summed with one
 * allreduce of a double. Then clipping (torch's clip_grad_norm_: coef = clip / (norm + 1e-6),
 * applied when below 1) and the AdamW update of both groups. */
static int update(trainer_t *t, float lr, double *gnorm) {
  gpt_t *m = &t->m;
  if (ensure_optim(t) != 0) return 1;
  double ss = 0.0;
  for (size_t i = 0; i < m->nparams; i++) {
    const float *g = m->grad[i] + t->shard_begin[i];
    double s = 0.0;
    for (size_t e = 0; e < t->shard_count[i]; e++) s += (double)g[e] * g[e];
    ss += s;
  }
  if (t->o.zero) APP_CHECK(ddp_allreduce(t->comm, DDP_IN_PLACE, &ss, 1, DDP_F64, DDP_SUM, NULL));
  *gnorm = sqrt(ss);
  if (t->o.clip > 0.0) {
    float coef = (float)(t->o.clip / (*gnorm + 1e-6));
    if (coef < 1.0f)
      for (size_t i = 0; i < m->nparams; i++) {
        float *g = m->grad[i] + t->shard_begin[i];
        for (size_t e = 0; e < t->shard_count[i]; e++) g[e] *= coef;
      }
  }
  for (int g = 0; g < 2; g++) {
    for (size_t k = 0; k < t->ngrp[g]; k++) {
      size_t i = t->grp[g][k];
      t->pp[k] = m->param[i], t->gp[k] = m->grad[i], t->bp[k] = t->shard_begin[i];
    }
    train_optim_step_at(t->opt[g], t->pp, t->gp, t->bp, lr);
  }
  return 0;
}

/* Writes `total` floats as a tensor file torch_gpt.py reads: "GPTF32\0\0", the five sizes and
 * the tensor count as i32, the total as u64, the floats (little-endian, as this machine). */
static void write_tensors(const trainer_t *t, const char *path, float *const *v) {
  const gpt_t *m = &t->m;
  FILE *f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "gpt_train: cannot write %s: %s\n", path, strerror(errno));
    return;
  }
  int32_t hdr[6] = {m->cfg.layers, m->cfg.heads, m->cfg.dim, m->cfg.seq, m->cfg.vocab, (int32_t)m->nparams};
  uint64_t total = m->total;
  int ok = fwrite("GPTF32\0\0", 1, 8, f) == 8 && fwrite(hdr, sizeof hdr, 1, f) == 1 &&
           fwrite(&total, sizeof total, 1, f) == 1;
  for (size_t i = 0; ok && i < m->nparams; i++) ok = fwrite(v[i], sizeof(float), m->count[i], f) == m->count[i];
  if (fclose(f) != 0 || !ok) fprintf(stderr, "gpt_train: writing %s failed\n", path);
}

/* One optimizer step with the reducer: accum micro-steps, only the last synced (its gradients
 * go out as backward produces them), then clipping and AdamW. */
static int step_reducer(trainer_t *t, float lr, double *loss, double *gnorm, int first) {
  gpt_t *m = &t->m;
  const int A = (int)t->o.accum;
  if (t->o.zero) APP_CHECK(ddp_reducer_param_wait(t->reducer, SIZE_MAX));
  *loss = 0.0;
  m->loss_scale = 1.0f / (float)A;
  for (int k = 0; k < A; k++) {
    int last = k == A - 1;
    if (A > 1) APP_CHECK(ddp_reducer_set_sync(t->reducer, last));
    if (next_batch(t) != 0) return 1;
    *loss += gpt_forward(m, t->tok, t->tgt, (int)t->o.batch);
    gpt_backward(m, k > 0, last ? on_ready : NULL, t);
    APP_CHECK(t->ready_st);
  }
  *loss /= A;
  APP_CHECK(ddp_reducer_finish(t->reducer));
  if (point_grads(t) != 0) return 1; /* the first finish rebuilds the buckets */
  if (first && t->o.dump_grads && !t->o.zero && t->rank == 0) write_tensors(t, t->o.dump_grads, m->grad);
  if (update(t, lr, gnorm) != 0) return 1;
  if (t->o.zero) APP_CHECK(ddp_reducer_allgather_params(t->reducer));
  return 0;
}

/* --deterministic L: global batch position p of a sequence (p = j * ranks + rank for local
 * sequence j) puts it in lane p mod L; each lane's gradient is computed alone, weighted by its
 * sequence count and summed in f64, and the sums are exchanged with one f64 allreduce: every
 * rank count dividing L computes the same lanes and the same (exact) sums. */
static int step_lanes(trainer_t *t, float lr, double *loss, double *gnorm, int first) {
  gpt_t *m = &t->m;
  const size_t T = (size_t)t->o.cfg.seq, per = (size_t)(t->o.lanes / t->size), B = (size_t)t->o.batch;
  memset(t->grad64, 0, sizeof(double) * (m->total + 2));
  for (long k = 0; k < t->o.accum; k++) {
    if (next_batch(t) != 0) return 1;
    for (size_t lane = 0; lane < per; lane++) {
      size_t n = 0;
      for (size_t j = lane; j < B; j += per, n++) {
        memcpy(t->lane_tok + n * T, t->tok + j * T, sizeof(int32_t) * T);
        memcpy(t->lane_tgt + n * T, t->tgt + j * T, sizeof(int32_t) * T);
      }
      if (n == 0) continue;
      m->loss_scale = 1.0f;
      t->grad64[m->total + 1] += gpt_forward(m, t->lane_tok, t->lane_tgt, (int)n) * (double)n;
      gpt_backward(m, 0, NULL, NULL);
      for (size_t e = 0; e < m->total; e++) t->grad64[e] += (double)m->grad_block[e] * (double)n;
      t->grad64[m->total] += (double)n;
    }
  }
  APP_CHECK(ddp_allreduce(t->comm, DDP_IN_PLACE, t->grad64, m->total + 2, DDP_F64, DDP_SUM, NULL));
  double cnt = t->grad64[m->total];
  for (size_t e = 0; e < m->total; e++) m->grad_block[e] = (float)(t->grad64[e] / cnt);
  *loss = t->grad64[m->total + 1] / cnt;
  if (first && t->o.dump_grads && t->rank == 0) write_tensors(t, t->o.dump_grads, m->grad);
  return update(t, lr, gnorm);
}

/* Mean validation loss over the first val_windows windows, split into contiguous ranges across
 * the ranks, summed with one allreduce. */
static double validate(trainer_t *t) {
  gpt_t *m = &t->m;
  const size_t T = (size_t)t->o.cfg.seq, W = T + 1;
  if (t->o.zero) APP_CHECK(ddp_reducer_param_wait(t->reducer, SIZE_MAX));
  uint64_t nv = t->vai.count;
  if (t->o.val_windows && (uint64_t)t->o.val_windows < nv) nv = (uint64_t)t->o.val_windows;
  uint64_t lo = nv * (uint64_t)t->rank / (uint64_t)t->size, hi = nv * (uint64_t)(t->rank + 1) / (uint64_t)t->size;
  float *x = xmalloc(sizeof(float) * W);
  double sums[2] = {0.0, 0.0};
  for (uint64_t i = lo; i < hi;) {
    int n = 0;
    for (; n < m->max_batch && i < hi; n++, i++) {
      APP_CHECK(ddp_dataset_get(t->val, i, x, W, NULL));
      for (size_t k = 0; k < T; k++)
        t->tok[n * T + k] = (int32_t)x[k], t->tgt[n * T + k] = (int32_t)x[k + 1];
    }
    sums[0] += gpt_forward(m, t->tok, t->tgt, n) * n;
    sums[1] += n;
  }
  free(x);
  APP_CHECK(ddp_allreduce(t->comm, DDP_IN_PLACE, sums, 2, DDP_F64, DDP_SUM, NULL));
  return sums[1] > 0 ? sums[0] / sums[1] : 0.0;
}

static int setup_model(trainer_t *t) {
  const opts_t *o = &t->o;
  char err[512];
  if (gpt_create(&t->m, &o->cfg, (int)o->batch, o->recompute, err, sizeof err) != 0) {
    if (t->rank == 0) fprintf(stderr, "gpt_train: %s\n", err);
    return -1;
  }
  gpt_t *m = &t->m;
  gpt_init_params(m, o->seed);
  if (o->dump_init && t->rank == 0) write_tensors(t, o->dump_init, m->param);
  size_t np = m->nparams, T = (size_t)o->cfg.seq, B = (size_t)o->batch;
  t->tok = xmalloc(sizeof(int32_t) * B * T), t->tgt = xmalloc(sizeof(int32_t) * B * T);
  t->shard_begin = xmalloc(sizeof(size_t) * np), t->shard_count = xmalloc(sizeof(size_t) * np);
  t->pp = xmalloc(sizeof(float *) * np), t->gp = xmalloc(sizeof(float *) * np);
  t->bp = xmalloc(sizeof(size_t) * np), t->cp = xmalloc(sizeof(size_t) * np);
  for (int g = 0; g < 2; g++) t->grp[g] = xmalloc(sizeof(size_t) * np), t->ngrp[g] = 0;
  t->gidx = xmalloc(sizeof(size_t) * np), t->state_ptr = xmalloc(sizeof(float *) * 2 * np);
  for (size_t i = 0; i < np; i++) {
    int g = m->ndim[i] == 2 ? 0 : 1;
    t->gidx[i] = t->ngrp[g];
    t->grp[g][t->ngrp[g]++] = i;
  }
  if (o->lanes) {
    if (o->lanes % t->size || (size_t)(o->lanes / t->size) > B) {
      if (t->rank == 0)
        fprintf(stderr, "gpt_train: --deterministic %ld needs a multiple of the %d ranks with at "
                "most --batch %ld lanes per rank\n", o->lanes, t->size, o->batch);
      return -1;
    }
    t->grad64 = calloc(m->total + 2, sizeof(double));
    if (!t->grad64) MPI_Abort(MPI_COMM_WORLD, 1);
    t->lane_tok = xmalloc(sizeof(int32_t) * B * T), t->lane_tgt = xmalloc(sizeof(int32_t) * B * T);
    MPI_Bcast(m->param_block, (int)m->total, MPI_FLOAT, 0, t->world); /* as the reducer does */
    return 0;
  }
  ddp_param_t *params = xmalloc(sizeof(ddp_param_t) * np);
  for (size_t i = 0; i < np; i++)
    params[i] = (ddp_param_t){.data = m->param[i], .count = m->count[i], .dtype = DDP_F32,
                              .mem = DDP_MEM_HOST, .name = m->pname[i]};
  ddp_reducer_opts_t ro;
  APP_CHECK(ddp_reducer_opts_default(&ro));
  ro.bucket_cap_mb = o->bucket_cap_mb;
  if (ro.first_bucket_mb > o->bucket_cap_mb) ro.first_bucket_mb = o->bucket_cap_mb;
  ro.shard = o->zero;
  if (o->algo) APP_CHECK(ddp_algo_parse(o->algo, &ro.algo));
  ddp_status_t st = ddp_reducer_create(t->comm, params, np, &ro, &t->reducer);
  free(params);
  APP_CHECK(st);
  return point_grads(t);
}

/* The model's name in a checkpoint: the head count is the one size the tensor shapes do not
 * tell. */
static void model_name(const opts_t *o, char *name, size_t len) {
  snprintf(name, len, "gpt-h%d", o->cfg.heads);
}

/* --resume (train_restart_load: PATH, or auto: the newest checkpoint of --checkpoint-dir that
 * validates; one of another run is refused): the parameters now, the AdamW state when the
 * optimizer is created (ensure_optim; with --zero once the shard is known), the data position
 * and the log line's sums. Returns 0 (also when auto found nothing), or 3 on every rank when
 * the checkpoint is refused (rank 0 said why). */
static int resume(trainer_t *t) {
  const opts_t *o = &t->o;
  ckpt_state_t want = {.nparams = (uint32_t)t->m.nparams, .world = t->size, .batch = (uint64_t)o->batch,
                       .seed = o->seed, .optim = TRAIN_OPTIM_ADAMW, .nstate = 2};
  model_name(o, want.model, sizeof want.model);
  int rc = train_restart_load(&t->rst, &want, t->m.count, train_optim_name(TRAIN_OPTIM_ADAMW));
  if (rc != 0 || !t->rst.resumed) return rc;
  train_restart_layout_t lay = restart_layout(t);
  train_restart_take_params(&t->rst, &lay);
  const ckpt_state_t *st = &t->rst.view.st;
  if (st->global_step > (uint64_t)o->steps || st->step_in_epoch > t->steps_per_epoch) {
    if (t->rank == 0)
      fprintf(stderr, "gpt_train: checkpoint position step %llu (epoch %llu, micro-batch %llu) is "
              "beyond this run (%ld steps, %llu micro-batches an epoch)\n",
              (unsigned long long)st->global_step, (unsigned long long)st->epoch,
              (unsigned long long)st->step_in_epoch, o->steps, (unsigned long long)t->steps_per_epoch);
    return 3;
  }
  t->start_step = st->global_step;
  t->epoch = st->epoch;
  t->mb_in_epoch = st->step_in_epoch;
  t->resume_loss_acc = st->loss_sum;
  t->resume_n_acc = (long)st->loss_steps;
  ddp_batch_t b;
  APP_CHECK(ddp_loader_start_epoch(t->loader, t->epoch));
  for (uint64_t k = 0; k < t->mb_in_epoch; k++) APP_CHECK(ddp_loader_next(t->loader, &b));
  return 0;
}

/* Collective: the checkpoint after `step` steps (parameters, AdamW state gathered from the
 * shards with --zero, data position, the current log line's sums), rank 0 writing it. */
static int save_checkpoint(trainer_t *t, uint64_t step, double loss_acc, long n_acc) {
  const opts_t *o = &t->o;
  if (o->zero) APP_CHECK(ddp_reducer_param_wait(t->reducer, SIZE_MAX));
  ckpt_state_t st = {.batch = (uint64_t)o->batch, .seed = o->seed, .epoch = t->epoch,
                     .step_in_epoch = t->mb_in_epoch, .global_step = step, .loss_sum = loss_acc,
                     .loss_steps = (uint64_t)n_acc, .epochs = (uint64_t)o->steps,
                     .optim = TRAIN_OPTIM_ADAMW, .nstate = 2,
                     .optim_steps = train_optim_steps(t->opt[0])};
  model_name(o, st.model, sizeof st.model);
  train_restart_layout_t lay = restart_layout(t);
  return train_restart_save(&t->rst, &lay, &st);
}

static void print_header(const trainer_t *t) {
  const opts_t *o = &t->o;
  const gpt_t *m = &t->m;
  if (t->rank != 0) return;
  char d[96];
  gpt_describe(&o->cfg, d, sizeof d);
  long gb = o->batch * o->accum * t->size;
  printf("# gpt_train: %s, %zu parameters in %zu tensors; activations %.1f MB per rank%s "
         "(%.1f MB %s)\n", d, m->total, m->nparams, (double)m->act_bytes / 1048576.0,
         o->recompute ? " with --recompute" : "",
         (double)(o->recompute ? m->act_bytes_full : m->act_bytes_ckpt) / 1048576.0,
         o->recompute ? "without" : "with --recompute");
  printf("# ranks %d, per-rank batch %ld x %ld micro-steps, global batch %ld sequences = %ld tokens; "
         "%llu steps (%.2f epochs)\n", t->size, o->batch, o->accum, gb, gb * o->cfg.seq,
         (unsigned long long)o->steps,
         (double)o->steps * (double)o->accum / (double)t->steps_per_epoch);
  printf("# AdamW lr %g betas %g/%g eps %g, wd %g on the 2-D tensors, warmup %llu then cosine to 0; "
         "clip %g\n", o->lr, o->beta1, o->beta2, o->eps, o->wd, (unsigned long long)t->warmup, o->clip);
  if (o->lanes)
    printf("# grad sync: deterministic, %ld lanes (%ld per rank), one f64 allreduce after backward\n",
           o->lanes, o->lanes / t->size);
  else {
    ddp_reducer_stats_t rs;
    if (ddp_reducer_stats(t->reducer, &rs) == DDP_OK)
      printf("# grad sync: reducer, %zu buckets (cap %g MB), overlap with backward%s%s; BLAS threads %d\n",
             rs.nbuckets, o->bucket_cap_mb, o->zero ? ", ZeRO-" : "",
             o->zero == 1 ? "1" : o->zero == 2 ? "2" : "", o->threads);
  }
  printf("# %.1f MFLOP per token (6 (12 L C^2 + V C) + 12 L T C)\n", gpt_flops_per_token(&o->cfg) / 1e6);
  if (t->rst.resumed)
    printf("# resumed from %s at step %llu (epoch %llu, micro-batch %llu)\n", t->rst.resume_path,
           (unsigned long long)t->start_step, (unsigned long long)t->epoch + 1,
           (unsigned long long)t->mb_in_epoch);
  printf("%6s %10s %10s %10s %9s\n", "step", "train_loss", "val_loss", "tokens/s", "ms/step");
  fflush(stdout);
}

/* Rank 0's closing lines after `steps` steps in t_all seconds: throughput, the parameters'
 * CRC, the reducer's overlap, the restart costs. */
static int report(trainer_t *t, long steps, double t_all) {
  const opts_t *o = &t->o;
  if (t->o.zero) APP_CHECK(ddp_reducer_param_wait(t->reducer, SIZE_MAX));
  if (t->rank != 0) return 0;
  double tps = t_all > 0 ? (double)o->batch * o->accum * o->cfg.seq * t->size * steps / t_all : 0.0;
  printf("# %ld steps in %.1f s: %.0f tokens/s, %.1f ms/step, %.2f GFLOP/s per rank (model FLOPs)\n",
         steps, t_all, tps, steps ? 1e3 * t_all / steps : 0.0,
         tps * gpt_flops_per_token(&o->cfg) / t->size / 1e9);
  printf("# final parameters: CRC32 0x%08x over %zu f32 values\n",
         ckpt_crc32(t->m.param_block, sizeof(float) * t->m.total), t->m.total);
  ddp_reducer_stats_t rs;
  if (t->reducer && ddp_reducer_stats(t->reducer, &rs) == DDP_OK && rs.iterations)
    printf("# reducer: %zu buckets, comm %.3f ms/step, exposed %.3f ms/step, %.0f%% hidden\n",
           rs.nbuckets, rs.comm_ms_avg, rs.exposed_ms_avg, 100.0 * rs.hidden_fraction);
  train_restart_print_stats(&t->rst);
  return 0;
}

/* The run stopped before its last step: on request (every rank after the same step; its
 * checkpoint unless the --checkpoint-every save of this very step just did), or --stop-after. */
static void report_stop(trainer_t *t, long done, double loss_acc, long n_acc) {
  if (!t->rst.stop_sig) {
    if (t->rank == 0) printf("# stopped after step %ld (--stop-after)\n", done);
    return;
  }
  int ok = t->rst.saved_ok;
  if (t->rst.saved_step != (uint64_t)done) ok = save_checkpoint(t, (uint64_t)done, loss_acc, n_acc) == 0;
  train_restart_print_stop(&t->rst, (uint64_t)done, NULL, ok);
}

/* The steps from the resume position on: one line per --log-every steps, validation,
 * checkpoints (every --checkpoint-every steps, else at the end), stopping on request or
 * --stop-after. */
static int train(trainer_t *t) {
  const opts_t *o = &t->o;
  int (*step)(trainer_t *, float, double *, double *, int) = o->lanes ? step_lanes : step_reducer;
  double tokens_per_step = (double)o->batch * o->accum * o->cfg.seq * t->size;
  double loss_acc = t->resume_loss_acc, t_line = 0.0, t_all = 0.0, val = NAN;
  long n_acc = t->resume_n_acc, s0 = (long)t->start_step, done = s0;
  int stop = 0, stopped = 0;
  for (long s = s0; s < o->steps && !stopped; s++) {
    double lr = train_lr(o->lr, (uint64_t)s, t->warmup, (uint64_t)o->steps), loss = 0.0, gn = 0.0;
    double t0 = train_now();
    if (step(t, (float)lr, &loss, &gn, s == 0) != 0) return 1;
    double dt = train_now() - t0;
    t_line += dt, t_all += dt, done = s + 1;
    /* the ranks' mean loss on every rank, and their stop flags: a step boundary all pass */
    double mean = train_restart_agree(&t->rst, loss, &stop);
    loss_acc += mean, n_acc++;
    if (t->steplog)
      fprintf(t->steplog, "%ld %.9g %.9g %.9g\n", s + 1, mean, lr, gn), fflush(t->steplog);
    int last = s + 1 == o->steps, do_val = o->val_every && ((s + 1) % o->val_every == 0 || last);
    if (do_val) val = validate(t);
    if (((s + 1) % o->log_every == 0 || last) && t->rank == 0) {
      char vb[16] = "-";
      if (do_val) snprintf(vb, sizeof vb, "%.4f", val);
      printf("%6ld %10.4f %10s %10.0f %9.1f\n", s + 1, loss_acc / n_acc, vb,
             tokens_per_step * n_acc / t_line, 1e3 * t_line / n_acc);
      fflush(stdout);
    }
    if ((s + 1) % o->log_every == 0 || last) loss_acc = 0.0, n_acc = 0, t_line = 0.0;
    if (train_restart_enabled(&t->rst) && (o->checkpoint_every ? (s + 1) % o->checkpoint_every == 0 : last))
      save_checkpoint(t, (uint64_t)(s + 1), loss_acc, n_acc);
    if (!last && stop) t->rst.stop_sig = stop; /* the last step: finished, its checkpoint written */
    stopped = !last && (stop || (o->stop_after && s + 1 >= o->stop_after));
  }
  if (stopped) report_stop(t, done, loss_acc, n_acc);
  return stopped ? 0 : report(t, done - s0, t_all);
}

static void cleanup(trainer_t *t) {
  if (t->steplog) fclose(t->steplog);
  ddp_reducer_destroy(&t->reducer);
  ddp_loader_destroy(&t->loader);
  ddp_sampler_destroy(&t->sampler);
  ddp_dataset_destroy(&t->train);
  ddp_dataset_destroy(&t->val);
  for (int g = 0; g < 2; g++) train_optim_destroy(&t->opt[g]), free(t->grp[g]);
  gpt_free(&t->m);
  free(t->tok), free(t->tgt), free(t->shard_begin), free(t->shard_count);
  free(t->pp), free(t->gp), free(t->bp), free(t->cp);
  free(t->grad64), free(t->lane_tok), free(t->lane_tgt);
  free(t->gidx), free(t->state_ptr);
  train_restart_destroy(&t->rst);
}

int main(int argc, char **argv) {
  app_blas_auto(argv); /* before MPI starts: may re-execute with a faster OpenBLAS kernel */
  trainer_t t;
  memset(&t, 0, sizeof t);
  APP_CHECK(ddp_init(&argc, &argv, MPI_COMM_NULL, &t.comm));
  APP_CHECK(ddp_comm_rank(t.comm, &t.rank));
  APP_CHECK(ddp_comm_size(t.comm, &t.size));
  APP_CHECK(ddp_comm_mpi(t.comm, DDP_COMM_WORLD, &t.world));
  int pr = parse_args(argc, argv, &t.o, t.rank != 0); /* same verdict on every rank */
  if (pr != 0) {
    ddp_finalize(&t.comm);
    return pr < 0 ? 2 : 0;
  }
  ddp_comm_info_t ci;
  APP_CHECK(ddp_comm_info(t.comm, &ci));
  app_blas_note(ci.local_rank == 0, 1);
  openblas_set_num_threads(t.o.threads);
  train_restart_opts_t ro = {.app = "gpt_train", .dir = t.o.checkpoint_dir, .resume = t.o.resume,
                             .keep = (unsigned)t.o.keep};
  if (train_restart_init(&t.rst, &ro, t.comm) != 0) { /* every rank leaves together */
    ddp_finalize(&t.comm);
    return 2;
  }
  int ok = setup_data(&t) == 0;
  ok = ok && setup_model(&t) == 0;
  int all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, t.world);
  int rc = all ? resume(&t) : 2; /* a refused checkpoint: 3 on every rank, nothing written */
  if (rc != 0) {
    cleanup(&t);
    ddp_finalize(&t.comm);
    return rc;
  }
  t.warmup = t.o.warmup >= 0 ? (uint64_t)t.o.warmup : train_default_warmup((uint64_t)t.o.steps);
  if (t.o.log_steps && t.rank == 0 && !(t.steplog = fopen(t.o.log_steps, t.rst.resumed ? "a" : "w")))
    fprintf(stderr, "gpt_train: cannot write %s: %s\n", t.o.log_steps, strerror(errno));
  print_header(&t);
  rc = train(&t);
  cleanup(&t);
  APP_CHECK(ddp_finalize(&t.comm));
  return rc ? rc : t.rst.stop_sig ? TRAIN_RESTART_EXIT : 0;
}
