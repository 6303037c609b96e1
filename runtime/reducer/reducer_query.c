/* The reducer's getters (gradient views, statistics, bucket membership, the used set) and the
 * names of the compression hooks. */
#include <string.h>

#include "reducer_internal.h"

/* The hooks in ddp_hook_t order: the name the apps, the options and the Python package use,
 * and the dtype each sends for an f32 bucket. */
static const struct {
  const char *name;
  ddp_dtype_t wire;
} ddp__hooks[DDP_HOOK_COUNT] = {{"none", DDP_DTYPE_COUNT}, {"fp16", DDP_F16}, {"bf16", DDP_BF16}};

const char *ddp_hook_name(ddp_hook_t hook) {
  return ((unsigned)hook < DDP_HOOK_COUNT) ? ddp__hooks[hook].name : "?";
}

ddp_status_t ddp_hook_parse(const char *text, ddp_hook_t *out) {
  DDP_CHECK_ARG(text != NULL, "text is NULL");
  DDP_CHECK_ARG(out != NULL, "out is NULL");
  for (int h = 0; h < DDP_HOOK_COUNT; h++)
    if (strcmp(text, ddp__hooks[h].name) == 0) return (*out = (ddp_hook_t)h), DDP_OK;
  return ddp__error(DDP_EINVAL, "hook '%s' unknown (allowed: none fp16 bf16)", text);
}

ddp_dtype_t ddp__hook_dtype(ddp_hook_t hook) {
  return ((unsigned)hook < DDP_HOOK_COUNT) ? ddp__hooks[hook].wire : DDP_DTYPE_COUNT;
}

ddp_status_t ddp__reducer_check_index(const ddp_reducer_t *r, size_t i) {
  DDP_CHECK_ARG(i < r->np, "parameter index %zu out of range (the reducer has %zu parameters)", i, r->np);
  return DDP_OK;
}

/* With views on the gradient is the parameter's slot in its bucket, else the application's. */
static void *grad_of(const ddp_reducer_t *r, size_t i) {
  return r->views ? ddp__reducer_slot(r, i) : r->p[i].grad;
}

ddp_status_t ddp_reducer_grad(ddp_reducer_t *r, size_t i, void **grad) {
  DDP_CHECK_ARG(r != NULL, "r is NULL");
  DDP_TRY(ddp__reducer_check_index(r, i));
  DDP_CHECK_ARG(grad != NULL, "grad is NULL");
  *grad = grad_of(r, i);
  return DDP_OK;
}

ddp_status_t ddp_reducer_grads(ddp_reducer_t *r, void **grads, size_t n) {
  DDP_CHECK_ARG(r != NULL, "r is NULL");
  DDP_CHECK_ARG(grads != NULL, "grads is NULL");
  DDP_CHECK_ARG(n == r->np, "n %zu is not the reducer's parameter count %zu", n, r->np);
  for (size_t i = 0; i < n; i++) grads[i] = grad_of(r, i);
  return DDP_OK;
}

ddp_status_t ddp_reducer_stats(const ddp_reducer_t *r, ddp_reducer_stats_t *stats) {
  DDP_CHECK_ARG(r != NULL, "r is NULL");
  DDP_CHECK_ARG(stats != NULL, "stats is NULL");
  ddp_reducer_stats_t s;
  memset(&s, 0, sizeof s);
  s.nbuckets = r->lay.nb;
  s.bucket_bytes_min = r->lay.nb ? SIZE_MAX : 0;
  for (size_t j = 0; j < r->lay.nb; j++) {
    if (r->b[j].bytes > s.bucket_bytes_max) s.bucket_bytes_max = r->b[j].bytes;
    if (r->b[j].bytes < s.bucket_bytes_min) s.bucket_bytes_min = r->b[j].bytes;
  }
  s.iterations = r->iterations;
  if (r->iterations) {
    s.comm_ms_avg = r->sum_comm * 1e3 / (double)r->iterations;
    s.exposed_ms_avg = r->sum_exposed * 1e3 / (double)r->iterations;
  }
  s.hidden_fraction = r->sum_comm > 0.0 ? 1.0 - r->sum_exposed / r->sum_comm : 0.0;
  if (s.hidden_fraction < 0.0) s.hidden_fraction = 0.0;
  s.rebuilt = r->rebuilt;
  s.unused_params = r->unused_params;
  s.wire_bytes = r->wire_bytes;
  s.released_bytes = r->released_bytes;
  *stats = s;
  return DDP_OK;
}

ddp_status_t ddp_reducer_bucket_of(const ddp_reducer_t *r, size_t i, size_t *bucket) {
  DDP_CHECK_ARG(r != NULL, "r is NULL");
  DDP_TRY(ddp__reducer_check_index(r, i));
  DDP_CHECK_ARG(bucket != NULL, "bucket is NULL");
  *bucket = r->lay.pbucket[i];
  return DDP_OK;
}

ddp_status_t ddp_reducer_bucket_params(const ddp_reducer_t *r, size_t b, size_t *idx, size_t cap,
                                       size_t *n, size_t *bytes) {
  DDP_CHECK_ARG(r != NULL, "r is NULL");
  DDP_CHECK_ARG(b < r->lay.nb, "bucket %zu out of range (the reducer has %zu buckets)", b, r->lay.nb);
  DDP_CHECK_ARG(n != NULL, "n is NULL");
  DDP_CHECK_ARG(idx != NULL || cap == 0, "idx is NULL but cap is %zu", cap);
  size_t m = r->lay.nmem[b];
  for (size_t k = 0; k < m && k < cap; k++) idx[k] = r->lay.members[r->lay.first[b] + k];
  *n = m;
  if (bytes) *bytes = r->b[b].bytes;
  return DDP_OK;
}

ddp_status_t ddp_reducer_param_used(const ddp_reducer_t *r, size_t i, int *used) {
  DDP_CHECK_ARG(r != NULL, "r is NULL");
  DDP_TRY(ddp__reducer_check_index(r, i));
  DDP_CHECK_ARG(used != NULL, "used is NULL");
  if (!r->find_unused)
    return ddp__error(DDP_ESTATE, "param_used needs a reducer created with find_unused = 1");
  *used = r->used[i] != 0;
  return DDP_OK;
}
