/* Restarts of a training program, model-agnostic (ddp_train, gpt_train): stopping on request
 * (SIGTERM / SIGUSR1) at a step every rank agrees on, checkpoints that gather ZeRO-sharded
 * optimizer state to rank 0, and resuming from the newest checkpoint that validates. The file
 * format is checkpoint.h's, the folder ckpt_dir.h's; definitions in train_restart.c.
 *
 *   train_restart_t r;
 *   if (train_restart_init(&r, &ro, comm) != 0) ...;        // collective: folder checked
 *   if (train_restart_load(&r, &want, counts, "adamw") != 0) // collective: 3 = refused
 *     ...;
 *   if (r.resumed) { train_restart_take_params(&r, &lay); position from r.view.st; }
 *   ...optimizer created (with ZeRO: once the shard is known): train_restart_take_state(&r, &lay);
 *   each step: mean = train_restart_agree(&r, loss, &stop);  // collective
 *   to save:   train_restart_save(&r, &lay, &st);             // collective
 *   stop != 0: save, train_restart_print_stop(...), exit TRAIN_RESTART_EXIT
 *
 * What a checkpoint tells a later run (for a resume at another world size): the header's
 * st.world is the rank count that wrote it; the optimizer state is always stored for the
 * whole tensors, gathered from the shards, so the ZeRO partition of the writer does not matter:
 * any partition takes its ranges back with train_restart_take_state. The sampler position is
 * st.epoch / st.step_in_epoch in batches of st.batch per rank at st.world ranks.
 *
 * The stop request is the one process-wide flag of the kit (a signal handler can only set a
 * volatile sig_atomic_t); it lives in train_restart.c and is read only by train_restart_agree.
 * Errors never abort inside the save or load; the collectives check with APP_CHECK. */
#ifndef TRAIN_RESTART_H
#define TRAIN_RESTART_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "checkpoint.h"
#include "ddp.h"

/* EX_TEMPFAIL: stopped on request with a checkpoint; resume to go on (apps/ddp_run). */
#define TRAIN_RESTART_EXIT 75

typedef struct train_restart_opts {
  const char *app;    /* program name, the prefix of every message ("ddp_train") */
  const char *file;   /* --checkpoint FILE, or NULL */
  const char *dir;    /* --checkpoint-dir DIR (numbered checkpoints + LATEST), or NULL */
  const char *resume; /* --resume auto | PATH, or NULL */
  unsigned keep;      /* --keep: checkpoints kept in dir (>= 1) */
  /* A checkpoint of another world size (issue 28): NULL refuses it; else elastic(ctx, view,
   * err) says whether the program can continue it (0) or why not (-1, err), and the program
   * re-plans its batch from r->view.st after the load (train_elastic.h). */
  int (*elastic)(void *ctx, const ckpt_view_t *v, char *err, size_t errlen);
  void *elastic_ctx;
} train_restart_opts_t;

/* The state a checkpoint holds, as one rank sees it. Every rank holds all parameters; the
 * optimizer's state buffer k of tensor i is state[k * nparams + i], shard_count[i] floats for
 * elements shard_begin[i] .. of that tensor (the whole tensor without ZeRO). */
typedef struct train_restart_layout {
  size_t nparams;
  const size_t *count;        /* elements of each tensor */
  float *const *param;        /* the parameters */
  size_t nstate;              /* state buffers per tensor held (0: none; the file stores zeros) */
  float *const *state;        /* nstate * nparams pointers */
  const size_t *shard_begin;  /* per tensor: the range of this rank's state */
  const size_t *shard_count;
  int sharded;                /* 1: each rank holds its own range (ZeRO), gathered to save */
} train_restart_layout_t;

typedef struct train_restart {
  train_restart_opts_t o;
  ddp_comm_t *comm;
  MPI_Comm world;
  int rank, size;
  /* After train_restart_load: whether a checkpoint was resumed, which (rank 0) and its header
   * (every rank: view.st holds the position); its bytes until the state is taken. */
  int resumed;
  char resume_path[4200];
  ckpt_view_t view;
  void *buf;
  size_t bytes;
  int params_pending, state_pending;
  /* The newest save of this run (every rank: the step; rank 0: whether it was written), the
   * signal the ranks agreed to stop on, time and count of step agreements and saves. */
  uint64_t saved_step;
  int saved_ok;
  int stop_sig;
  double agree_s, ckpt_s;
  uint64_t agree_n, ckpt_n;
} train_restart_t;

/* Collective. Rank 0 makes sure o->dir can be written (before any data is read: a run must not
 * train for hours and then fail to save); with checkpoints on (file or dir) every rank stops on
 * request from here on. Returns 0, or -1 on every rank (rank 0 said why). */
int train_restart_init(train_restart_t *r, const train_restart_opts_t *o, ddp_comm_t *comm);

/* Checkpoints are on (--checkpoint FILE or --checkpoint-dir DIR). */
int train_restart_enabled(const train_restart_t *r);

/* Collective, with o->resume set (else a no-op). Rank 0 picks the checkpoint: --resume PATH,
 * or auto: the newest of the folder that validates (falling back past damaged ones, saying
 * so), or --checkpoint FILE when it exists; one of another run (want's model, nparams, world,
 * batch, seed; counts; optimizer kind `optim_name` and nstate) is refused, never skipped.
 * want->world 0 accepts any writer's rank count (a caller that maps the position and the
 * shards to its own world: r->view.st.world is the writer's); another world size is also
 * taken when o->elastic says it fits (the file's batch is then the program's to re-plan). Its
 * bytes go to every rank. Returns 0 (r->resumed: 1 loaded, 0 nothing to resume) or 3 on every
 * rank when refused (rank 0 said why). */
int train_restart_load(train_restart_t *r, const ckpt_state_t *want, const size_t *counts,
                       const char *optim_name);

/* The resumed parameters into lay->param (no-op when none is pending). */
void train_restart_take_params(train_restart_t *r, const train_restart_layout_t *lay);
/* The resumed optimizer state: this rank's ranges of the file's full state into lay->state;
 * then the checkpoint's bytes are freed. No-op when none is pending. */
void train_restart_take_state(train_restart_t *r, const train_restart_layout_t *lay);

/* The step boundary every rank passes, collective: one allreduce of two doubles sums the
 * ranks' losses (so every rank accumulates the very same loss, which a checkpoint restores
 * exactly) and their stop flags (so every rank learns of a signal any rank got at the same
 * step). Returns the ranks' mean loss; *stop is the lowest signal number any rank got (0:
 * none). */
double train_restart_agree(train_restart_t *r, double loss, int *stop);

/* Collective: the sharded state is gathered to rank 0 first; rank 0 writes the checkpoint of
 * position *st (nparams, world and, when 0, nstate are filled in here) atomically to the file or
 * as the next numbered checkpoint of the folder (then LATEST, then pruning to keep). A failed
 * write is reported and training goes on (the previous checkpoint stays intact). Returns 0
 * (rank 0: written; other ranks always 0) or -1. */
int train_restart_save(train_restart_t *r, const train_restart_layout_t *lay, const ckpt_state_t *st);

/* Rank 0, after a stop on request: "# stopped on SIGUSR1 after global step N (where): ...;
 * exit status 75" (where may be NULL); ok: its checkpoint was written. */
void train_restart_print_stop(const train_restart_t *r, uint64_t global_step, const char *where,
                              int ok);

/* Rank 0: the step agreement's and the checkpoints' cost lines (when any). */
void train_restart_print_stats(const train_restart_t *r);

/* Frees a checkpoint still held. */
void train_restart_destroy(train_restart_t *r);

#endif /* TRAIN_RESTART_H */
