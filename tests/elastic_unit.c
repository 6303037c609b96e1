/* Unit tests of the elastic continuation's pure parts (apps/kit/train_elastic.h, no MPI): the
 * batch plan keeps the global batch (b' = b preferred, refusals name the numbers, --elastic-batch
 * takes the closest), and the ZeRO shards that rank r' of N' reads out of a checkpoint written at
 * N ranks put together the full optimizer state, bit for bit, for N' = 1 .. 5. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "ddp_test.h"
#include "train_elastic.h"

/* Plans `world` x `batch` x 1 onto new_world and checks b', a' (0 0: refused). */
static void plan_case(int world, uint64_t batch, int new_world, uint64_t max_batch,
                      uint64_t max_accum, int allow, uint64_t want_b, uint64_t want_a,
                      const char *want_msg) {
  elastic_plan_t p;
  char err[512] = "";
  int rc = elastic_plan(world, batch, 1, new_world, max_batch, max_accum, allow, &p, err,
                        sizeof err);
  if (want_b == 0) {
    CHECK(rc != 0, "%d x %llu -> %d: accepted (b' %llu a' %llu), expected a refusal", world,
          (unsigned long long)batch, new_world, (unsigned long long)p.batch,
          (unsigned long long)p.accum);
    CHECK(strstr(err, want_msg) != NULL, "%d x %llu -> %d: message '%s' lacks '%s'", world,
          (unsigned long long)batch, new_world, err, want_msg);
    return;
  }
  CHECK(rc == 0, "%d x %llu -> %d refused: %s", world, (unsigned long long)batch, new_world, err);
  if (rc != 0) return;
  CHECK(p.batch == want_b && p.accum == want_a, "%d x %llu -> %d: b' %llu a' %llu, expected %llu %llu",
        world, (unsigned long long)batch, new_world, (unsigned long long)p.batch,
        (unsigned long long)p.accum, (unsigned long long)want_b, (unsigned long long)want_a);
  CHECK(p.global_batch == (uint64_t)new_world * p.batch * p.accum, "global batch %llu",
        (unsigned long long)p.global_batch);
  CHECK(p.exact == (p.global_batch == (uint64_t)world * batch), "exact flag %d", p.exact);
  if (!allow) CHECK(p.exact, "%d x %llu -> %d: not exact without --elastic-batch", world,
                    (unsigned long long)batch, new_world);
}

static int run_plan(ddp_test_t *t) {
  (void)t;
  /* the cases, unlimited accumulation: b' = b, a' makes up the difference */
  plan_case(2, 6, 1, 0, 0, 0, 6, 2, NULL);
  plan_case(4, 8, 2, 0, 0, 0, 8, 2, NULL);
  plan_case(2, 6, 3, 0, 0, 0, 4, 1, NULL); /* b' = b impossible: the largest below */
  plan_case(3, 4, 2, 0, 0, 0, 3, 2, NULL); /* 6 per rank: 3 x 2 (3 <= 4), not 6 x 1 */
  plan_case(1, 12, 2, 0, 0, 0, 6, 1, NULL);
  plan_case(2, 6, 2, 0, 0, 0, 6, 1, NULL); /* same size: unchanged */
  /* no accumulation (a' <= 1): the per-rank batch grows instead */
  plan_case(2, 6, 1, 0, 1, 0, 12, 1, NULL);
  plan_case(2, 1, 4, 0, 0, 0, 0, 0, "2 is not a multiple of 4");
  /* refused: not a multiple, or no split within the limits; the message names the numbers
   * and what --elastic-batch would take */
  plan_case(2, 6, 5, 0, 0, 0, 0, 0, "global batch 12 (2 ranks x batch 6 x accum 1) cannot be kept on 5 ranks");
  plan_case(2, 6, 5, 0, 0, 0, 0, 0, "--elastic-batch accepts global batch 10 (5 ranks x batch 2 x accum 1)");
  plan_case(2, 6, 1, 6, 1, 0, 0, 0, "12 samples per rank do not split");
  /* --elastic-batch: the closest global batch (ties: the smaller) */
  plan_case(2, 6, 5, 0, 0, 1, 2, 1, NULL);          /* 10, not 15 */
  plan_case(2, 7, 4, 0, 0, 1, 3, 1, NULL);          /* 14: 12 and 16 tie, the smaller */
  plan_case(2, 6, 1, 6, 1, 1, 6, 1, NULL);          /* 12 with batch <= 6, no accum: 6 */
  plan_case(2, 6, 7, 0, 0, 1, 2, 1, NULL);          /* 12 / 7 -> 14 (|2|) vs 7 (|5|) */
  /* bad arguments */
  elastic_plan_t p;
  char err[256];
  CHECK(elastic_plan(0, 6, 1, 2, 0, 0, 0, &p, err, sizeof err) != 0 && strstr(err, "world 0"),
        "world 0 accepted or unnamed: %s", err);
  CHECK(elastic_plan(2, 6, 1, 0, 0, 0, 0, &p, err, sizeof err) != 0 && strstr(err, "new world 0"),
        "new world 0 accepted or unnamed: %s", err);
  elastic_describe(2, 6, 1, &(elastic_plan_t){.world = 3, .batch = 4, .accum = 1,
                                               .global_batch = 12, .old_global = 12, .exact = 1},
                   err, sizeof err);
  CHECK(strstr(err, "2 ranks x batch 6 x accum 1 (global batch 12) continues on 3 ranks x batch 4 "
                    "x accum 1 (global batch 12, kept)") != NULL, "describe: %s", err);
  return 0;
}

/* A checkpoint of three tensors with AdamW's two state buffers, written "at 2 ranks", read back
 * as the flat-block shards of N' = 1 .. 5 ranks: the shards tile each tensor exactly once and
 * hold the file's bits. */
static int run_shards(ddp_test_t *t) {
  (void)t;
  enum { NP = 3, NST = 2 };
  size_t counts[NP] = {7, 1, 12};
  size_t total = 20;
  float *buf[NP * (NST + 1)];
  for (size_t k = 0; k < NST + 1; k++)
    for (size_t i = 0; i < NP; i++) {
      float *b = malloc(sizeof(float) * counts[i]);
      for (size_t e = 0; e < counts[i]; e++) b[e] = (float)(1000 * k + 100 * i + e) + 0.25f;
      buf[k * NP + i] = b;
    }
  ckpt_state_t st = {.nparams = NP, .world = 2, .batch = 6, .seed = 1, .optim = 1, .nstate = NST};
  snprintf(st.model, sizeof st.model, "mlp");
  void *file = NULL;
  size_t bytes = 0;
  char err[512];
  CHECK(ckpt_serialize(&st, buf, buf + NP, counts, &file, &bytes, err, sizeof err) == 0,
        "serialize: %s", err);
  ckpt_view_t v;
  CHECK(file && ckpt_parse(file, bytes, &v, err, sizeof err) == 0, "parse: %s", err);
  if (!file) return 1;
  for (int world = 1; world <= 5; world++) {
    size_t seen[NP * NST][12];
    memset(seen, 0, sizeof seen);
    for (int rank = 0; rank < world; rank++) {
      size_t begin[NP], count[NP];
      elastic_flat_shard(counts, NP, world, rank, begin, count);
      size_t mine = 0;
      float *dst[NP * NST];
      for (size_t j = 0; j < NP * NST; j++) dst[j] = malloc(sizeof(float) * 12);
      for (size_t i = 0; i < NP; i++) mine += count[i];
      CHECK(mine <= (total + (size_t)world - 1) / (size_t)world, "world %d rank %d: %zu elements",
            world, rank, mine);
      CHECK(elastic_take_shard(file, &v, begin, count, NP, dst, err, sizeof err) == 0,
            "take world %d rank %d: %s", world, rank, err);
      for (size_t k = 0; k < NST; k++)
        for (size_t i = 0; i < NP; i++)
          for (size_t e = 0; e < count[i]; e++) {
            float want = buf[(k + 1) * NP + i][begin[i] + e];
            CHECK(memcmp(&dst[k * NP + i][e], &want, 4) == 0, "world %d rank %d state %zu tensor "
                  "%zu element %zu: %g, expected %g", world, rank, k, i, begin[i] + e,
                  (double)dst[k * NP + i][e], (double)want);
            seen[k * NP + i][begin[i] + e]++;
          }
      for (size_t j = 0; j < NP * NST; j++) free(dst[j]);
    }
    for (size_t j = 0; j < NP * NST; j++)
      for (size_t e = 0; e < counts[j % NP]; e++)
        CHECK(seen[j][e] == 1, "world %d: state %zu tensor %zu element %zu held %zu times", world,
              j / NP, j % NP, e, seen[j][e]);
  }
  /* a range outside a tensor is refused with the numbers */
  size_t begin[NP] = {0, 0, 10}, count[NP] = {0, 1, 3};
  float *dst[NP * NST] = {0};
  CHECK(elastic_take_shard(file, &v, begin, count, NP, dst, err, sizeof err) != 0 &&
        strstr(err, "tensor 2 range [10, 13) outside its 12 elements"), "bad range: %s", err);
  CHECK(elastic_take_shard(file, &v, begin, count, 2, dst, err, sizeof err) != 0 &&
        strstr(err, "2 tensors asked, the checkpoint has 3"), "bad count: %s", err);
  free(file);
  for (size_t j = 0; j < NP * (NST + 1); j++) free(buf[j]);
  return 0;
}

DDP_TEST_PROGRAM("elastic_unit", DDP_TEST_CASE_AS("plan", run_plan, DDP_TEST_NO_MPI),
                 DDP_TEST_CASE_AS("shards", run_shards, DDP_TEST_NO_MPI));
