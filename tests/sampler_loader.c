/* The loader: with prefetching (depth 1, 2, 5) it returns exactly the batches it returns
 * without (depth 0), which are the sampler's batches read from the dataset; end of epoch,
 * restart and destroy mid-epoch, bad arguments. Runs on every rank of the world. */
#include <stdlib.h>
#include <string.h>

#include "ddp_test.h"

typedef struct {
  size_t count;
  int64_t idx[64];
  int32_t y[64];
  float *x;
} saved_t;

/* Reads a whole epoch with the given depth; returns the number of batches. */
static size_t run_epoch(ddp_sampler_t *s, ddp_dataset_t *ds, size_t batch, int drop, int depth,
                        uint64_t epoch, saved_t *out, size_t max_batches, size_t elems) {
  ddp_loader_opts_t o;
  ddp_loader_opts_default(&o);
  o.batch_size = batch;
  o.drop_last_batch = drop;
  o.prefetch_depth = depth;
  ddp_loader_t *l = NULL;
  CHECK_OK(ddp_loader_create(s, ds, &o, &l));
  if (!l) return 0;
  CHECK_OK(ddp_loader_start_epoch(l, epoch));
  size_t nb = 0, n = 0;
  CHECK_OK(ddp_loader_num_batches(l, &nb));
  ddp_batch_t b;
  for (;;) {
    CHECK_OK(ddp_loader_next(l, &b));
    if (b.count == 0) break;
    CHECK(b.batch == n && b.epoch == epoch && b.sample_elems == elems, "batch header %zu", n);
    if (n < max_batches) {
      out[n].count = b.count;
      memcpy(out[n].idx, b.indices, b.count * sizeof(int64_t));
      memcpy(out[n].y, b.y, b.count * sizeof(int32_t));
      out[n].x = malloc(b.count * elems * sizeof(float));
      memcpy(out[n].x, b.x, b.count * elems * sizeof(float));
    }
    n++;
  }
  CHECK(n == nb, "depth %d: %zu batches, num_batches says %zu", depth, n, nb);
  CHECK_OK(ddp_loader_next(l, &b)); /* stays at the end */
  CHECK(b.count == 0, "batch after the end of the epoch");
  ddp_loader_destroy(&l);
  return n;
}

static void free_saved(saved_t *v, size_t n) {
  for (size_t i = 0; i < n; i++) free(v[i].x);
}

static void compare_depths(ddp_sampler_t *s, ddp_dataset_t *ds, size_t elems, const char *what,
                           size_t max_batches) {
  saved_t *ref = calloc(max_batches, sizeof(saved_t)), *got = calloc(max_batches, sizeof(saved_t));
  float *x = malloc(elems * sizeof(float));
  for (uint64_t epoch = 0; epoch < 2; epoch++)
    for (int drop = 0; drop <= 1; drop++) {
      size_t nref = run_epoch(s, ds, 64, drop, 0, epoch, ref, max_batches, elems);
      /* reference against the sampler and the dataset themselves */
      size_t keep = nref < max_batches ? nref : max_batches;
      int wrong = 0;
      for (size_t b = 0; b < keep; b++) {
        int64_t idx[64];
        size_t c = 0;
        CHECK_OK(ddp_sampler_batch(s, 64, b, idx, 64, &c));
        CHECK(c == ref[b].count, "%s batch %zu: %zu samples, sampler says %zu", what, b,
              ref[b].count, c);
        for (size_t j = 0; j < c && j < ref[b].count; j++) {
          int32_t y;
          wrong += idx[j] != ref[b].idx[j];
          CHECK_OK(ddp_dataset_get(ds, (uint64_t)idx[j], x, elems, &y));
          wrong += y != ref[b].y[j];
          wrong += memcmp(x, ref[b].x + j * elems, elems * sizeof(float)) != 0;
        }
      }
      CHECK(wrong == 0, "%s epoch %llu: %d samples differ from sampler + dataset", what,
            (unsigned long long)epoch, wrong);
      const int depths[] = {1, 2, 5};
      for (int d = 0; d < 3; d++) {
        size_t n = run_epoch(s, ds, 64, drop, depths[d], epoch, got, max_batches, elems);
        CHECK(n == nref, "%s depth %d: %zu batches vs %zu", what, depths[d], n, nref);
        int diff = 0;
        for (size_t b = 0; b < keep && b < n; b++)
          diff += got[b].count != ref[b].count ||
                  memcmp(got[b].idx, ref[b].idx, ref[b].count * sizeof(int64_t)) != 0 ||
                  memcmp(got[b].y, ref[b].y, ref[b].count * sizeof(int32_t)) != 0 ||
                  memcmp(got[b].x, ref[b].x, ref[b].count * elems * sizeof(float)) != 0;
        CHECK(diff == 0, "%s depth %d epoch %llu drop %d: %d batches differ from depth 0", what,
              depths[d], (unsigned long long)epoch, drop, diff);
        free_saved(got, keep < n ? keep : n);
      }
      free_saved(ref, keep);
    }
  free(x);
  free(ref);
  free(got);
}

static void test_lifecycle(ddp_sampler_t *s, ddp_dataset_t *ds, size_t elems) {
  ddp_loader_opts_t o;
  ddp_loader_opts_default(&o);
  CHECK(o.batch_size == 64 && o.prefetch_depth == 2 && o.drop_last_batch == 0, "defaults");
  o.batch_size = 16;
  o.prefetch_depth = 4;
  ddp_loader_t *l = NULL;
  CHECK_OK(ddp_loader_create(s, ds, &o, &l));
  if (!l) return;
  ddp_batch_t b;
  CHECK_ST(ddp_loader_next(l, &b), DDP_ESTATE);
  CHECK_MSG("ddp_loader_start_epoch");
  /* restart mid-epoch: the new epoch starts from its first batch */
  CHECK_OK(ddp_loader_start_epoch(l, 0));
  for (int i = 0; i < 3; i++) CHECK_OK(ddp_loader_next(l, &b));
  CHECK_OK(ddp_loader_start_epoch(l, 1));
  CHECK_OK(ddp_loader_next(l, &b));
  int64_t idx[16];
  size_t c = 0;
  CHECK_OK(ddp_sampler_batch(s, 16, 0, idx, 16, &c));
  CHECK(b.batch == 0 && b.epoch == 1 && b.count == c &&
            memcmp(idx, b.indices, c * sizeof(int64_t)) == 0,
        "restart: got batch %zu of epoch %llu", b.batch, (unsigned long long)b.epoch);
  /* destroy mid-epoch while the thread waits for a free slot */
  CHECK_OK(ddp_loader_next(l, &b));
  ddp_loader_destroy(&l);
  /* destroy right after the start, while the thread is filling */
  l = NULL;
  CHECK_OK(ddp_loader_create(s, ds, &o, &l));
  CHECK_OK(ddp_loader_start_epoch(l, 2));
  ddp_loader_destroy(&l);
  CHECK_OK(ddp_loader_destroy(NULL));

  /* bad arguments */
  l = (ddp_loader_t *)&o;
  o.batch_size = 0;
  CHECK_ST(ddp_loader_create(s, ds, &o, &l), DDP_EINVAL);
  CHECK_MSG("batch_size 0");
  o.batch_size = 8;
  o.prefetch_depth = -1;
  CHECK_ST(ddp_loader_create(s, ds, &o, &l), DDP_EINVAL);
  CHECK_MSG("prefetch_depth -1");
  o.prefetch_depth = 65;
  CHECK_ST(ddp_loader_create(s, ds, &o, &l), DDP_EINVAL);
  CHECK_MSG("prefetch_depth 65");
  o.prefetch_depth = 2;
  o.drop_last_batch = 3;
  CHECK_ST(ddp_loader_create(s, ds, &o, &l), DDP_EINVAL);
  CHECK_MSG("drop_last_batch 3");
  o.drop_last_batch = 0;
  CHECK_ST(ddp_loader_create(NULL, ds, &o, &l), DDP_EINVAL);
  CHECK_ST(ddp_loader_create(s, NULL, &o, &l), DDP_EINVAL);
  ddp_sampler_opts_t so;
  ddp_sampler_opts_default(&so);
  so.dataset_size = 999;
  ddp_sampler_t *other = NULL;
  CHECK_OK(ddp_sampler_create(&so, &other));
  CHECK_ST(ddp_loader_create(other, ds, &o, &l), DDP_EINVAL);
  CHECK_MSG("dataset_size 999");
  CHECK(l == (ddp_loader_t *)&o, "output written on error");
  ddp_sampler_destroy(&other);
  CHECK_ST(ddp_loader_next(NULL, &b), DDP_EINVAL);
  CHECK_ST(ddp_loader_start_epoch(NULL, 0), DDP_EINVAL);
  (void)elems;
}

int main(int argc, char **argv) {
  ddp_comm_t *comm = NULL;
  if (ddp_init(&argc, &argv, MPI_COMM_NULL, &comm) != DDP_OK) {
    fprintf(stderr, "ddp_init: %s\n", ddp_last_error());
    return 1;
  }
  int rank = 0, size = 1;
  CHECK_OK(ddp_comm_rank(comm, &rank));
  CHECK_OK(ddp_comm_size(comm, &size));

  ddp_synthetic_opts_t so = {.count = 1000, .ndim = 1, .dims = {7}, .classes = 5, .seed = 9};
  ddp_dataset_t *syn = NULL;
  CHECK_OK(ddp_dataset_synthetic(&so, &syn));
  ddp_sampler_opts_t o;
  ddp_sampler_opts_default(&o);
  o.dataset_size = 1000;
  o.num_replicas = size;
  o.rank = rank;
  o.seed = 5;
  ddp_sampler_t *s = NULL;
  CHECK_OK(ddp_sampler_create(&o, &s));
  if (syn && s) {
    compare_depths(s, syn, 7, "synthetic", 1000);
    test_lifecycle(s, syn, 7);
  }
  ddp_sampler_destroy(&s);
  ddp_dataset_destroy(&syn);

  ddp_dataset_t *fm = NULL;
  if (ddp_dataset_open_fmnist(NULL, 1, &fm) == DDP_OK) {
    o.dataset_size = 60000;
    s = NULL;
    CHECK_OK(ddp_sampler_create(&o, &s));
    if (s) compare_depths(s, fm, 784, "fashion-mnist", 12); /* all batches, the first 12 kept */
    ddp_sampler_destroy(&s);
    ddp_dataset_destroy(&fm);
  } else if (rank == 0) {
    printf("sampler_loader: Fashion-MNIST not installed (%s): its checks skipped\n",
           ddp_last_error());
  }
  int rc = ddp_test_finish("sampler_loader");
  ddp_finalize(&comm);
  return rc;
}
