/* Elastic continuation (issue 28): a checkpoint written by N ranks resumed on N' ranks as if
 * nothing had happened. Two pure pieces the resume needs:
 *  - the batch plan: per-rank batch b' and accumulation steps a' for N' ranks so that
 *    N' x b' x a' equals the checkpoint's global batch N x b x a (b' = b preferred); a global
 *    batch that cannot be matched is refused with the numbers, or with allow_other the closest
 *    one is taken (--elastic-batch);
 *  - the ZeRO re-partition: the checkpoint holds every optimizer state buffer in full
 *    (checkpoint.h), so the shard rank r' of N' needs is a set of per-tensor ranges read
 *    straight out of the file; elastic_flat_shard gives the ranges of the flat-vector block
 *    partition (ddp_train --deterministic --zero), the reducer's come from
 *    ddp_reducer_shard_range.
 * Errors never abort: every function returns 0 or -1 with a message in err. */
#ifndef TRAIN_ELASTIC_H
#define TRAIN_ELASTIC_H

#include <stddef.h>
#include <stdint.h>

#include "checkpoint.h"

typedef struct elastic_plan {
  int world;             /* N', the ranks of this run */
  uint64_t batch, accum; /* b', a': per-rank batch and accumulation steps */
  uint64_t global_batch; /* N' x b' x a' */
  uint64_t old_global;   /* N x b x a, the checkpoint's */
  int exact;             /* global_batch == old_global */
} elastic_plan_t;

/* The plan for new_world ranks from a checkpoint of `world` ranks with per-rank batch `batch`
 * and `accum` accumulation steps. Among the splits b' x a' of the per-rank samples
 * (N x b x a / N'), b' = b is taken when it exists, else the largest b' below b, else the
 * smallest above; max_batch and max_accum (0: no limit) bound b' and a'. Without an exact split
 * the plan is refused (-1, the message names both global batches and what would be accepted),
 * unless allow_other: then the per-rank samples closest to N x b x a / N' that split within
 * the limits are taken (exact = 0). */
int elastic_plan(int world, uint64_t batch, uint64_t accum, int new_world, uint64_t max_batch,
                 uint64_t max_accum, int allow_other, elastic_plan_t *plan, char *err,
                 size_t errlen);

/* The flat-vector block partition: the parameters laid end to end (tensor i has counts[i]
 * elements) are cut into `world` blocks of ceil(total / world) elements, rank `rank` owning
 * block `rank`; begin[i], count[i] are that block's part of tensor i (count 0: none). */
void elastic_flat_shard(const size_t *counts, size_t nparams, int world, int rank,
                        size_t *begin, size_t *count);

/* Copies the shard described by begin/count out of a parsed checkpoint (buf, v): state buffer
 * k of tensor i, elements [begin[i], begin[i] + count[i]), into dst[k * nparams + i], for k
 * below v->st.nstate. The ranges are checked against the file's tensor sizes. */
int elastic_take_shard(const void *buf, const ckpt_view_t *v, const size_t *begin,
                       const size_t *count, size_t nparams, float *const *dst, char *err,
                       size_t errlen);

/* One line for the log: "elastic: checkpoint of 2 ranks x batch 6 x accum 1 (global batch 12)
 * continues on 3 ranks x batch 4 x accum 1 (global batch 12)". */
void elastic_describe(int world, uint64_t batch, uint64_t accum, const elastic_plan_t *plan,
                      char *out, size_t outlen);

#endif /* TRAIN_ELASTIC_H */
