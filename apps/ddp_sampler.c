/* ddp_sampler: prints the index list that torch.utils.data.DistributedSampler gives a rank,
 * so anyone can check our order against PyTorch's; --bench times index generation and the
 * prefetching loader. Needs no mpirun (the sampler does not communicate). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "app_check.h"
#include "app_opts.h"
#include "ddp.h"
#include "fmnist.h"

static void usage(FILE *fp) {
  fprintf(fp,
          "usage: ddp_sampler --size N [--replicas R] [--rank r | --all-ranks] [--seed S]\n"
          "                   [--epoch E] [--shuffle] [--drop-last]\n"
          "                   [--batch-size B [--drop-last-batch]]\n"
          "       ddp_sampler --bench [--data DIR] [--train-rate SAMPLES_PER_S] [--json FILE] [--check]\n"
          "\n"
          "Prints the indices torch.utils.data.DistributedSampler(dataset of N, num_replicas=R,\n"
          "rank=r, shuffle=..., seed=S, drop_last=...) yields after set_epoch(E), space-separated\n"
          "on one line (Python: print(*sampler)). Defaults: R 1, r 0, S 0, E 0, no shuffle, no\n"
          "drop_last (note: PyTorch's default is shuffle=True; pass --shuffle for it).\n"
          "  --all-ranks        one line per rank, rank 0 first\n"
          "  --batch-size B     one line per batch of B indices (BatchSampler over the rank's list)\n"
          "  --drop-last-batch  omit the final short batch\n"
          "  --bench            time index generation and the loader (table + optional JSON)\n"
          "  --data DIR         Fashion-MNIST folder for --bench (default %s)\n"
          "  --train-rate X     samples/s a training step consumes, for the loader ratio\n"
          "                     (default 1939: W-DDP's 33.0 ms/step at batch 64)\n"
          "  --check            exit 1 unless index generation for 60,000 samples takes < 1 ms\n"
          "                     and the loader delivers >= 10x the training rate\n",
          FMNIST_DEFAULT_DIR);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Prints one rank's list (or its batches), one line each. */
static int print_rank(const ddp_sampler_opts_t *o, uint64_t epoch, uint64_t batch_size,
                      int drop_last_batch) {
  ddp_sampler_t *s = NULL;
  APP_CHECK(ddp_sampler_create(o, &s));
  ddp_status_t st = ddp_sampler_set_epoch(s, epoch);
  if (st != DDP_OK) {
    fprintf(stderr, "ddp_sampler: %s\n", ddp_last_error());
    ddp_sampler_destroy(&s);
    return 1;
  }
  size_t len = 0, count = 0;
  APP_CHECK(ddp_sampler_length(s, &len));
  int64_t *idx = malloc((len > 0 ? len : 1) * sizeof(int64_t));
  if (idx == NULL) {
    fprintf(stderr, "ddp_sampler: no memory for %zu indices\n", len);
    ddp_sampler_destroy(&s);
    return 1;
  }
  APP_CHECK(ddp_sampler_indices(s, idx, len, &count));
  size_t per_line = batch_size ? (size_t)batch_size : (count > 0 ? count : 1);
  size_t lines = batch_size ? 0 : 1;
  if (batch_size) APP_CHECK(ddp_sampler_num_batches(s, (size_t)batch_size, drop_last_batch, &lines));
  /* one big buffered write per line: 60,000 indices print in a few ms */
  for (size_t b = 0; b < lines; b++) {
    size_t begin = b * per_line, end = begin + per_line < count ? begin + per_line : count;
    for (size_t k = begin; k < end; k++)
      printf(k == begin ? "%" PRId64 : " %" PRId64, idx[k]);
    putchar('\n');
  }
  free(idx);
  ddp_sampler_destroy(&s);
  return 0;
}

/* ---- --bench ------------------------------------------------------------------------- */

#define BENCH_REPS 5

typedef struct bench_row {
  char what[64];
  double value;
  char unit[16];
  char note[96];
} bench_row_t;

/* Median time of ddp_sampler_set_epoch over `reps` epochs. */
static int bench_set_epoch(uint64_t n, int replicas, int reps, double *median_s) {
  ddp_sampler_opts_t o;
  ddp_sampler_opts_default(&o);
  o.dataset_size = n;
  o.num_replicas = replicas;
  o.rank = replicas - 1;
  o.seed = 1234;
  ddp_sampler_t *s = NULL;
  APP_CHECK(ddp_sampler_create(&o, &s));
  double *t = malloc((size_t)reps * sizeof(double));
  if (t == NULL) return 1;
  for (int i = 0; i < reps; i++) {
    double t0 = now_s();
    APP_CHECK(ddp_sampler_set_epoch(s, (uint64_t)i + 1));
    t[i] = now_s() - t0;
  }
  qsort(t, (size_t)reps, sizeof(double), cmp_double);
  *median_s = t[reps / 2];
  free(t);
  ddp_sampler_destroy(&s);
  return 0;
}

/* Stands in for a training step during which this core is free (a GPU step the host waits
 * for): sleeping rather than spinning makes the measurement independent of whether a second
 * core is idle on a shared machine. */
static void step_wait(double secs) {
  struct timespec ts = {(time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* One epoch through the loader (at most max_batches); returns seconds, samples, and the time
 * the consumer spent waiting inside ddp_loader_next (the data stall). With compute_per_batch
 * > 0 the consumer waits that long per batch (a training step), so prefetching can hide the
 * reading and the stall drops towards zero. */
static int bench_loader(ddp_sampler_t *s, const ddp_dataset_t *ds, int depth,
                        double compute_per_batch, size_t max_batches, double *secs,
                        size_t *samples, double *stall) {
  ddp_loader_opts_t lo;
  ddp_loader_opts_default(&lo);
  lo.batch_size = 64;
  lo.prefetch_depth = depth;
  ddp_loader_t *l = NULL;
  APP_CHECK(ddp_loader_create(s, ds, &lo, &l));
  double t0 = now_s(), waited = 0.0;
  APP_CHECK(ddp_loader_start_epoch(l, 1));
  ddp_batch_t b;
  size_t n = 0, nb = 0;
  volatile float sink = 0.0f;
  for (;;) {
    double w0 = now_s();
    APP_CHECK(ddp_loader_next(l, &b));
    waited += now_s() - w0;
    if (b.count == 0 || nb == max_batches) break;
    sink += b.x[0];
    n += b.count;
    nb++;
    if (compute_per_batch > 0) step_wait(compute_per_batch);
  }
  *secs = now_s() - t0;
  *samples = n;
  *stall = waited;
  (void)sink;
  ddp_loader_destroy(&l);
  return 0;
}

/* 1. index generation (set_epoch = mt19937 + randperm + this rank's share), median */
static int bench_generation(bench_row_t *rows, int *nrows, double *gen60k_ms) {
  const struct { uint64_t n; int r; int reps; } gen[] = {
      {60000, 1, 301}, {60000, 8, 301}, {1000000, 1, 21}};
  for (size_t i = 0; i < sizeof(gen) / sizeof(gen[0]); i++) {
    double med = 0.0;
    if (bench_set_epoch(gen[i].n, gen[i].r, gen[i].reps, &med)) return 1;
    bench_row_t *r = &rows[(*nrows)++];
    snprintf(r->what, sizeof r->what, "set_epoch n=%" PRIu64 " replicas=%d", gen[i].n, gen[i].r);
    r->value = med * 1e3;
    snprintf(r->unit, sizeof r->unit, "ms");
    snprintf(r->note, sizeof r->note, "median of %d epochs", gen[i].reps);
    if (i == 0) *gen60k_ms = r->value;
  }
  return 0;
}

/* overlap: a consumer whose step takes 1 ms per batch, 200 batches; the time it waits for data
 * in ddp_loader_next, without (depth 0) and with prefetching (depth 2) */
static int bench_stall(ddp_sampler_t *s, ddp_dataset_t *set, const char *name, bench_row_t *rows,
                       int *nrows) {
  double stall[2][BENCH_REPS], total[2][BENCH_REPS];
  for (int k = 0; k < 2 * BENCH_REPS; k++) { /* alternate depths so drift hits both */
    size_t n = 0;
    int dd = k % 2;
    if (bench_loader(s, set, 2 * dd, 1e-3, 200, &total[dd][k / 2], &n, &stall[dd][k / 2]))
      return 1;
  }
  for (int dd = 0; dd < 2; dd++) {
    qsort(stall[dd], BENCH_REPS, sizeof(double), cmp_double);
    qsort(total[dd], BENCH_REPS, sizeof(double), cmp_double);
  }
  double med0 = stall[0][BENCH_REPS / 2], med2 = stall[1][BENCH_REPS / 2];
  for (int dd = 0; dd < 2; dd++) {
    bench_row_t *r = &rows[(*nrows)++];
    snprintf(r->what, sizeof r->what, "%s stall/batch, 1 ms step, depth=%d", name, 2 * dd);
    r->value = stall[dd][BENCH_REPS / 2] / 200 * 1e6;
    snprintf(r->unit, sizeof r->unit, "us");
    if (dd == 0)
      snprintf(r->note, sizeof r->note, "200 batches in %.1f ms (steps alone 200 ms)",
               total[dd][BENCH_REPS / 2] * 1e3);
    else
      snprintf(r->note, sizeof r->note, "200 batches in %.1f ms; stall %.1f%% of depth 0's",
               total[dd][BENCH_REPS / 2] * 1e3, med0 > 0 ? 100.0 * med2 / med0 : 0.0);
  }
  return 0;
}

/* 2. loader throughput over one dataset at depths 0 and 2 (rate[0], rate[1]), then the stall. */
static int bench_dataset(ddp_dataset_t *set, const char *name, bench_row_t *rows, int *nrows,
                         double rate_d[2]) {
  ddp_sampler_opts_t o;
  ddp_sampler_opts_default(&o);
  o.dataset_size = 60000;
  o.seed = 7;
  ddp_sampler_t *s = NULL;
  APP_CHECK(ddp_sampler_create(&o, &s));
  /* The machine may be shared: every figure is the median of BENCH_REPS runs. */
  for (int depth = 0; depth <= 2; depth += 2) {
    double rate[BENCH_REPS], stall = 0.0;
    size_t n = 0;
    for (int k = 0; k < BENCH_REPS; k++) {
      double secs = 0.0;
      if (bench_loader(s, set, depth, 0.0, SIZE_MAX, &secs, &n, &stall)) return 1;
      rate[k] = (double)n / secs;
    }
    qsort(rate, BENCH_REPS, sizeof(double), cmp_double);
    bench_row_t *r = &rows[(*nrows)++];
    snprintf(r->what, sizeof r->what, "loader %s depth=%d", name, depth);
    r->value = rate[BENCH_REPS / 2];
    snprintf(r->unit, sizeof r->unit, "samples/s");
    snprintf(r->note, sizeof r->note, "epochs of %zu samples, median of %d (%.3g .. %.3g)", n,
             BENCH_REPS, rate[0], rate[BENCH_REPS - 1]);
    rate_d[depth / 2] = r->value;
  }
  if (bench_stall(s, set, name, rows, nrows)) return 1;
  ddp_sampler_destroy(&s);
  return 0;
}

static int write_bench_json(const char *json_path, double train_rate, double ratio,
                            const bench_row_t *rows, int nrows, int pass) {
  FILE *fp = fopen(json_path, "w");
  if (fp == NULL) {
    fprintf(stderr, "ddp_sampler: cannot write %s: %s\n", json_path, strerror(errno));
    return 1;
  }
  fprintf(fp, "{\n  \"tool\": \"ddp_sampler --bench\",\n  \"version\": \"%s\",\n", ddp_version());
  fprintf(fp, "  \"train_rate_samples_per_s\": %.1f,\n  \"loader_over_train\": %.2f,\n",
          train_rate, ratio);
  fprintf(fp, "  \"rows\": [\n");
  for (int i = 0; i < nrows; i++)
    fprintf(fp, "    {\"what\": \"%s\", \"value\": %.6g, \"unit\": \"%s\", \"note\": \"%s\"}%s\n",
            rows[i].what, rows[i].value, rows[i].unit, rows[i].note, i + 1 < nrows ? "," : "");
  fprintf(fp, "  ],\n  \"targets_met\": %s\n}\n", pass ? "true" : "false");
  fclose(fp);
  printf("# wrote %s\n", json_path);
  return 0;
}

static int run_bench(const char *data_dir, double train_rate, const char *json_path,
                     int check) {
  bench_row_t rows[32];
  int nrows = 0;
  double gen60k_ms = 0.0;
  printf("# ddp_sampler --bench: mpiddp %s, one process, batch 64\n", ddp_version());
  printf("# %-44s %14s %-10s %s\n", "measurement", "value", "unit", "note");
  if (bench_generation(rows, &nrows, &gen60k_ms)) return 1;

  /* 2. loader throughput, Fashion-MNIST (if installed) and synthetic 784-value samples */
  ddp_dataset_t *sets[2] = {NULL, NULL};
  const char *names[2] = {"fashion-mnist", "synthetic784"};
  char ferr[512];
  if (fmnist_open(data_dir, 1, &sets[0], ferr, sizeof ferr) != DDP_OK)
    printf("# Fashion-MNIST not loaded (%s): its rows are skipped\n", ferr);
  ddp_synthetic_opts_t so = {.count = 60000, .ndim = 2, .dims = {28, 28}, .classes = 10,
                                .seed = 1};
  APP_CHECK(ddp_dataset_synthetic(&so, &sets[1]));
  double rate_d[2][2] = {{0.0, 0.0}, {0.0, 0.0}}; /* [dataset][depth 0, 2] */
  for (int d = 0; d < 2; d++) {
    if (sets[d] == NULL) continue;
    if (bench_dataset(sets[d], names[d], rows, &nrows, rate_d[d])) return 1;
    ddp_dataset_destroy(&sets[d]);
  }
  for (int i = 0; i < nrows; i++)
    printf("  %-44s %14.4g %-10s %s\n", rows[i].what, rows[i].value, rows[i].unit, rows[i].note);
  /* the loader target is judged on Fashion-MNIST, or on the synthetic set without it */
  int src = rate_d[0][1] > 0 ? 0 : 1;
  double ratio = rate_d[src][1] / train_rate;
  printf("# loader (%s, depth 2) / training consumption (%.0f samples/s) = %.1fx "
         "(target >= 10x); depth 0 gives %.1fx\n",
         names[src], train_rate, ratio, rate_d[src][0] / train_rate);
  int pass = gen60k_ms < 1.0 && ratio >= 10.0;
  printf("# targets: index generation for 60,000 samples %.3f ms (< 1 ms), loader %.1fx (>= 10x)"
         " -> %s\n", gen60k_ms, ratio, pass ? "PASS" : "FAIL");
  if (json_path && write_bench_json(json_path, train_rate, ratio, rows, nrows, pass)) return 1;
  return check && !pass ? 1 : 0;
}

int main(int argc, char **argv) {
  ddp_sampler_opts_t o;
  ddp_sampler_opts_default(&o);
  o.shuffle = 0; /* the flag turns it on */
  uint64_t size = 0, replicas = 1, rank = 0, epoch = 0, batch_size = 0;
  int all_ranks = 0, drop_last_batch = 0, bench = 0, check = 0;
  const char *data_dir = NULL, *json_path = NULL;
  double train_rate = 64.0 / 0.033;
  int size_at = 0;
  app_opt_t table[] = {
      APP_U64("--size", &size), APP_U64("--replicas", &replicas), APP_U64("--rank", &rank),
      APP_U64("--seed", &o.seed), APP_U64("--epoch", &epoch), APP_U64("--batch-size", &batch_size),
      APP_FLAG("--shuffle", &o.shuffle, 1), APP_FLAG("--drop-last", &o.drop_last, 1),
      APP_FLAG("--drop-last-batch", &drop_last_batch, 1), APP_FLAG("--all-ranks", &all_ranks, 1),
      APP_FLAG("--bench", &bench, 1), APP_FLAG("--check", &check, 1), APP_STR("--data", &data_dir),
      APP_STR("--json", &json_path), APP_DOUBLE("--train-rate", &train_rate, 1e-9, 1e30), APP_OPTS_END};
  table[0].seen = &size_at;
  int pr = app_opts_parse("ddp_sampler", table, argc, argv, stderr);
  if (pr == APP_OPTS_HELP) usage(stdout);
  if (pr != APP_OPTS_OK) return pr == APP_OPTS_HELP ? 0 : 2;
  int have_size = size_at > 0;
  if (bench) return run_bench(data_dir, train_rate, json_path, check);
  if (!have_size) {
    fprintf(stderr, "ddp_sampler: --size is required\n");
    usage(stderr);
    return 2;
  }
  if (replicas < 1 || replicas > 1000000) {
    fprintf(stderr, "ddp_sampler: --replicas %" PRIu64 " must be in 1 .. 1000000\n", replicas);
    return 2;
  }
  if (rank >= replicas) {
    fprintf(stderr, "ddp_sampler: --rank %" PRIu64 " must be below --replicas %" PRIu64 "\n", rank,
            replicas);
    return 2;
  }
  if (batch_size == 0 && drop_last_batch) {
    fprintf(stderr, "ddp_sampler: --drop-last-batch needs --batch-size\n");
    return 2;
  }
  o.dataset_size = size;
  o.num_replicas = (int)replicas;
  if (!all_ranks) {
    o.rank = (int)rank;
    return print_rank(&o, epoch, batch_size, drop_last_batch);
  }
  for (uint64_t r = 0; r < replicas; r++) {
    o.rank = (int)r;
    if (print_rank(&o, epoch, batch_size, drop_last_batch)) return 1;
  }
  return 0;
}
