/* Run at several world sizes: each rank builds its own sampler, the lists are gathered, and
 * together they must be PyTorch's global list (permutation padded by wrap-around or
 * truncated): every sample covered, duplicates exactly the padding ones. Also the step
 * agreement with uneven local step counts, batch slicing, and bad arguments. */
#include <stdlib.h>
#include <string.h>

#include "ddp_test.h"

static void check_union(MPI_Comm mpi, int rank, int size, uint64_t n, int shuffle, int drop_last,
                        uint64_t seed, uint64_t epoch) {
  ddp_sampler_opts_t o;
  ddp_sampler_opts_default(&o);
  o.dataset_size = n;
  o.num_replicas = size;
  o.rank = rank;
  o.shuffle = shuffle;
  o.drop_last = drop_last;
  o.seed = seed;
  ddp_sampler_t *s = NULL, *whole = NULL;
  CHECK_OK(ddp_sampler_create(&o, &s));
  /* the same arguments on one replica give the un-padded order (the permutation) */
  o.num_replicas = 1;
  o.rank = 0;
  o.drop_last = 0;
  CHECK_OK(ddp_sampler_create(&o, &whole));
  if (!s || !whole) return;
  CHECK_OK(ddp_sampler_set_epoch(s, epoch));
  CHECK_OK(ddp_sampler_set_epoch(whole, epoch));
  size_t len = 0, total = 0, plen = 0, got = 0;
  CHECK_OK(ddp_sampler_length(s, &len));
  CHECK_OK(ddp_sampler_total_size(s, &total));
  size_t want_len = drop_last ? n / (uint64_t)size : (n + (uint64_t)size - 1) / (uint64_t)size;
  CHECK(len == want_len && total == len * (size_t)size, "n %llu: length %zu total %zu",
        (unsigned long long)n, len, total);
  int64_t *mine = malloc((len + 1) * sizeof(int64_t));
  int64_t *perm = malloc((n + 1) * sizeof(int64_t));
  int64_t *all = malloc((total + 1) * sizeof(int64_t));
  CHECK_OK(ddp_sampler_indices(s, mine, len, &got));
  CHECK_OK(ddp_sampler_indices(whole, perm, n, &plen));
  MPI_Allgather(mine, (int)len, MPI_INT64_T, all, (int)len, MPI_INT64_T, mpi);
  /* all[r * len + k] is rank r's k-th index = global[r + k * size] */
  int wrong = 0;
  size_t *count = calloc(n + 1, sizeof(size_t));
  for (int r = 0; r < size; r++)
    for (size_t k = 0; k < len; k++) {
      int64_t v = all[(size_t)r * len + k];
      size_t gi = (size_t)r + k * (size_t)size;
      if (v < 0 || (uint64_t)v >= n || v != perm[gi % n]) wrong++;
      else count[v]++;
    }
  CHECK(wrong == 0, "n %llu R %d shuffle %d drop_last %d: %d indices differ from the padded order",
        (unsigned long long)n, size, shuffle, drop_last, wrong);
  /* coverage and duplicates: without drop_last every sample appears, the first total-n of the
   * permutation (cyclically) once more; with drop_last the first total appear once */
  int cov = 0;
  for (uint64_t i = 0; i < n; i++) {
    size_t expect = total / n + ((size_t)i < total % n ? 1u : 0u);
    if (count[perm[i]] != expect) cov++;
  }
  CHECK(cov == 0, "n %llu R %d drop_last %d: %d samples appear a wrong number of times",
        (unsigned long long)n, size, drop_last, cov);
  free(count);
  free(mine);
  free(perm);
  free(all);
  ddp_sampler_destroy(&s);
  ddp_sampler_destroy(&whole);
}

static void check_batches(int rank, int size) {
  ddp_sampler_opts_t o;
  ddp_sampler_opts_default(&o);
  o.dataset_size = 1003;
  o.num_replicas = size;
  o.rank = rank;
  o.seed = 11;
  ddp_sampler_t *s = NULL;
  CHECK_OK(ddp_sampler_create(&o, &s));
  if (!s) return;
  size_t len = 0, nb = 0, nbd = 0, got = 0;
  CHECK_OK(ddp_sampler_length(s, &len));
  int64_t *mine = malloc(len * sizeof(int64_t)), batch[64];
  CHECK_OK(ddp_sampler_indices(s, mine, len, &got));
  CHECK_OK(ddp_sampler_num_batches(s, 64, 0, &nb));
  CHECK_OK(ddp_sampler_num_batches(s, 64, 1, &nbd));
  CHECK(nb == (len + 63) / 64 && nbd == len / 64, "len %zu: %zu / %zu batches", len, nb, nbd);
  size_t pos = 0;
  int wrong = 0;
  for (size_t b = 0; b < nb; b++) {
    size_t c = 0;
    CHECK_OK(ddp_sampler_batch(s, 64, b, batch, 64, &c));
    CHECK(c == (b + 1 < nb ? 64 : len - 64 * (nb - 1)), "batch %zu has %zu", b, c);
    for (size_t j = 0; j < c; j++) wrong += batch[j] != mine[pos + j];
    pos += c;
  }
  CHECK(wrong == 0 && pos == len, "batches differ from the list (%d wrong, %zu of %zu)", wrong, pos,
        len);
  /* bad arguments, nothing written */
  size_t c = 777;
  batch[0] = -5;
  CHECK_ST(ddp_sampler_batch(s, 64, nb, batch, 64, &c), DDP_EINVAL);
  CHECK_MSG("out of range");
  CHECK_ST(ddp_sampler_batch(s, 64, 0, batch, 10, &c), DDP_EINVAL);
  CHECK_MSG("capacity 10");
  CHECK_ST(ddp_sampler_batch(s, 0, 0, batch, 64, &c), DDP_EINVAL);
  CHECK_MSG("batch_size 0");
  CHECK(c == 777 && batch[0] == -5, "written on error");
  CHECK_ST(ddp_sampler_num_batches(s, 64, 2, &nb), DDP_EINVAL);
  CHECK_ST(ddp_sampler_indices(s, mine, len - 1, &c), DDP_EINVAL);
  CHECK_MSG("capacity");
  CHECK(c == 777, "written on error");
  CHECK_ST(ddp_sampler_indices(s, NULL, len, &c), DDP_EINVAL);
  CHECK_ST(ddp_sampler_length(NULL, &c), DDP_EINVAL);
  CHECK_ST(ddp_sampler_set_epoch(NULL, 1), DDP_EINVAL);
  free(mine);
  ddp_sampler_destroy(&s);
}

static void check_options(void) {
  ddp_sampler_opts_t o;
  CHECK(ddp_sampler_opts_default(&o) == DDP_OK && o.shuffle == 1 && o.num_replicas == 1 &&
            o.seed == 0 && o.drop_last == 0 && o.rank == 0,
        "defaults are not PyTorch's");
  ddp_sampler_t *s = (ddp_sampler_t *)&o;
  o.dataset_size = 10;
  o.num_replicas = 0;
  CHECK_ST(ddp_sampler_create(&o, &s), DDP_EINVAL);
  CHECK_MSG("num_replicas 0");
  o.num_replicas = 4;
  o.rank = 4;
  CHECK_ST(ddp_sampler_create(&o, &s), DDP_EINVAL);
  CHECK_MSG("rank 4");
  o.rank = -1;
  CHECK_ST(ddp_sampler_create(&o, &s), DDP_EINVAL);
  CHECK_MSG("rank -1");
  o.rank = 0;
  o.shuffle = 2;
  CHECK_ST(ddp_sampler_create(&o, &s), DDP_EINVAL);
  CHECK_MSG("shuffle 2");
  o.shuffle = 1;
  o.dataset_size = (UINT64_C(1) << 62) + 1;
  CHECK_ST(ddp_sampler_create(&o, &s), DDP_EINVAL);
  CHECK_MSG("dataset_size 4611686018427387905");
  CHECK(s == (ddp_sampler_t *)&o, "output written on error");
  CHECK_ST(ddp_sampler_create(NULL, &s), DDP_EINVAL);
  o.dataset_size = 0; /* empty dataset: empty lists, like PyTorch */
  s = NULL;
  CHECK_OK(ddp_sampler_create(&o, &s));
  size_t len = 9, c = 9;
  CHECK_OK(ddp_sampler_length(s, &len));
  CHECK_OK(ddp_sampler_indices(s, NULL, 0, &c));
  CHECK(len == 0 && c == 0, "empty dataset: length %zu", len);
  ddp_sampler_destroy(&s);
  CHECK_OK(ddp_sampler_destroy(NULL));
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
  MPI_Comm mpi;
  CHECK_OK(ddp_comm_mpi(comm, DDP_COMM_WORLD, &mpi));

  const uint64_t sizes[] = {1, 2, 7, 10, 101, 1000, 60000};
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
    for (int shuffle = 0; shuffle <= 1; shuffle++)
      for (int dl = 0; dl <= 1; dl++)
        check_union(mpi, rank, size, sizes[i], shuffle, dl, UINT64_C(0x100000003), 3);

  /* uneven local step counts: rank r has 10 + 3r steps */
  uint64_t mn = 0, mx = 0;
  CHECK_OK(ddp_sampler_agree_steps(comm, 10 + 3 * (uint64_t)rank, &mn, &mx));
  CHECK(mn == 10 && mx == 10 + 3 * (uint64_t)(size - 1), "agree: min %llu max %llu",
        (unsigned long long)mn, (unsigned long long)mx);
  CHECK_OK(ddp_sampler_agree_steps(comm, rank == 0 ? UINT64_MAX : 0, &mn, &mx));
  CHECK(mn == (size > 1 ? 0 : UINT64_MAX) && mx == UINT64_MAX, "agree extremes: %llu %llu",
        (unsigned long long)mn, (unsigned long long)mx);
  CHECK_ST(ddp_sampler_agree_steps(NULL, 1, &mn, &mx), DDP_EINVAL);
  CHECK_ST(ddp_sampler_agree_steps(comm, 1, NULL, &mx), DDP_EINVAL);

  check_batches(rank, size);
  check_options();
  int rc = ddp_test_finish("sampler_union");
  ddp_finalize(&comm);
  return rc;
}
