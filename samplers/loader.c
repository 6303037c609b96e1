/* The loader: a rank's indices -> contiguous f32/int32 batches, prepared ahead of time by a
 * background thread (a ring of prefetch_depth + 1 slots) so reading overlaps compute. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sampler_internal.h"

#define LOADER_MAX_DEPTH 64

typedef struct slot {
  float *x;
  int32_t *y;
  int64_t *idx;
  size_t count;
} slot_t;

struct ddp_loader {
  ddp_sampler_t *sampler;
  const ddp_dataset_t *ds;
  ddp_loader_opts_t opt;
  size_t elems;
  int nslots; /* depth + 1: the batch the caller holds plus `depth` ahead */
  slot_t *slots;

  /* the current epoch, copied at start_epoch so the thread never touches the sampler */
  int started;
  uint64_t epoch;
  int64_t *indices;
  size_t nindices, nbatches;

  /* Batches [0, taken) were handed out, [taken, filled) are ready, `filled` is being made.
   * The thread may make batch b once b < taken + depth, i.e. at most depth ready batches
   * beyond the one the caller holds (slot (taken - 1) % nslots). */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t thread;
  int thread_running;
  int stop;
  size_t taken, filled;
};

ddp_status_t ddp_loader_opts_default(ddp_loader_opts_t *opt) {
  DDP_CHECK_ARG(opt != NULL, "opt is NULL");
  memset(opt, 0, sizeof(*opt));
  opt->batch_size = 64;
  opt->drop_last_batch = 0;
  opt->prefetch_depth = 2;
  return DDP_OK;
}

static void fill_slot(ddp_loader_t *l, size_t batch, slot_t *s) {
  size_t begin = batch * l->opt.batch_size;
  size_t n = l->nindices - begin < l->opt.batch_size ? l->nindices - begin : l->opt.batch_size;
  for (size_t j = 0; j < n; j++) {
    int64_t i = l->indices[begin + j];
    s->idx[j] = i;
    ddp__dataset_read(l->ds, (uint64_t)i, s->x + j * l->elems, s->y + j);
  }
  s->count = n;
}

static void *loader_main(void *arg) {
  ddp_loader_t *l = arg;
  pthread_mutex_lock(&l->mu);
  for (;;) {
    while (!l->stop && (l->filled >= l->nbatches ||
                        l->filled >= l->taken + (size_t)l->opt.prefetch_depth))
      pthread_cond_wait(&l->cv, &l->mu);
    if (l->stop) break;
    size_t b = l->filled;
    pthread_mutex_unlock(&l->mu);
    fill_slot(l, b, &l->slots[b % (size_t)l->nslots]);
    pthread_mutex_lock(&l->mu);
    l->filled = b + 1;
    pthread_cond_broadcast(&l->cv);
  }
  pthread_mutex_unlock(&l->mu);
  return NULL;
}

static void stop_thread(ddp_loader_t *l) {
  if (!l->thread_running) return;
  pthread_mutex_lock(&l->mu);
  l->stop = 1;
  pthread_cond_broadcast(&l->cv);
  pthread_mutex_unlock(&l->mu);
  pthread_join(l->thread, NULL);
  l->thread_running = 0;
  l->stop = 0;
}

static void loader_free(ddp_loader_t *l) {
  if (l == NULL) return;
  stop_thread(l);
  if (l->slots) {
    for (int i = 0; i < l->nslots; i++) {
      free(l->slots[i].x);
      free(l->slots[i].y);
      free(l->slots[i].idx);
    }
    free(l->slots);
  }
  free(l->indices);
  pthread_cond_destroy(&l->cv);
  pthread_mutex_destroy(&l->mu);
  free(l);
}

ddp_status_t ddp_loader_destroy(ddp_loader_t **l) {
  if (l != NULL) {
    loader_free(*l);
    *l = NULL;
  }
  return DDP_OK;
}

ddp_status_t ddp_loader_create(ddp_sampler_t *sampler, const ddp_dataset_t *ds,
                               const ddp_loader_opts_t *opt, ddp_loader_t **out) {
  DDP_CHECK_ARG(sampler != NULL, "sampler is NULL");
  DDP_CHECK_ARG(ds != NULL, "ds is NULL");
  DDP_CHECK_ARG(opt != NULL, "opt is NULL");
  DDP_CHECK_ARG(out != NULL, "out is NULL");
  DDP_CHECK_ARG(opt->batch_size >= 1, "batch_size %zu must be >= 1", opt->batch_size);
  DDP_CHECK_ARG(opt->drop_last_batch == 0 || opt->drop_last_batch == 1,
                "drop_last_batch %d must be 0 or 1", opt->drop_last_batch);
  DDP_CHECK_ARG(opt->prefetch_depth >= 0 && opt->prefetch_depth <= LOADER_MAX_DEPTH,
                "prefetch_depth %d must be in 0..%d", opt->prefetch_depth, LOADER_MAX_DEPTH);
  ddp_dataset_info_t info;
  DDP_TRY(ddp_dataset_info(ds, &info));
  /* Every index the sampler produces must be a valid sample, and a sampler built for another
   * dataset would silently skip or repeat data: require equal sizes. */
  uint64_t sampler_size = ddp__sampler_dataset_size(sampler);
  DDP_CHECK_ARG(sampler_size == info.count,
                "sampler dataset_size %llu differs from the dataset's %llu samples",
                (unsigned long long)sampler_size, (unsigned long long)info.count);
  DDP_CHECK_ARG(opt->batch_size <= SIZE_MAX / sizeof(float) / info.sample_elems,
                "batch_size %zu times %zu values per sample overflows", opt->batch_size,
                info.sample_elems);

  ddp_loader_t *l = calloc(1, sizeof(*l));
  if (l == NULL) return ddp__error(DDP_ENOMEM, "loader: out of memory");
  if (pthread_mutex_init(&l->mu, NULL) != 0) {
    free(l);
    return ddp__error(DDP_ENOMEM, "loader: pthread_mutex_init failed");
  }
  if (pthread_cond_init(&l->cv, NULL) != 0) {
    pthread_mutex_destroy(&l->mu);
    free(l);
    return ddp__error(DDP_ENOMEM, "loader: pthread_cond_init failed");
  }
  l->sampler = sampler;
  l->ds = ds;
  l->opt = *opt;
  l->elems = info.sample_elems;
  l->nslots = opt->prefetch_depth + 1;
  l->slots = calloc((size_t)l->nslots, sizeof(slot_t));
  int ok = l->slots != NULL;
  for (int i = 0; ok && i < l->nslots; i++) {
    slot_t *s = &l->slots[i];
    s->x = malloc(opt->batch_size * l->elems * sizeof(float));
    s->y = malloc(opt->batch_size * sizeof(int32_t));
    s->idx = malloc(opt->batch_size * sizeof(int64_t));
    ok = s->x && s->y && s->idx;
  }
  if (!ok) {
    loader_free(l);
    return ddp__error(DDP_ENOMEM, "loader: no memory for %d batches of %zu x %zu f32",
                      opt->prefetch_depth + 1, opt->batch_size, info.sample_elems);
  }
  *out = l;
  return DDP_OK;
}

ddp_status_t ddp_loader_start_epoch(ddp_loader_t *l, uint64_t epoch) {
  DDP_CHECK_ARG(l != NULL, "loader is NULL");
  stop_thread(l);
  l->started = 0;
  DDP_TRY(ddp_sampler_set_epoch(l->sampler, epoch));
  size_t len;
  DDP_TRY(ddp_sampler_length(l->sampler, &len));
  if (len > l->nindices || l->indices == NULL) {
    int64_t *p = realloc(l->indices, (len > 0 ? len : 1) * sizeof(int64_t));
    if (p == NULL) return ddp__error(DDP_ENOMEM, "loader: no memory for %zu indices", len);
    l->indices = p;
  }
  DDP_TRY(ddp_sampler_indices(l->sampler, l->indices, len, &l->nindices));
  DDP_TRY(ddp_sampler_num_batches(l->sampler, l->opt.batch_size, l->opt.drop_last_batch,
                                  &l->nbatches));
  l->epoch = epoch;
  l->taken = 0;
  l->filled = 0;
  l->stop = 0;
  if (l->opt.prefetch_depth > 0 && l->nbatches > 0) {
    int rc = pthread_create(&l->thread, NULL, loader_main, l);
    if (rc != 0) return ddp__error(DDP_ENOMEM, "loader: pthread_create failed (%d)", rc);
    l->thread_running = 1;
  }
  l->started = 1;
  return DDP_OK;
}

ddp_status_t ddp_loader_num_batches(const ddp_loader_t *l, size_t *num_batches) {
  DDP_CHECK_ARG(l != NULL, "loader is NULL");
  DDP_CHECK_ARG(num_batches != NULL, "num_batches is NULL");
  return ddp_sampler_num_batches(l->sampler, l->opt.batch_size, l->opt.drop_last_batch,
                                 num_batches);
}

ddp_status_t ddp_loader_next(ddp_loader_t *l, ddp_batch_t *batch) {
  DDP_CHECK_ARG(l != NULL, "loader is NULL");
  DDP_CHECK_ARG(batch != NULL, "batch is NULL");
  if (!l->started)
    return ddp__error(DDP_ESTATE, "loader: call ddp_loader_start_epoch before ddp_loader_next");
  memset(batch, 0, sizeof(*batch));
  batch->sample_elems = l->elems;
  batch->epoch = l->epoch;
  size_t b = l->taken;
  batch->batch = b;
  if (b >= l->nbatches) return DDP_OK; /* end of epoch: count 0 */
  slot_t *s = &l->slots[b % (size_t)l->nslots];
  if (!l->thread_running) {
    fill_slot(l, b, s);
    l->taken = b + 1;
  } else {
    pthread_mutex_lock(&l->mu);
    while (l->filled <= b) pthread_cond_wait(&l->cv, &l->mu);
    /* The caller now holds b and has released b - 1: one more slot for the thread. */
    l->taken = b + 1;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
  }
  batch->x = s->x;
  batch->y = s->y;
  batch->indices = s->idx;
  batch->count = s->count;
  return DDP_OK;
}
