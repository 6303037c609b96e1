/* Restarts of a training program: stop handlers, the step agreement, resume and ZeRO-gathered
 * checkpoints (train_restart.h). */
#include "train_restart.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app_check.h"
#include "ckpt_dir.h"
#include "train_elastic.h"
#include "train_util.h"

/* SIGTERM or SIGUSR1, what a scheduler sends before a time limit or a preemption, only sets
 * this flag; train_restart_agree shares it at every step boundary. A second signal before the
 * stop is done ends the process at once with status 128 + signal (_exit is
 * async-signal-safe). The kit's one process-wide variable: a handler can reach nothing else. */
static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig) {
  if (stop_signal) _exit(128 + sig);
  stop_signal = sig;
}

static void install_stop_handlers(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGUSR1, &sa, NULL);
}

static void *alloc_or_abort(const train_restart_t *r, size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "%s: out of memory (%zu bytes)\n", r->o.app, bytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return p;
}

int train_restart_enabled(const train_restart_t *r) { return r->o.file || r->o.dir; }

int train_restart_init(train_restart_t *r, const train_restart_opts_t *o, ddp_comm_t *comm) {
  memset(r, 0, sizeof *r);
  r->o = *o;
  if (!r->o.app) r->o.app = "train";
  if (r->o.keep == 0) r->o.keep = 1;
  r->comm = comm;
  r->saved_step = UINT64_MAX;
  APP_CHECK(ddp_comm_rank(comm, &r->rank));
  APP_CHECK(ddp_comm_size(comm, &r->size));
  APP_CHECK(ddp_comm_mpi(comm, DDP_COMM_WORLD, &r->world));
  int ok = 1;
  if (o->dir && r->rank == 0) {
    char err[1024];
    ok = ckdir_prepare(o->dir, err, sizeof err) == 0;
    if (!ok) fprintf(stderr, "%s: %s\n", r->o.app, err);
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, r->world);
  if (!ok) return -1;
  if (train_restart_enabled(r)) install_stop_handlers();
  return 0;
}

/* The path of resume candidate i into path: the folder's i-th checkpoint (steps[i]) or the one
 * file. */
static void candidate_path(const train_restart_t *r, int dir_auto, const uint64_t *steps, size_t i,
                           char *path, size_t len) {
  char name[CKDIR_NAME_BYTES];
  int is_auto = strcmp(r->o.resume, "auto") == 0;
  if (dir_auto) {
    ckdir_name(steps[i], name, sizeof name);
    snprintf(path, len, "%s/%s", r->o.dir, name);
  } else {
    snprintf(path, len, "%s", is_auto ? r->o.file : r->o.resume);
  }
}

/* Rank 0: the candidates of --resume: auto with a folder: its checkpoints in ckdir_candidates'
 * order; auto with a file: that file when it exists; a path: that one. -1 on error. */
static int resume_candidates(const train_restart_t *r, uint64_t **steps, size_t *n) {
  char err[1024], note[2048];
  int is_auto = strcmp(r->o.resume, "auto") == 0;
  *steps = NULL;
  *n = 1;
  if (is_auto && r->o.dir) {
    if (ckdir_candidates(r->o.dir, steps, n, note, sizeof note, err, sizeof err) != 0) {
      fprintf(stderr, "%s: --resume auto: %s\n", r->o.app, err);
      return -1;
    }
    if (note[0]) fprintf(stderr, "%s: --resume auto: %s\n", r->o.app, note);
  } else if (is_auto) {
    *n = access(r->o.file, F_OK) == 0;
  }
  return 0;
}

/* Rank 0: picks, reads and checks the checkpoint into r->buf / r->view. Returns 1 (loaded,
 * r->resume_path names it), 0 (nothing to resume) or -1 (refused). */
static int pick_resume(train_restart_t *r, const ckpt_state_t *want, const size_t *counts,
                       const char *optim_name) {
  char err[1024], path[4200];
  int is_auto = strcmp(r->o.resume, "auto") == 0, dir_auto = is_auto && r->o.dir;
  uint64_t *steps = NULL;
  size_t n = 0;
  if (resume_candidates(r, &steps, &n) != 0) return -1;
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++) {
    candidate_path(r, dir_auto, steps, i, path, sizeof path);
    if (ckpt_load_file(path, &r->buf, &r->bytes, &r->view, err, sizeof err) != 0) {
      if (!is_auto) {
        fprintf(stderr, "%s: cannot resume from %s: %s\n", r->o.app, path, err);
        rc = -1;
      } else {
        fprintf(stderr, "%s: --resume auto: %s is damaged (%s); %s\n", r->o.app, path, err,
                i + 1 < n ? "falling back to the previous checkpoint" : "no older checkpoint left");
      }
      continue;
    }
    /* want->world 0: any writer's rank count (the caller maps it). Another world size that
     * the program takes (o.elastic): the global batch is its to keep, not the per-rank one. */
    int world = want->world ? want->world : r->view.st.world;
    int other = r->view.st.world != world && r->o.elastic;
    if (ckpt_check_compatible(r->buf, &r->view, want->model, counts, want->nparams,
                              other ? r->view.st.world : world,
                              other ? r->view.st.batch : want->batch, want->seed, err,
                              sizeof err) != 0 ||
        ckpt_check_optim(&r->view, want->optim, optim_name, want->nstate, err, sizeof err) != 0 ||
        (other && r->o.elastic(r->o.elastic_ctx, &r->view, err, sizeof err) != 0)) {
      fprintf(stderr, "%s: cannot resume from %s: %s\n", r->o.app, path, err);
      free(r->buf);
      r->buf = NULL;
      rc = -1;
      continue;
    }
    snprintf(r->resume_path, sizeof r->resume_path, "%s", path);
    rc = 1;
  }
  if (rc == 0)
    fprintf(stderr, "%s: --resume auto: no usable checkpoint %s %s: starting from scratch\n",
            r->o.app, r->o.dir ? "in" : "at", r->o.dir ? r->o.dir : r->o.file);
  free(steps);
  return rc;
}

int train_restart_load(train_restart_t *r, const ckpt_state_t *want, const size_t *counts,
                       const char *optim_name) {
  if (!r->o.resume) return 0;
  long long hdr = 0;
  if (r->rank == 0) {
    int p = pick_resume(r, want, counts, optim_name);
    hdr = p < 0 ? -1 : p == 0 ? 0 : (long long)r->bytes;
  }
  MPI_Bcast(&hdr, 1, MPI_LONG_LONG, 0, r->world);
  if (hdr <= 0) {
    free(r->buf);
    r->buf = NULL;
    return hdr < 0 ? 3 : 0; /* refused, or nothing to resume: from scratch */
  }
  r->bytes = (size_t)hdr;
  if (r->rank != 0) r->buf = alloc_or_abort(r, r->bytes);
  for (size_t off = 0; off < r->bytes;) {
    int n = r->bytes - off > (1u << 30) ? (1 << 30) : (int)(r->bytes - off);
    MPI_Bcast((char *)r->buf + off, n, MPI_BYTE, 0, r->world);
    off += (size_t)n;
  }
  char err[1024];
  if (r->rank != 0 && ckpt_parse(r->buf, r->bytes, &r->view, err, sizeof err) != 0) {
    fprintf(stderr, "%s: rank %d: checkpoint damaged in transit: %s\n", r->o.app, r->rank, err);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  r->resumed = 1;
  r->params_pending = r->state_pending = 1;
  return 0;
}

static void release_if_done(train_restart_t *r) {
  if (r->params_pending || r->state_pending) return;
  free(r->buf);
  r->buf = NULL;
}

void train_restart_take_params(train_restart_t *r, const train_restart_layout_t *lay) {
  if (!r->params_pending) return;
  for (size_t i = 0, off = 0; i < lay->nparams; off += lay->count[i], i++)
    ckpt_copy_floats(r->buf, r->view.params_off + sizeof(float) * off, lay->param[i], lay->count[i]);
  r->params_pending = 0;
  release_if_done(r);
}

void train_restart_take_state(train_restart_t *r, const train_restart_layout_t *lay) {
  if (!r->state_pending) return;
  /* The file's full state: this rank's ranges of it, whatever the writer's world size. */
  ckpt_view_t v = r->view;
  if (lay->nstate < v.st.nstate) v.st.nstate = (uint32_t)lay->nstate; /* checked: equal, or 0 */
  char err[512];
  if (elastic_take_shard(r->buf, &v, lay->shard_begin, lay->shard_count, lay->nparams, lay->state,
                         err, sizeof err) != 0) {
    fprintf(stderr, "%s: rank %d: resume: %s\n", r->o.app, r->rank, err);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  r->state_pending = 0;
  release_if_done(r);
}

double train_restart_agree(train_restart_t *r, double loss, int *stop) {
  double t0 = train_now();
  int sig = stop_signal;
  double v[2] = {loss, sig ? 1.0 : 0.0}, s[2], mine = sig ? (double)sig : 1e9, first = 0.0;
  APP_CHECK(ddp_allreduce(r->comm, v, s, 2, DDP_F64, DDP_SUM, NULL));
  if (s[1] > 0.0) APP_CHECK(ddp_allreduce(r->comm, &mine, &first, 1, DDP_F64, DDP_MIN, NULL));
  *stop = (int)first;
  r->agree_s += train_now() - t0;
  r->agree_n++;
  return s[0] / (double)r->size;
}

/* The full optimizer state on rank 0 (nstate * total floats, buffer by buffer, tensors in
 * order, as the checkpoint stores it), every rank's ranges gathered (collective). NULL on the
 * other ranks. */
static float *gather_state(const train_restart_t *r, const train_restart_layout_t *lay, size_t total) {
  size_t np = lay->nparams, nst = lay->nstate, mine_n = 0;
  uint64_t *mine = alloc_or_abort(r, sizeof(uint64_t) * 2 * np);
  for (size_t i = 0; i < np; i++) {
    mine[2 * i] = lay->shard_begin[i], mine[2 * i + 1] = lay->shard_count[i];
    mine_n += lay->shard_count[i];
  }
  float *packed = alloc_or_abort(r, sizeof(float) * nst * mine_n);
  for (size_t k = 0, o = 0; k < nst; k++)
    for (size_t i = 0; i < np; o += lay->shard_count[i], i++)
      memcpy(packed + o, lay->state[k * np + i], sizeof(float) * lay->shard_count[i]);
  int root = r->rank == 0, n = r->size;
  uint64_t *all = root ? alloc_or_abort(r, sizeof(uint64_t) * 2 * np * (size_t)n) : NULL;
  int *cnt = root ? alloc_or_abort(r, sizeof(int) * 2 * (size_t)n) : NULL, *dsp = root ? cnt + n : NULL;
  MPI_Gather(mine, (int)(2 * np), MPI_UINT64_T, all, (int)(2 * np), MPI_UINT64_T, 0, r->world);
  size_t rtotal = 0;
  for (int q = 0; root && q < n; q++) {
    size_t sum = 0;
    for (size_t i = 0; i < np; i++) sum += all[(size_t)q * 2 * np + 2 * i + 1];
    cnt[q] = (int)(nst * sum), dsp[q] = (int)rtotal;
    rtotal += nst * sum;
  }
  float *recv = root ? alloc_or_abort(r, sizeof(float) * rtotal) : NULL;
  MPI_Gatherv(packed, (int)(nst * mine_n), MPI_FLOAT, recv, cnt, dsp, MPI_FLOAT, 0, r->world);
  float *full = NULL;
  if (root) {
    full = alloc_or_abort(r, sizeof(float) * nst * total);
    for (int q = 0; q < n; q++) {
      const uint64_t *rq = all + (size_t)q * 2 * np;
      size_t sum = (size_t)cnt[q] / nst;
      for (size_t k = 0; k < nst; k++)
        for (size_t i = 0, off = 0, soff = 0; i < np; off += lay->count[i], soff += rq[2 * i + 1], i++)
          memcpy(full + k * total + off + rq[2 * i], recv + dsp[q] + k * sum + soff,
                 rq[2 * i + 1] * sizeof(float));
    }
  }
  free(mine), free(packed), free(all), free(cnt), free(recv);
  return full;
}

/* Rank 0: serialises and writes the checkpoint (state: nstate * nparams tensor pointers, or
 * NULL). Returns 0 or -1 after saying why. */
static int write_checkpoint(train_restart_t *r, const ckpt_state_t *st, const train_restart_layout_t *lay,
                            float *const *state) {
  char err[1024], note[2048] = "";
  void *cb = NULL;
  size_t cbytes = 0;
  int rc = ckpt_serialize(st, lay->param, state, lay->count, &cb, &cbytes, err, sizeof err);
  if (rc == 0 && r->o.dir)
    rc = ckdir_save(r->o.dir, st->global_step, cb, cbytes, r->o.keep, note, sizeof note, err,
                    sizeof err);
  else if (rc == 0)
    rc = ckpt_write_atomic(r->o.file, cb, cbytes, err, sizeof err);
  if (rc != 0) fprintf(stderr, "%s: checkpoint not written: %s\n", r->o.app, err);
  if (note[0]) fprintf(stderr, "%s: checkpoint directory: %s\n", r->o.app, note);
  free(cb);
  return rc;
}

int train_restart_save(train_restart_t *r, const train_restart_layout_t *lay, const ckpt_state_t *pos) {
  ckpt_state_t st = *pos;
  st.nparams = (uint32_t)lay->nparams;
  st.world = r->size;
  if (st.nstate == 0) st.nstate = lay->nstate ? (uint32_t)lay->nstate : 1u;
  size_t total = 0;
  for (size_t i = 0; i < lay->nparams; i++) total += lay->count[i];
  float *full = lay->sharded && lay->nstate ? gather_state(r, lay, total) : NULL;
  r->saved_step = st.global_step; /* on every rank: this step's position has been saved */
  if (r->rank != 0) return 0;
  float **sp = NULL;
  if (lay->nstate) {
    sp = alloc_or_abort(r, sizeof(float *) * lay->nstate * lay->nparams);
    for (size_t k = 0; k < lay->nstate; k++)
      for (size_t i = 0, off = 0; i < lay->nparams; off += lay->count[i], i++)
        sp[k * lay->nparams + i] = full ? full + k * total + off : lay->state[k * lay->nparams + i];
  }
  double t0 = train_now();
  int rc = write_checkpoint(r, &st, lay, sp);
  free(sp);
  free(full);
  r->saved_ok = rc == 0;
  if (rc == 0) {
    r->ckpt_s += train_now() - t0;
    r->ckpt_n++;
  }
  return rc;
}

void train_restart_print_stop(const train_restart_t *r, uint64_t global_step, const char *where,
                              int ok) {
  if (r->rank != 0) return;
  int s = r->stop_sig;
  printf("# stopped on %s after global step %llu%s%s%s: %s; exit status %d\n",
         s == SIGTERM ? "SIGTERM" : s == SIGUSR1 ? "SIGUSR1" : "a signal",
         (unsigned long long)global_step, where ? " (" : "", where ? where : "", where ? ")" : "",
         ok ? "checkpoint written, resume with --resume auto"
            : "its checkpoint was NOT written, a resume repeats the steps since the previous one",
         TRAIN_RESTART_EXIT);
  fflush(stdout);
}

void train_restart_print_stats(const train_restart_t *r) {
  if (r->rank != 0) return;
  if (r->agree_n)
    printf("# step boundary (loss + stop flag, one allreduce of 2 f64): %.1f us/step over %llu steps\n",
           1e6 * r->agree_s / (double)r->agree_n, (unsigned long long)r->agree_n);
  if (r->ckpt_n)
    printf("# checkpoints: %llu written, %.1f ms each (serialise, write, fsync, rename%s)\n",
           (unsigned long long)r->ckpt_n, 1e3 * r->ckpt_s / (double)r->ckpt_n,
           r->o.dir ? ", LATEST, prune" : "");
}

void train_restart_destroy(train_restart_t *r) {
  free(r->buf);
  r->buf = NULL;
  r->params_pending = r->state_pending = 0;
}
