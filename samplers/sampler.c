/* The distributed sampler: torch.utils.data.DistributedSampler's index lists (PyTorch 1.13),
 * batch slicing, and the cross-rank agreement on the number of steps. */
#include <stdlib.h>
#include <string.h>

#include "sampler_internal.h"

#define SAMPLER_MAX_SIZE (UINT64_C(1) << 62)

struct ddp_sampler {
  ddp_sampler_opts_t opt;
  uint64_t epoch;
  size_t num_samples; /* this rank's length */
  size_t total_size;  /* num_samples * num_replicas */
  int64_t *indices;   /* this rank's list for `epoch` */
  /* The whole permutation is needed to pick this rank's share; kept between epochs so
   * set_epoch does not allocate. Only one of the two is used (int32 halves the memory
   * traffic for datasets below 2^31 samples). */
  int32_t *perm32;
  int64_t *perm64;
};

ddp_status_t ddp_sampler_opts_default(ddp_sampler_opts_t *opt) {
  DDP_CHECK_ARG(opt != NULL, "opt is NULL");
  memset(opt, 0, sizeof(*opt));
  opt->num_replicas = 1;
  opt->rank = 0;
  opt->shuffle = 1;
  opt->seed = 0;
  opt->drop_last = 0;
  return DDP_OK;
}

/* Fills s->indices for s->epoch. The global list is order[i % n] for i < total_size (this
 * covers both truncation and PyTorch's wrap-around padding), rank r takes i = r + k*R. */
static void sampler_free(ddp_sampler_t *s) {
  if (s == NULL) return;
  free(s->indices);
  free(s->perm32);
  free(s->perm64);
  free(s);
}

static void sampler_fill(ddp_sampler_t *s) {
  const uint64_t n = s->opt.dataset_size;
  const uint64_t R = (uint64_t)s->opt.num_replicas;
  const uint64_t r = (uint64_t)s->opt.rank;
  if (s->num_samples == 0) return;
  if (!s->opt.shuffle) {
    for (size_t k = 0; k < s->num_samples; k++) s->indices[k] = (int64_t)((r + k * R) % n);
    return;
  }
  ddp__mt19937_t mt;
  ddp__mt19937_seed(&mt, s->opt.seed + s->epoch);
  ddp__randperm(&mt, n, s->perm32, s->perm64);
  for (size_t k = 0; k < s->num_samples; k++) {
    uint64_t i = (r + k * R) % n;
    s->indices[k] = s->perm32 ? (int64_t)s->perm32[i] : s->perm64[i];
  }
}

ddp_status_t ddp_sampler_create(const ddp_sampler_opts_t *opt, ddp_sampler_t **out) {
  DDP_CHECK_ARG(opt != NULL, "opt is NULL");
  DDP_CHECK_ARG(out != NULL, "out is NULL");
  DDP_CHECK_ARG(opt->num_replicas >= 1, "num_replicas %d must be >= 1", opt->num_replicas);
  DDP_CHECK_ARG(opt->rank >= 0 && opt->rank < opt->num_replicas,
                "rank %d is outside [0, num_replicas-1 = %d]", opt->rank, opt->num_replicas - 1);
  DDP_CHECK_ARG(opt->dataset_size <= SAMPLER_MAX_SIZE,
                "dataset_size %llu exceeds the limit 2^62", (unsigned long long)opt->dataset_size);
  DDP_CHECK_ARG(opt->shuffle == 0 || opt->shuffle == 1, "shuffle %d must be 0 or 1", opt->shuffle);
  DDP_CHECK_ARG(opt->drop_last == 0 || opt->drop_last == 1, "drop_last %d must be 0 or 1",
                opt->drop_last);

  const uint64_t n = opt->dataset_size, R = (uint64_t)opt->num_replicas;
  /* PyTorch: with drop_last and n % R != 0, ceil((n - R) / R) == floor(n / R) (0 if n < R);
   * otherwise ceil(n / R). */
  uint64_t num_samples = opt->drop_last ? n / R : (n + R - 1) / R;
  if (num_samples > SIZE_MAX / sizeof(int64_t) ||
      (opt->shuffle && n > SIZE_MAX / sizeof(int64_t)))
    return ddp__error(DDP_ENOMEM, "dataset_size %llu does not fit in this address space",
                      (unsigned long long)n);

  ddp_sampler_t *s = calloc(1, sizeof(*s));
  if (s == NULL) return ddp__error(DDP_ENOMEM, "sampler: out of memory");
  s->opt = *opt;
  s->num_samples = (size_t)num_samples;
  s->total_size = (size_t)(num_samples * R);
  if (s->num_samples > 0) {
    s->indices = malloc(s->num_samples * sizeof(int64_t));
    if (opt->shuffle) {
      if (n <= INT32_MAX) s->perm32 = malloc((size_t)n * sizeof(int32_t));
      else s->perm64 = malloc((size_t)n * sizeof(int64_t));
    }
    if (s->indices == NULL || (opt->shuffle && s->perm32 == NULL && s->perm64 == NULL)) {
      sampler_free(s);
      return ddp__error(DDP_ENOMEM, "sampler: no memory for the index lists of %llu samples",
                        (unsigned long long)n);
    }
  }
  sampler_fill(s);
  *out = s;
  return DDP_OK;
}

ddp_status_t ddp_sampler_destroy(ddp_sampler_t **s) {
  if (s != NULL) {
    sampler_free(*s);
    *s = NULL;
  }
  return DDP_OK;
}

ddp_status_t ddp_sampler_set_epoch(ddp_sampler_t *s, uint64_t epoch) {
  DDP_CHECK_ARG(s != NULL, "sampler is NULL");
  /* PyTorch computes seed + epoch with Python integers and manual_seed refuses values of
   * 2^64 and more ("Overflow when unpacking long"), so we refuse them too. */
  DDP_CHECK_ARG(epoch <= UINT64_MAX - s->opt.seed,
                "epoch %llu: seed %llu + epoch exceeds 2^64-1 (torch's manual_seed refuses it)",
                (unsigned long long)epoch, (unsigned long long)s->opt.seed);
  s->epoch = epoch;
  sampler_fill(s);
  return DDP_OK;
}

uint64_t ddp__sampler_dataset_size(const ddp_sampler_t *s) { return s->opt.dataset_size; }

ddp_status_t ddp_sampler_epoch(const ddp_sampler_t *s, uint64_t *epoch) {
  DDP_CHECK_ARG(s != NULL, "sampler is NULL");
  DDP_CHECK_ARG(epoch != NULL, "epoch is NULL");
  *epoch = s->epoch;
  return DDP_OK;
}

ddp_status_t ddp_sampler_length(const ddp_sampler_t *s, size_t *count) {
  DDP_CHECK_ARG(s != NULL, "sampler is NULL");
  DDP_CHECK_ARG(count != NULL, "count is NULL");
  *count = s->num_samples;
  return DDP_OK;
}

ddp_status_t ddp_sampler_total_size(const ddp_sampler_t *s, size_t *count) {
  DDP_CHECK_ARG(s != NULL, "sampler is NULL");
  DDP_CHECK_ARG(count != NULL, "count is NULL");
  *count = s->total_size;
  return DDP_OK;
}

ddp_status_t ddp_sampler_indices(const ddp_sampler_t *s, int64_t *out, size_t capacity,
                                 size_t *count) {
  DDP_CHECK_ARG(s != NULL, "sampler is NULL");
  DDP_CHECK_ARG(count != NULL, "count is NULL");
  DDP_CHECK_ARG(capacity >= s->num_samples, "capacity %zu is less than the sampler length %zu",
                capacity, s->num_samples);
  DDP_CHECK_ARG(out != NULL || s->num_samples == 0, "out is NULL (length %zu)", s->num_samples);
  if (s->num_samples > 0) memcpy(out, s->indices, s->num_samples * sizeof(int64_t));
  *count = s->num_samples;
  return DDP_OK;
}

ddp_status_t ddp_sampler_num_batches(const ddp_sampler_t *s, size_t batch_size,
                                     int drop_last_batch, size_t *num_batches) {
  DDP_CHECK_ARG(s != NULL, "sampler is NULL");
  DDP_CHECK_ARG(batch_size >= 1, "batch_size %zu must be >= 1", batch_size);
  DDP_CHECK_ARG(drop_last_batch == 0 || drop_last_batch == 1, "drop_last_batch %d must be 0 or 1",
                drop_last_batch);
  DDP_CHECK_ARG(num_batches != NULL, "num_batches is NULL");
  size_t full = s->num_samples / batch_size;
  *num_batches = full + (!drop_last_batch && s->num_samples % batch_size != 0);
  return DDP_OK;
}

ddp_status_t ddp_sampler_batch(const ddp_sampler_t *s, size_t batch_size, size_t batch,
                               int64_t *out, size_t capacity, size_t *count) {
  DDP_CHECK_ARG(s != NULL, "sampler is NULL");
  DDP_CHECK_ARG(batch_size >= 1, "batch_size %zu must be >= 1", batch_size);
  DDP_CHECK_ARG(count != NULL, "count is NULL");
  size_t nb = s->num_samples / batch_size + (s->num_samples % batch_size != 0);
  DDP_CHECK_ARG(batch < nb, "batch %zu is out of range: this rank has %zu batches of %zu", batch,
                nb, batch_size);
  size_t begin = batch * batch_size;
  size_t n = s->num_samples - begin < batch_size ? s->num_samples - begin : batch_size;
  DDP_CHECK_ARG(out != NULL, "out is NULL");
  DDP_CHECK_ARG(capacity >= n, "capacity %zu is less than the batch size %zu", capacity, n);
  memcpy(out, s->indices + begin, n * sizeof(int64_t));
  *count = n;
  return DDP_OK;
}

ddp_status_t ddp_sampler_agree_steps(const ddp_comm_t *comm, uint64_t local_steps,
                                     uint64_t *min_steps, uint64_t *max_steps) {
  DDP_CHECK_ARG(comm != NULL, "comm is NULL");
  DDP_CHECK_ARG(min_steps != NULL, "min_steps is NULL");
  DDP_CHECK_ARG(max_steps != NULL, "max_steps is NULL");
  MPI_Comm world;
  DDP_TRY(ddp_comm_mpi(comm, DDP_COMM_WORLD, &world));
  /* min(x) == ~max(~x): both in one MPI_MAX allreduce, on signed values (x ^ 2^63 orders as
   * x does unsigned): MPICH 4.0.2 compares unsigned types as signed in MPI_MAX. */
  const uint64_t flip = (uint64_t)1 << 63;
  int64_t send[2] = {(int64_t)(~local_steps ^ flip), (int64_t)(local_steps ^ flip)}, recv[2];
  DDP_MPI(MPI_Allreduce(send, recv, 2, MPI_INT64_T, MPI_MAX, world));
  *min_steps = ~((uint64_t)recv[0] ^ flip);
  *max_steps = (uint64_t)recv[1] ^ flip;
  return DDP_OK;
}
