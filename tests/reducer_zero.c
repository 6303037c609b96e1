/* Sharded reducer (opts.shard = 1, ZeRO-1, and 2, ZeRO-2) against the allreduce reducer, in lockstep on the
 * same integer-valued gradients: after each finish this rank's ranges hold the exact sums, the
 * ranges of all ranks partition every parameter, and after the shard-only update and the
 * parameter allgather every rank holds bitwise the parameters the allreduce reducer's full
 * update gives. Small bucket caps give several buckets, and the first iteration's ready order
 * differs from the registration order, so the buckets are rebuilt after it. Then the misuses:
 * queries before the first finish, an allgather while a reduce or another allgather is in
 * flight, a parameter read or a backward before its allgather completed, bad options.
 * ZeRO-2: after param_wait the pages of a bucket outside this rank's block are given back
 * (not resident, read as zeros), and the next step's sums are still exact. */
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ddp_test.h"

#define NP 6
#define STEPS 4
static const size_t COUNTS[NP] = {37, 1000, 5, 3001, 3, 700};
static int g_rank, g_size;
static ddp_comm_t *g_comm = NULL; /* the harness's communicator */

/* Rank r's gradient of element k of parameter i at step s: a small integer. */
static float grad_of(int r, int s, size_t i, size_t k) {
  return (float)((int)((k * 7 + i * 3) % 11) - 5 + (r + 1) * (int)((k + (size_t)s) % 3) + s);
}

static float init_of(size_t i, size_t k) { return (float)((int)((k * 5 + i) % 13) - 6); }

static ddp_status_t make(float **data, int shard, ddp_reducer_t **r) {
  ddp_param_t p[NP];
  char names[NP][16];
  for (size_t i = 0; i < NP; i++) {
    snprintf(names[i], sizeof names[i], "p%zu", i);
    p[i] = (ddp_param_t){.data = data[i], .count = COUNTS[i], .dtype = DDP_F32, .mem = DDP_MEM_HOST,
                         .name = names[i]};
  }
  ddp_reducer_opts_t o;
  ddp_reducer_opts_default(&o);
  o.bucket_cap_mb = 8192.0 / 1048576.0; /* 2048 floats: several buckets */
  o.first_bucket_mb = 4096.0 / 1048576.0;
  o.predivided = 1; /* plain sums: exact for integers */
  o.shard = shard;
  return ddp_reducer_create(g_comm, p, NP, &o, r);
}

static uint64_t hash_floats(float *const *data) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < NP; i++)
    for (size_t k = 0; k < COUNTS[i]; k++) {
      uint32_t u;
      memcpy(&u, &data[i][k], sizeof u);
      h = (h ^ u) * 1099511628211ULL;
    }
  return h;
}

/* One backward: every gradient written into its view, marked ready in registration order. */
static void backward(ddp_reducer_t *r, int s) {
  for (size_t i = 0; i < NP; i++) {
    float *g = NULL;
    CHECK_OK(ddp_reducer_grad(r, i, (void **)&g));
    if (!g) return;
    for (size_t k = 0; k < COUNTS[i]; k++) g[k] = grad_of(g_rank, s, i, k);
    CHECK_OK(ddp_reducer_grad_ready(r, i));
  }
}

static void test_equivalence(int shard) {
  float *pa[NP], *pb[NP];
  for (size_t i = 0; i < NP; i++) {
    pa[i] = malloc(COUNTS[i] * sizeof(float));
    pb[i] = malloc(COUNTS[i] * sizeof(float));
    for (size_t k = 0; k < COUNTS[i]; k++) pa[i][k] = pb[i][k] = init_of(i, k) + (float)g_rank;
  }
  ddp_reducer_t *ra = NULL, *rb = NULL;
  CHECK_OK(make(pa, 0, &ra));
  CHECK_OK(make(pb, shard, &rb));
  if (!ra || !rb) return;
  /* Before the first finish the shards are not fixed. */
  size_t begin = 7, count = 7;
  CHECK_ST(ddp_reducer_shard_range(rb, 0, &begin, &count), DDP_ESTATE);
  CHECK_MSG("before the first synced");
  CHECK(begin == 7 && count == 7, "shard_range wrote its outputs on error");
  CHECK_ST(ddp_reducer_allgather_params(rb), DDP_ESTATE);
  CHECK_ST(ddp_reducer_shard_range(ra, 0, &begin, &count), DDP_ESTATE); /* not sharded */
  CHECK_MSG("opts.shard = 1 or 2");

  size_t total = 0;
  for (size_t i = 0; i < NP; i++) total += COUNTS[i];
  int *owners = calloc(total, sizeof *owners);
  for (int s = 0; s < STEPS; s++) {
    backward(ra, s);
    CHECK_OK(ddp_reducer_finish(ra));
    backward(rb, s);
    if (s > 0) { /* a reduce is in flight: no allgather now */
      CHECK_ST(ddp_reducer_allgather_params(rb), DDP_ESTATE);
      CHECK_MSG("while gradients are being reduced");
    }
    CHECK_OK(ddp_reducer_finish(rb));
    /* Reference update on every element; sharded update on this rank's ranges only. */
    size_t off = 0, wrong = 0;
    memset(owners, 0, total * sizeof *owners);
    for (size_t i = 0; i < NP; i++) {
      float *ga = NULL, *gb = NULL;
      CHECK_OK(ddp_reducer_grad(ra, i, (void **)&ga));
      CHECK_OK(ddp_reducer_grad(rb, i, (void **)&gb));
      CHECK_OK(ddp_reducer_shard_range(rb, i, &begin, &count));
      CHECK(begin + count <= COUNTS[i], "p%zu: range [%zu, +%zu) outside %zu elements", i, begin, count,
            COUNTS[i]);
      for (size_t k = 0; k < COUNTS[i]; k++) {
        float sum = 0.0f;
        for (int r = 0; r < g_size; r++) sum += grad_of(r, s, i, k);
        if (ga[k] != sum) wrong++;
        pa[i][k] -= ga[k] * 0.125f;
      }
      for (size_t k = begin; k < begin + count && k < COUNTS[i]; k++) {
        float sum = 0.0f;
        for (int r = 0; r < g_size; r++) sum += grad_of(r, s, i, k);
        if (gb[k] != sum) wrong++;
        pb[i][k] -= gb[k] * 0.125f;
        owners[off + k] = 1;
      }
      off += COUNTS[i];
    }
    CHECK(wrong == 0, "step %d: %zu gradient elements differ from the exact sums", s, wrong);
    MPI_Allreduce(MPI_IN_PLACE, owners, (int)total, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    size_t bad = 0;
    for (size_t e = 0; e < total; e++) bad += owners[e] != 1;
    CHECK(bad == 0, "step %d: %zu elements owned by no rank or by several", s, bad);

    CHECK_OK(ddp_reducer_allgather_params(rb));
    CHECK_ST(ddp_reducer_allgather_params(rb), DDP_ESTATE); /* one in flight already */
    CHECK_MSG("in flight");
    void *data = NULL;
    CHECK_ST(ddp_reducer_param(rb, 1, &data), DDP_ESTATE); /* read before the wait */
    CHECK_MSG("'p1'");
    CHECK(data == NULL, "param wrote its output on error");
    CHECK_ST(ddp_reducer_grad_ready(rb, 0), DDP_ESTATE); /* backward before the wait */
    CHECK_MSG("ddp_reducer_param_wait");
    CHECK_ST(ddp_reducer_zero_grad(rb), DDP_ESTATE);
    /* Forward order: wait for each parameter before it is read. */
    for (size_t i = 0; i < NP; i++) {
      CHECK_OK(ddp_reducer_param_wait(rb, i));
      CHECK_OK(ddp_reducer_param(rb, i, &data));
      CHECK(data == pb[i], "param %zu: %p is not the registered buffer", i, data);
    }
    CHECK_OK(ddp_reducer_param_wait(rb, SIZE_MAX)); /* nothing left: returns at once */
    CHECK(hash_floats(pa) == hash_floats(pb), "step %d: sharded parameters differ from the allreduce reducer's", s);
    CHECK(ddp_test_same_everywhere(hash_floats(pb)), "step %d: parameters differ across ranks", s);
  }
  ddp_reducer_stats_t st;
  CHECK_OK(ddp_reducer_stats(rb, &st));
  CHECK(st.rebuilt && st.nbuckets >= 3, "expected a rebuild and several buckets (rebuilt %d, %zu buckets)",
        st.rebuilt, st.nbuckets);
  /* An allgather nobody waited for is completed by destroy. */
  CHECK_OK(ddp_reducer_allgather_params(rb));
  CHECK_OK(ddp_reducer_destroy(&rb));
  CHECK_OK(ddp_reducer_destroy(&ra));
  free(owners);
  for (size_t i = 0; i < NP; i++) {
    free(pa[i]);
    free(pb[i]);
  }
}

static void test_bad_options(void) {
  float w[16] = {0};
  ddp_param_t p = {.data = w, .count = 16, .dtype = DDP_F32, .mem = DDP_MEM_HOST, .name = "w"};
  ddp_reducer_opts_t o;
  ddp_reducer_t *r = NULL;
  ddp_reducer_opts_default(&o);
  CHECK(o.shard == 0, "shard defaults to %d", o.shard);
  o.shard = 3;
  CHECK_ST(ddp_reducer_create(g_comm, &p, 1, &o, &r), DDP_EINVAL);
  CHECK_MSG("opts.shard 3");
  o.shard = -1;
  CHECK_ST(ddp_reducer_create(g_comm, &p, 1, &o, &r), DDP_EINVAL);
  o.shard = 1;
  o.hook = DDP_HOOK_FP16;
  ddp_status_t st = ddp_reducer_create(g_comm, &p, 1, &o, &r);
  CHECK(st == DDP_ENOTSUP, "shard with the fp16 hook: %s", ddp_strerror(st));
  CHECK_MSG("hook");
  o.hook = DDP_HOOK_NONE;
  o.grad_as_bucket_view = 0;
  p.grad = w;
  st = ddp_reducer_create(g_comm, &p, 1, &o, &r);
  CHECK(st == DDP_ENOTSUP, "shard with views off: %s", ddp_strerror(st));
  CHECK_MSG("grad_as_bucket_view");
  CHECK(r == NULL, "a reducer was created from bad options");
  CHECK_ST(ddp_reducer_shard_range(NULL, 0, &(size_t){0}, &(size_t){0}), DDP_EINVAL);
  CHECK_ST(ddp_reducer_allgather_params(NULL), DDP_EINVAL);
  CHECK_ST(ddp_reducer_param_wait(NULL, 0), DDP_EINVAL);
  CHECK_ST(ddp_reducer_param(NULL, 0, &(void *){NULL}), DDP_EINVAL);
  /* Out-of-range indices on a live sharded reducer. */
  o.grad_as_bucket_view = 1;
  CHECK_OK(ddp_reducer_create(g_comm, &p, 1, &o, &r));
  if (!r) return;
  CHECK_ST(ddp_reducer_param_wait(r, 5), DDP_EINVAL);
  CHECK_MSG("parameter index 5");
  CHECK_ST(ddp_reducer_param(r, 1, &(void *){NULL}), DDP_EINVAL);
  CHECK_ST(ddp_reducer_param(r, 0, NULL), DDP_EINVAL);
  CHECK_ST(ddp_reducer_shard_range(r, 0, NULL, &(size_t){0}), DDP_EINVAL);
  CHECK_MSG("begin");
  CHECK_OK(ddp_reducer_destroy(&r));
}

/* ZeRO-2 on one large bucket: after param_wait the whole pages outside this rank's block are
 * released (not resident per mincore, read as zeros, counted in the stats), this rank's block
 * still holds its parameters, and the next backward + finish gives the exact sums again. */
static void test_release(void) {
  const size_t n = 300000; /* 1.2 MB: one bucket, many pages per block */
  float *w = malloc(n * sizeof *w);
  for (size_t k = 0; k < n; k++) w[k] = (float)(k % 7) + 1.0f;
  ddp_param_t p = {.data = w, .count = n, .dtype = DDP_F32, .mem = DDP_MEM_HOST, .name = "big"};
  ddp_reducer_opts_t o;
  ddp_reducer_opts_default(&o);
  o.predivided = 1;
  o.shard = 2;
  ddp_reducer_t *r = NULL;
  CHECK_OK(ddp_reducer_create(g_comm, &p, 1, &o, &r));
  if (!r) return;
  long page = sysconf(_SC_PAGESIZE);
  for (int s = 0; s < 3; s++) {
    float *g = NULL;
    CHECK_OK(ddp_reducer_grad(r, 0, (void **)&g));
    for (size_t k = 0; k < n; k++) g[k] = (float)((k + (size_t)s) % 5) * (float)(g_rank + 1);
    CHECK_OK(ddp_reducer_grad_ready(r, 0));
    CHECK_OK(ddp_reducer_finish(r));
    CHECK_OK(ddp_reducer_grad(r, 0, (void **)&g));
    size_t begin = 0, count = 0, wrong = 0;
    CHECK_OK(ddp_reducer_shard_range(r, 0, &begin, &count));
    float mult = (float)(g_size * (g_size + 1) / 2);
    for (size_t k = begin; k < begin + count; k++) wrong += g[k] != (float)((k + (size_t)s) % 5) * mult;
    CHECK(wrong == 0, "step %d: %zu averaged gradients wrong after a release", s, wrong);
    for (size_t k = begin; k < begin + count; k++) w[k] -= 0.5f * g[k];
    CHECK_OK(ddp_reducer_allgather_params(r));
    CHECK_OK(ddp_reducer_param_wait(r, SIZE_MAX));
    ddp_reducer_stats_t st;
    CHECK_OK(ddp_reducer_stats(r, &st));
    size_t others = (n - count) * sizeof(float);
    if (g_size == 1) {
      CHECK(st.released_bytes == 0, "one rank released %zu bytes", st.released_bytes);
      continue;
    }
    /* Everything but at most 4 partial pages (two per gap) of the others' blocks. */
    CHECK(st.released_bytes + 4 * (size_t)page >= others && st.released_bytes <= others + 4 * (size_t)page,
          "step %d: released %zu bytes, the others' blocks hold %zu", s, st.released_bytes, others);
    /* The first whole page after this rank's block (or before it, for the last rank). */
    uintptr_t lo = (uintptr_t)(g + begin + count), hi = (uintptr_t)(g + n);
    if (g_rank == g_size - 1) lo = (uintptr_t)g, hi = (uintptr_t)(g + begin);
    uintptr_t a = (lo + (uintptr_t)page - 1) & ~(uintptr_t)(page - 1);
    CHECK(a + (uintptr_t)page <= hi, "no whole page outside this rank's block");
    if (a + (uintptr_t)page <= hi) {
      unsigned char vec = 1;
      CHECK(mincore((void *)a, (size_t)page, &vec) == 0, "mincore failed");
      CHECK((vec & 1) == 0, "step %d: a released page is still resident", s);
      const float *f = (const float *)a;
      size_t nonzero = 0;
      for (size_t k = 0; k < (size_t)page / sizeof(float); k++) nonzero += f[k] != 0.0f;
      CHECK(nonzero == 0, "step %d: a released page reads %zu nonzero values", s, nonzero);
    }
  }
  uint64_t h = 1469598103934665603ULL;
  for (size_t k = 0; k < n; k++) {
    uint32_t u;
    memcpy(&u, &w[k], sizeof u);
    h = (h ^ u) * 1099511628211ULL;
  }
  CHECK(ddp_test_same_everywhere(h), "parameters differ across ranks after the allgathers");
  CHECK_OK(ddp_reducer_destroy(&r));
  free(w);
}

static int run_zero(ddp_test_t *t) {
  g_comm = t->comm;
  g_rank = t->rank;
  g_size = t->size;
  test_equivalence(1);
  test_equivalence(2);
  test_release();
  test_bad_options();
  return 0;
}

DDP_TEST_PROGRAM("reducer_zero", DDP_TEST_CASE("zero", run_zero));
