/* Internals of the sampler layer shared by its files: PyTorch's CPU generator (mt19937) and
 * randperm, and the FNV-1a hash the fixture test uses. Not installed. */
#ifndef DDP_SAMPLER_INTERNAL_H
#define DDP_SAMPLER_INTERNAL_H

#include <stdint.h>

#include "ddp_internal.h"
#include "ddp_sampler.h"

/* mt19937 exactly as at::mt19937 (ATen's CPU generator engine). */
typedef struct ddp__mt19937 {
  uint32_t state[624];
  int next;
} ddp__mt19937_t;

/* torch.Generator.manual_seed(seed): only the low 32 bits reach the engine. */
DDP_HIDDEN void ddp__mt19937_seed(ddp__mt19937_t *mt, uint64_t seed);
/* CPUGeneratorImpl::random(): one 32-bit draw. */
DDP_HIDDEN uint32_t ddp__mt19937_next(ddp__mt19937_t *mt);

/* torch.randperm(n, generator=seeded mt) into perm32 (n < 2^31) or perm64 (exactly one of
 * them is non-NULL). */
DDP_HIDDEN void ddp__randperm(ddp__mt19937_t *mt, uint64_t n, int32_t *perm32, int64_t *perm64);

/* Reads sample `index` (< count, unchecked) into x (sample_elems values) and *label (if not
 * NULL); thread-safe. Used by the loader's thread. */
DDP_HIDDEN void ddp__dataset_read(const ddp_dataset_t *ds, uint64_t index, float *x,
                                  int32_t *label);

/* The sampler's dataset_size option. */
DDP_HIDDEN uint64_t ddp__sampler_dataset_size(const ddp_sampler_t *s);

#endif /* DDP_SAMPLER_INTERNAL_H */
