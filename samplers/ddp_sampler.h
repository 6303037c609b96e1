/* Distributed sampler (index order identical to torch.utils.data.DistributedSampler of
 * PyTorch 1.13), dataset readers (IDX plain/gzip, Fashion-MNIST, synthetic) and a prefetching
 * loader that turns a rank's indices into contiguous f32/int32 batches. */
#ifndef DDP_SAMPLER_H
#define DDP_SAMPLER_H

#include "ddp_comm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================================
 * Sampler
 * ======================================================================================
 * Contract of torch.utils.data.DistributedSampler (PyTorch 1.13):
 *   - shuffle: the global order is torch.randperm(size, generator=g) with g a CPU generator
 *     seeded by g.manual_seed(seed + epoch) (mt19937 from the low 32 bits of the 64-bit sum;
 *     like PyTorch, a sum above 2^64-1 is refused); randperm is torch 1.13's forward
 *     Fisher-Yates with one 32-bit draw per step; without shuffle it is 0, 1, ..., size-1;
 *   - per rank:  num_samples = drop_last ? floor(size / R) : ceil(size / R),
 *     total = num_samples * R; the global list is truncated to `total` (drop_last) or padded
 *     by wrapping around to `total` (list[i] = order[i % size], repeating as often as needed);
 *   - rank r takes list[r], list[r + R], list[r + 2R], ...
 * Indices are int64_t (PyTorch's dtype). A sampler is not thread-safe: use it from one thread
 * at a time (a loader copies the indices it needs, so the sampler may be used while a
 * loader's prefetch thread runs). */
typedef struct ddp_sampler ddp_sampler_t;

typedef struct ddp_sampler_opts {
  uint64_t dataset_size; /* samples in the dataset (0 allowed: every list is empty) */
  int num_replicas;      /* R >= 1, usually ddp_comm_size() */
  int rank;              /* 0 <= rank < R, usually ddp_comm_rank() */
  int shuffle;           /* 0/1; PyTorch's default is 1 */
  uint64_t seed;         /* PyTorch's default is 0 */
  int drop_last;         /* 0/1: truncate (1) or pad by wrapping around (0, default) */
} ddp_sampler_opts_t;

/* Fills PyTorch's defaults: dataset_size 0, num_replicas 1, rank 0, shuffle 1, seed 0,
 * drop_last 0. DDP_EINVAL when opt is NULL. */
DDP_API ddp_status_t ddp_sampler_opts_default(ddp_sampler_opts_t *opt);

/* Creates a sampler at epoch 0 (the rank's index list is computed now, and again at each
 * ddp_sampler_set_epoch). DDP_EINVAL names the bad field (num_replicas < 1, rank out of
 * range, dataset larger than 2^62); DDP_ENOMEM if the permutation does not fit in memory.
 * *out is set only on success. */
DDP_API ddp_status_t ddp_sampler_create(const ddp_sampler_opts_t *opt, ddp_sampler_t **out);
/* Frees the sampler and sets *s = NULL; s == NULL or *s == NULL is a no-op. */
DDP_API ddp_status_t ddp_sampler_destroy(ddp_sampler_t **s);

/* Same as DistributedSampler.set_epoch: the shuffle uses seed + epoch. Recomputes the rank's
 * index list (for 60,000 samples this takes well under a millisecond). DDP_EINVAL (epoch
 * unchanged) when seed + epoch exceeds 2^64-1, which torch's manual_seed refuses too. */
DDP_API ddp_status_t ddp_sampler_set_epoch(ddp_sampler_t *s, uint64_t epoch);
/* Current epoch. */
DDP_API ddp_status_t ddp_sampler_epoch(const ddp_sampler_t *s, uint64_t *epoch);
/* len(sampler): indices this rank gets per epoch (num_samples above). */
DDP_API ddp_status_t ddp_sampler_length(const ddp_sampler_t *s, size_t *count);
/* total = num_samples * num_replicas (the padded or truncated global list length). */
DDP_API ddp_status_t ddp_sampler_total_size(const ddp_sampler_t *s, size_t *count);

/* Copies this rank's index list for the current epoch into out[0 .. length-1].
 * DDP_EINVAL (nothing written) when capacity < length; *count = length on success.
 * out may be NULL only when length is 0. */
DDP_API ddp_status_t ddp_sampler_indices(const ddp_sampler_t *s, int64_t *out, size_t capacity,
                                         size_t *count);

/* Batches over this rank's list, as torch.utils.data.BatchSampler does it: batch b holds
 * indices [b*batch_size, min((b+1)*batch_size, length)). With drop_last_batch the final short
 * batch is not counted. */
DDP_API ddp_status_t ddp_sampler_num_batches(const ddp_sampler_t *s, size_t batch_size,
                                             int drop_last_batch, size_t *num_batches);
/* Copies batch `batch` (0-based, < ddp_sampler_num_batches(.., drop_last_batch=0)) into out;
 * *count = its size (batch_size, or less for the final batch). DDP_EINVAL (nothing written)
 * when batch is out of range or capacity < its size. */
DDP_API ddp_status_t ddp_sampler_batch(const ddp_sampler_t *s, size_t batch_size, size_t batch,
                                       int64_t *out, size_t capacity, size_t *count);

/* Agreement on the number of steps for uneven inputs. Collective over the communicator's
 * world (one MPI_Allreduce of {-steps, steps} with MPI_MAX): every rank gets the minimum and
 * the maximum of `local_steps` over all ranks.
 * Our choice: an application runs min_steps steps on every rank, so every rank takes part in
 * the same number of gradient allreduces and none waits for a peer that has stopped (the
 * hang that PyTorch's Join context manager exists for). The steps a rank drops are at most
 * max_steps - min_steps; with DistributedSampler itself all ranks have the same length, so
 * min == max unless the application gives ranks different data or batch sizes. Applications
 * that prefer PyTorch Join's behaviour (keep going to max_steps, exhausted ranks contribute
 * zero gradients) can use max_steps instead. */
DDP_API ddp_status_t ddp_sampler_agree_steps(const ddp_comm_t *comm, uint64_t local_steps,
                                             uint64_t *min_steps, uint64_t *max_steps);

/* ======================================================================================
 * Datasets
 * ======================================================================================
 * A dataset is a read-only collection of `count` samples; each sample is `sample_elems` f32
 * values (shape dims[0..ndim-1]) and one int32 label in [0, classes). Reading samples is
 * thread-safe (the loader's prefetch thread reads while the caller uses the handle). */
typedef struct ddp_dataset ddp_dataset_t;

#define DDP_DATASET_MAX_DIMS 4

typedef struct ddp_dataset_info {
  uint64_t count;                    /* samples */
  size_t sample_elems;               /* f32 values per sample (product of dims) */
  int ndim;                          /* 1..DDP_DATASET_MAX_DIMS */
  size_t dims[DDP_DATASET_MAX_DIMS]; /* per-sample shape, e.g. {28, 28} */
  int classes;                       /* labels are 0 .. classes-1 */
} ddp_dataset_info_t;

/* Opens an IDX image file (magic 0x00000803: u8, N x rows x cols; any u8 IDX with >= 1 dim
 * is accepted, dimension 0 being the sample count) and an IDX label file (magic 0x00000801:
 * u8, N). Files ending in ".gz" are read with zlib, others as plain files. The whole data is
 * loaded into memory as u8 (47 MB for Fashion-MNIST's training set).
 * Normalisation, in f32 arithmetic exactly as torchvision's ToTensor() then
 * Normalize(mean, std) computes it:  x = ((float)pixel / 255 - mean) / std.
 * mean = 0, std = 1 gives plain pixel/255 in [0, 1].
 * classes = max label + 1. Errors: DDP_EIO (cannot open/read, naming the file and errno text),
 * DDP_EFORMAT naming the file and what is wrong (bad magic, dtype other than u8, zero or
 * too many dimensions, size in the header larger or smaller than the data, image and label
 * counts that differ, corrupt gzip stream), DDP_EINVAL for NULL paths or std <= 0. */
DDP_API ddp_status_t ddp_dataset_open_idx(const char *images_path, const char *labels_path,
                                          float mean, float std, ddp_dataset_t **out);

/* Synthetic, seeded dataset for benchmarks: nothing is stored, each sample is computed on
 * demand from (seed, index), so any size costs no memory and every rank sees the same data.
 * Values are uniform in [-1, 1); label = a hash of (seed, index) modulo classes. */
typedef struct ddp_synthetic_opts {
  uint64_t count;                    /* samples, >= 1 */
  int ndim;                          /* 1..DDP_DATASET_MAX_DIMS */
  size_t dims[DDP_DATASET_MAX_DIMS]; /* per-sample shape, each >= 1 */
  int classes;                       /* >= 1 */
  uint64_t seed;
} ddp_synthetic_opts_t;
/* Defaults: 1000 samples of shape {1}, 10 classes, seed 0. DDP_EINVAL when opt is NULL. */
DDP_API ddp_status_t ddp_synthetic_opts_default(ddp_synthetic_opts_t *opt);
DDP_API ddp_status_t ddp_dataset_synthetic(const ddp_synthetic_opts_t *opt,
                                           ddp_dataset_t **out);

/* Fixed-length windows over a token stream (language-model pretraining): sample i is the
 * `window` tokens starting at token i * stride, as f32 values (token ids are exact in f32 below
 * 2^24), and its label is the window's last token. With window = seq + 1 and stride = seq a
 * sample holds a sequence's inputs (its first seq tokens) and, shifted by one, its targets
 * (its last seq tokens): the non-overlapping split that llm.c and nanoGPT's loaders make.
 * count = (tokens - window) / stride + 1 samples. The tokens are copied (1 byte each for u8,
 * 4 for i32), so the caller's buffer may be freed after creation. */
typedef struct ddp_tokens_opts {
  const void *tokens; /* the stream */
  uint64_t count;     /* tokens in it, >= window */
  ddp_dtype_t dtype;  /* DDP_U8 (a byte-level tokenizer) or DDP_I32 */
  size_t window;      /* tokens per sample, 1 .. 2^24 */
  size_t stride;      /* first token of sample i is i * stride, >= 1 */
  int vocab;          /* token ids are 0 .. vocab-1 (checked): the dataset's classes */
} ddp_tokens_opts_t;
/* Defaults: no tokens, DDP_U8, window 2, stride 1, vocab 256. DDP_EINVAL when opt is NULL. */
DDP_API ddp_status_t ddp_tokens_opts_default(ddp_tokens_opts_t *opt);
/* DDP_EINVAL naming the field (tokens NULL, a dtype other than u8/i32, window 0 or above 2^24,
 * stride 0, vocab < 1 or above 2^24 (f32 exactness), fewer tokens than one window, a token id
 * outside 0 .. vocab-1, naming its position and value); DDP_ENOMEM. */
DDP_API ddp_status_t ddp_dataset_tokens(const ddp_tokens_opts_t *opt, ddp_dataset_t **out);

/* Frees the dataset and sets *ds = NULL; NULL / *ds == NULL is a no-op. Destroying a
 * dataset that a live loader uses is the caller's error (destroy the loader first). */
DDP_API ddp_status_t ddp_dataset_destroy(ddp_dataset_t **ds);
DDP_API ddp_status_t ddp_dataset_info(const ddp_dataset_t *ds, ddp_dataset_info_t *info);
/* Reads sample `index` into x[0 .. sample_elems-1] (x_count must be >= sample_elems) and its
 * label into *label (label may be NULL). DDP_EINVAL (nothing written) for index >= count. */
DDP_API ddp_status_t ddp_dataset_get(const ddp_dataset_t *ds, uint64_t index, float *x,
                                     size_t x_count, int32_t *label);

/* ======================================================================================
 * Loader
 * ======================================================================================
 * Sampler + dataset -> contiguous batches: inputs f32 [count x sample_elems] (row-major,
 * sample after sample) and labels int32 [count]. A background thread prepares up to
 * prefetch_depth batches ahead so reading overlaps compute; the batches (content and order)
 * are the same with or without prefetching, and depend only on (sampler options, epoch,
 * dataset). Use a loader from one thread. */
typedef struct ddp_loader ddp_loader_t;

typedef struct ddp_loader_opts {
  size_t batch_size;   /* >= 1 (default 64) */
  int drop_last_batch; /* 0/1: skip the final short batch (default 0) */
  int prefetch_depth;  /* batches prepared ahead by a background thread, 0 = no thread
                          (batches are made inside ddp_loader_next); default 2, at most 64 */
} ddp_loader_opts_t;

/* Defaults: batch_size 64, drop_last_batch 0, prefetch_depth 2. Returns opt; NULL ignored. */
DDP_API ddp_status_t ddp_loader_opts_default(ddp_loader_opts_t *opt);

/* One batch. The pointers belong to the loader and stay valid until the next call to
 * ddp_loader_next, ddp_loader_start_epoch or ddp_loader_destroy. */
typedef struct ddp_batch {
  const float *x;         /* count * sample_elems values */
  const int32_t *y;       /* count labels */
  const int64_t *indices; /* the dataset indices of the samples, in order */
  size_t count;           /* samples in this batch (<= batch_size; 0 = end of epoch) */
  size_t sample_elems;
  size_t batch;           /* 0-based batch number within the epoch */
  uint64_t epoch;
} ddp_batch_t;

/* Creates a loader over `sampler` and `ds` (both borrowed: they must outlive the loader; the
 * sampler's dataset_size must equal the dataset's count, DDP_EINVAL otherwise). No thread
 * runs until ddp_loader_start_epoch. */
DDP_API ddp_status_t ddp_loader_create(ddp_sampler_t *sampler, const ddp_dataset_t *ds,
                                       const ddp_loader_opts_t *opt, ddp_loader_t **out);
/* Stops the prefetch thread (also mid-epoch: batches not yet consumed are discarded) and
 * frees the loader, setting *l = NULL; NULL / *l == NULL is a no-op. */
DDP_API ddp_status_t ddp_loader_destroy(ddp_loader_t **l);

/* Starts epoch `epoch`: calls ddp_sampler_set_epoch(sampler, epoch), takes a copy of the
 * rank's indices, and (prefetch_depth > 0) starts preparing batches. May be called at any
 * time, also mid-epoch (the previous epoch's remaining batches are discarded). */
DDP_API ddp_status_t ddp_loader_start_epoch(ddp_loader_t *l, uint64_t epoch);
/* Batches per epoch for this rank (ddp_sampler_num_batches with the loader's options). */
DDP_API ddp_status_t ddp_loader_num_batches(const ddp_loader_t *l, size_t *num_batches);
/* Next batch of the current epoch; at the end of the epoch returns DDP_OK with
 * batch->count == 0 (and keeps doing so until the next ddp_loader_start_epoch).
 * DDP_ESTATE before the first ddp_loader_start_epoch. (Datasets are in memory or computed, so
 * reading a batch cannot fail.) */
DDP_API ddp_status_t ddp_loader_next(ddp_loader_t *l, ddp_batch_t *batch);

#ifdef __cplusplus
}
#endif
#endif /* DDP_SAMPLER_H */
