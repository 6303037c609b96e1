/* Elastic continuation at another world size: the batch plan and the ZeRO shard read-back (see
 * train_elastic.h). */
#include "train_elastic.h"

#include <stdio.h>
#include <string.h>

/* The split b' x a' of m per-rank samples: b' = pref when it divides m, else the largest
 * divisor below pref, else the smallest above, within the limits (0: none). 0 when none fits. */
static uint64_t elastic__split(uint64_t m, uint64_t pref, uint64_t max_batch, uint64_t max_accum) {
  uint64_t below = 0, above = 0;
  for (uint64_t d = 1; d <= m / d; d++) {
    if (m % d) continue;
    uint64_t pair[2] = {d, m / d};
    for (int k = 0; k < 2; k++) {
      uint64_t b = pair[k], a = m / b;
      if ((max_batch && b > max_batch) || (max_accum && a > max_accum)) continue;
      if (b <= pref && b > below) below = b;
      if (b > pref && (!above || b < above)) above = b;
    }
  }
  return below ? below : above;
}

static void elastic__fill(elastic_plan_t *p, int new_world, uint64_t m, uint64_t b,
                          uint64_t old_global) {
  p->world = new_world;
  p->batch = b;
  p->accum = m / b;
  p->global_batch = (uint64_t)new_world * m;
  p->old_global = old_global;
  p->exact = p->global_batch == old_global;
}

/* The closest per-rank sample count to old_global / new_world that splits within the limits
 * (ties: the smaller global batch); m = 1 always splits, so there is one. */
static void elastic__closest(int new_world, uint64_t old_global, uint64_t pref, uint64_t max_batch,
                             uint64_t max_accum, elastic_plan_t *p) {
  uint64_t n = (uint64_t)new_world, lo = old_global / n, hi = lo + 1;
  if (lo == 0) lo = 1, hi = 2;
  for (;;) {
    uint64_t dlo = old_global > n * lo ? old_global - n * lo : n * lo - old_global;
    uint64_t dhi = n * hi - old_global;
    uint64_t m = dlo <= dhi ? lo : hi;
    uint64_t b = elastic__split(m, pref, max_batch, max_accum);
    if (b) {
      elastic__fill(p, new_world, m, b, old_global);
      return;
    }
    if (m == lo && lo > 1) lo--;
    else if (m == lo) lo = 1, hi++; /* lo = 1 always splits: not reached */
    else hi++;
  }
}

int elastic_plan(int world, uint64_t batch, uint64_t accum, int new_world, uint64_t max_batch,
                 uint64_t max_accum, int allow_other, elastic_plan_t *plan, char *err,
                 size_t errlen) {
  if (world < 1 || new_world < 1 || batch < 1 || accum < 1 || !plan) {
    snprintf(err, errlen, "elastic plan: world %d, batch %llu, accum %llu, new world %d (all >= 1)",
             world, (unsigned long long)batch, (unsigned long long)accum, new_world);
    return -1;
  }
  if (batch > UINT64_MAX / accum / (uint64_t)world) {
    snprintf(err, errlen, "elastic plan: global batch %d x %llu x %llu overflows", world,
             (unsigned long long)batch, (unsigned long long)accum);
    return -1;
  }
  uint64_t old_global = (uint64_t)world * batch * accum, n = (uint64_t)new_world;
  const char *why = NULL;
  char whybuf[256];
  if (old_global % n == 0) {
    uint64_t m = old_global / n, b = elastic__split(m, batch, max_batch, max_accum);
    if (b) {
      elastic__fill(plan, new_world, m, b, old_global);
      return 0;
    }
    snprintf(whybuf, sizeof whybuf, "its %llu samples per rank do not split into a batch <= %llu "
             "x accumulation steps <= %llu (0: any)", (unsigned long long)m,
             (unsigned long long)max_batch, (unsigned long long)max_accum);
    why = whybuf;
  } else {
    snprintf(whybuf, sizeof whybuf, "%llu is not a multiple of %d", (unsigned long long)old_global,
             new_world);
    why = whybuf;
  }
  elastic_plan_t alt;
  elastic__closest(new_world, old_global, batch, max_batch, max_accum, &alt);
  if (allow_other) {
    *plan = alt;
    return 0;
  }
  snprintf(err, errlen, "the checkpoint's global batch %llu (%d ranks x batch %llu x accum %llu) "
           "cannot be kept on %d ranks: %s; --elastic-batch accepts global batch %llu (%d ranks x "
           "batch %llu x accum %llu)", (unsigned long long)old_global, world,
           (unsigned long long)batch, (unsigned long long)accum, new_world, why,
           (unsigned long long)alt.global_batch, new_world, (unsigned long long)alt.batch,
           (unsigned long long)alt.accum);
  return -1;
}

void elastic_flat_shard(const size_t *counts, size_t nparams, int world, int rank,
                        size_t *begin, size_t *count) {
  size_t total = 0;
  for (size_t i = 0; i < nparams; i++) total += counts[i];
  size_t w = world > 0 ? (size_t)world : 1, r = rank > 0 ? (size_t)rank : 0;
  size_t blk = (total + w - 1) / w, lo = blk * r, hi = lo + blk;
  lo = lo < total ? lo : total;
  hi = hi < total ? hi : total;
  for (size_t i = 0, off = 0; i < nparams; off += counts[i], i++) {
    size_t a = lo > off ? lo : off, e = hi < off + counts[i] ? hi : off + counts[i];
    begin[i] = e > a ? a - off : 0;
    count[i] = e > a ? e - a : 0;
  }
}

int elastic_take_shard(const void *buf, const ckpt_view_t *v, const size_t *begin,
                       const size_t *count, size_t nparams, float *const *dst, char *err,
                       size_t errlen) {
  if (!buf || !v || nparams != v->st.nparams) {
    snprintf(err, errlen, "elastic shard: %zu tensors asked, the checkpoint has %u", nparams,
             v ? v->st.nparams : 0u);
    return -1;
  }
  for (size_t i = 0; i < nparams; i++) {
    uint64_t c = ckpt_u64_at(buf, v->counts_off + 8u * i);
    if (begin[i] > c || count[i] > c - begin[i]) {
      snprintf(err, errlen, "elastic shard: tensor %zu range [%zu, %zu) outside its %llu elements",
               i, begin[i], begin[i] + count[i], (unsigned long long)c);
      return -1;
    }
  }
  for (uint32_t k = 0; k < v->st.nstate; k++) {
    size_t off = v->state_off + 4u * (size_t)v->st.total * k;
    for (size_t i = 0; i < nparams; i++) {
      size_t c = (size_t)ckpt_u64_at(buf, v->counts_off + 8u * i);
      if (count[i]) ckpt_copy_floats(buf, off + 4u * begin[i], dst[k * nparams + i], count[i]);
      off += 4u * c;
    }
  }
  return 0;
}

void elastic_describe(int world, uint64_t batch, uint64_t accum, const elastic_plan_t *p,
                      char *out, size_t outlen) {
  snprintf(out, outlen, "elastic: checkpoint of %d ranks x batch %llu x accum %llu (global batch "
           "%llu) continues on %d ranks x batch %llu x accum %llu (global batch %llu%s)", world,
           (unsigned long long)batch, (unsigned long long)accum,
           (unsigned long long)p->old_global, p->world, (unsigned long long)p->batch,
           (unsigned long long)p->accum, (unsigned long long)p->global_batch,
           p->exact ? ", kept" : ", CHANGED by --elastic-batch");
}
