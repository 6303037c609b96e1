/* Soak test: N non-blocking collectives (default 20,000) with random kinds, sizes,
 * dtypes, ops, algorithms and in/out-of-place, up to W in flight, on verifiable data; every
 * result is checked exactly and resident memory less shared memory must stay flat (end within
 * 5% of the value after a warm-up quarter). Every rank draws the same sequence from one shared seed.
 * SOAK_TRACE=1 prints memory (drained) every 2,000 collectives and the largest mappings.
 *   soak [N] [W] [seed] */
#include <inttypes.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ddp_test.h"

static int rank_, size_;

/* ---- shared random stream (identical on every rank) ------------------------------------ */
static uint64_t rng_state;
static uint64_t rnd(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
static size_t rnd_below(size_t n) { return n ? (size_t)(rnd() % n) : 0; }

/* ---- typed access for the small exact values used here -------------------------------- */
static uint16_t f32_to_f16(float f) { /* exact for the values used: |v| <= 2048, quarters */
  if (f == 0.0f) return 0;
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000, exp = (u >> 23) & 0xff, man = u & 0x7fffff;
  int e = (int)exp - 127 + 15;
  return (uint16_t)(sign | ((uint32_t)e << 10) | (man >> 13));
}
static float f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, man = h & 0x3ff, u;
  if (e == 0 && man == 0) u = sign;
  else if (e == 0) { /* subnormal */
    float f = (float)man / 1024.0f / 16384.0f;
    return sign ? -f : f;
  } else if (e == 31) u = sign | 0x7f800000 | (man << 13);
  else u = sign | ((e - 15 + 127) << 23) | (man << 13);
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static void set_v(void *b, ddp_dtype_t dt, size_t i, double v) {
  switch (dt) {
    case DDP_F32: ((float *)b)[i] = (float)v; break;
    case DDP_F64: ((double *)b)[i] = v; break;
    case DDP_F16: ((uint16_t *)b)[i] = f32_to_f16((float)v); break;
    case DDP_BF16: {
      float f = (float)v;
      uint32_t u;
      memcpy(&u, &f, 4);
      ((uint16_t *)b)[i] = (uint16_t)(u >> 16);
      break;
    }
    case DDP_I32: ((int32_t *)b)[i] = (int32_t)v; break;
    case DDP_I64: ((int64_t *)b)[i] = (int64_t)v; break;
    case DDP_U8: ((uint8_t *)b)[i] = (uint8_t)(int64_t)v; break;
    default: break;
  }
}
static double get_v(const void *b, ddp_dtype_t dt, size_t i) {
  switch (dt) {
    case DDP_F32: return ((const float *)b)[i];
    case DDP_F64: return ((const double *)b)[i];
    case DDP_F16: return f16_to_f32(((const uint16_t *)b)[i]);
    case DDP_BF16: {
      uint32_t u = (uint32_t)((const uint16_t *)b)[i] << 16;
      float f;
      memcpy(&f, &u, 4);
      return f;
    }
    case DDP_I32: return ((const int32_t *)b)[i];
    case DDP_I64: return (double)((const int64_t *)b)[i];
    case DDP_U8: return ((const uint8_t *)b)[i];
    default: return -1e300;
  }
}

static int is_int(ddp_dtype_t dt) { return dt == DDP_I32 || dt == DDP_I64 || dt == DDP_U8; }

/* Input of rank r at element i of operation k: small integers whose sums, products and
 * quarter-averages every dtype (bf16: 8 significant bits) holds exactly. */
static int64_t val(int r, size_t i, uint64_t k, ddp_op_t op, ddp_dtype_t dt) {
  uint64_t h = (uint64_t)r * 5 + i * 3 + k * 7;
  if (op == DDP_AVG && !is_int(dt)) {
    /* base + d_r with the d_r summing to 0: the average is exactly base at any world size
     * (a float average of arbitrary integers over 3 ranks would round). */
    int64_t base = (int64_t)((i * 3 + k * 7) % 7) - 3;
    int64_t d = r < size_ - 1 ? r : -(int64_t)(size_ - 1) * (size_ - 2) / 2;
    return base + d;
  }
  switch (op) {
    case DDP_PROD: return 1 + (int64_t)(((uint64_t)r + i + k) % 2);
    case DDP_MIN:
    case DDP_MAX: return dt == DDP_U8 ? (int64_t)(h % 11) : (int64_t)(h % 11) - 5;
    default: return dt == DDP_U8 ? (int64_t)(h % 7) : (int64_t)(h % 7) - 3;
  }
}
static double expect_reduced(size_t i, uint64_t k, ddp_op_t op, ddp_dtype_t dt) {
  int64_t acc = val(0, i, k, op, dt);
  for (int r = 1; r < size_; r++) {
    int64_t v = val(r, i, k, op, dt);
    if (op == DDP_MIN) acc = v < acc ? v : acc;
    else if (op == DDP_MAX) acc = v > acc ? v : acc;
    else if (op == DDP_PROD) acc *= v;
    else acc += v;
  }
  if (op == DDP_AVG) {
    if (is_int(dt)) return (double)(acc / size_); /* C division, as the library's */
    return (double)acc / size_;
  }
  return (double)acc;
}

/* ---- one slot of the in-flight window ----------------------------------------------------- */
enum { K_ALLREDUCE, K_BROADCAST, K_ALLGATHER, K_REDUCE_SCATTER, K_BARRIER, K_COUNT };
static const char *const kind_names[K_COUNT] = {"allreduce", "broadcast", "allgather",
                                                "reduce_scatter", "barrier"};
typedef struct {
  ddp_request_t *rq;
  int kind, inplace, root;
  uint64_t k;
  size_t count; /* elements: allreduce/broadcast count, allgather send count, rs recv count */
  ddp_dtype_t dt;
  ddp_op_t op;
  void *send, *recv;
  const char *algo;
} slot_t;

static size_t max_elems_;

static size_t draw_count(void) {
  size_t u = rnd_below(100);
  if (u < 3) return 0;
  if (u < 70) return 1 + rnd_below(1024);
  if (u < 95) return 1 + rnd_below(16384);
  return 1 + rnd_below(max_elems_);
}

static void post(ddp_comm_t *comm, slot_t *s, uint64_t k, const char *const *algos, size_t nalgos) {
  static const ddp_dtype_t dts[] = {DDP_F32, DDP_F64, DDP_F16, DDP_BF16, DDP_I32, DDP_I64, DDP_U8};
  static const ddp_op_t ops[] = {DDP_SUM, DDP_AVG, DDP_MIN, DDP_MAX, DDP_PROD};
  size_t u = rnd_below(100);
  s->kind = u < 60 ? K_ALLREDUCE : u < 72 ? K_BROADCAST : u < 84 ? K_ALLGATHER : u < 96 ? K_REDUCE_SCATTER : K_BARRIER;
  s->k = k;
  s->dt = dts[rnd_below(7)];
  s->op = ops[rnd_below(5)];
  s->count = draw_count();
  s->inplace = (int)rnd_below(2);
  s->root = (int)rnd_below((size_t)size_);
  s->algo = nalgos ? algos[rnd_below(nalgos)] : NULL;
  size_t p = (size_t)size_, es = ddp_dtype_size(s->dt);
  if (s->kind == K_ALLGATHER || s->kind == K_REDUCE_SCATTER) s->count = s->count / p + (s->count % 3 == 0);
  ddp_coll_opts_t o;
  ddp_coll_opts_default(&o);
  o.tag = (int)(k & 0x7fffffff);
  s->rq = NULL;
  /* Buffers live exactly as long as their collective, so resident memory measures the
   * library (large blocks go back to the system when freed). */
  size_t bytes = (p * s->count + 1) * es;
  s->send = malloc(bytes);
  s->recv = malloc(bytes);
  if (!s->send || !s->recv) {
    fprintf(stderr, "soak: out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  ddp_status_t st = DDP_OK;
  switch (s->kind) {
    case K_ALLREDUCE: {
      o.algo = s->algo;
      for (size_t i = 0; i < s->count; i++) set_v(s->send, s->dt, i, (double)val(rank_, i, k, s->op, s->dt));
      if (s->inplace) memcpy(s->recv, s->send, s->count * es);
      else memset(s->recv, 0xEE, s->count * es);
      st = ddp_iallreduce(comm, s->inplace ? DDP_IN_PLACE : s->send, s->recv, s->count, s->dt, s->op, &o, &s->rq);
      break;
    }
    case K_BROADCAST:
      for (size_t i = 0; i < s->count; i++)
        set_v(s->recv, s->dt, i, rank_ == s->root ? (double)val(s->root, i, k, DDP_MAX, s->dt) : 99.0);
      st = ddp_ibroadcast(comm, s->recv, s->count, s->dt, s->root, &o, &s->rq);
      break;
    case K_ALLGATHER: {
      void *mine = s->inplace ? (char *)s->recv + (size_t)rank_ * s->count * es : s->send;
      if (!s->inplace) memset(s->recv, 0xEE, p * s->count * es);
      for (size_t i = 0; i < s->count; i++) set_v(mine, s->dt, i, (double)val(rank_, i, k, DDP_MAX, s->dt));
      st = ddp_iallgather(comm, mine, s->recv, s->count, s->dt, &o, &s->rq);
      break;
    }
    case K_REDUCE_SCATTER: {
      void *in = s->inplace ? s->recv : s->send;
      for (size_t i = 0; i < p * s->count; i++) set_v(in, s->dt, i, (double)val(rank_, i, k, s->op, s->dt));
      if (!s->inplace) memset(s->recv, 0xEE, s->count * es);
      st = ddp_ireduce_scatter(comm, in, s->recv, s->count, s->dt, s->op, &o, &s->rq);
      break;
    }
    default: st = ddp_ibarrier(comm, &s->rq); break;
  }
  CHECK(st == DDP_OK, "post #%" PRIu64 " %s count %zu %s %s algo %s: %s", k, kind_names[s->kind],
        s->count, ddp_dtype_name(s->dt), ddp_op_name(s->op), s->algo ? s->algo : "-", ddp_last_error());
}

static size_t verify(const slot_t *s) {
  size_t wrong = 0, p = (size_t)size_;
  switch (s->kind) {
    case K_ALLREDUCE:
      for (size_t i = 0; i < s->count; i++) wrong += get_v(s->recv, s->dt, i) != expect_reduced(i, s->k, s->op, s->dt);
      break;
    case K_BROADCAST:
      for (size_t i = 0; i < s->count; i++) wrong += get_v(s->recv, s->dt, i) != (double)val(s->root, i, s->k, DDP_MAX, s->dt);
      break;
    case K_ALLGATHER:
      for (size_t r = 0; r < p; r++)
        for (size_t i = 0; i < s->count; i++)
          wrong += get_v(s->recv, s->dt, r * s->count + i) != (double)val((int)r, i, s->k, DDP_MAX, s->dt);
      break;
    case K_REDUCE_SCATTER:
      for (size_t i = 0; i < s->count; i++)
        wrong += get_v(s->recv, s->dt, i) != expect_reduced((size_t)rank_ * s->count + i, s->k, s->op, s->dt);
      break;
    default: break;
  }
  return wrong;
}

/* Waits for the slot's collective (if any), checks its result and frees its buffers. */
static void complete(slot_t *s, uint64_t *per_kind, uint64_t *wrong_total, uint64_t *bytes_total) {
  if (!s->send) return;
  ddp_status_t st = ddp_wait(&s->rq);
  CHECK(st == DDP_OK, "#%" PRIu64 " %s: %s", s->k, kind_names[s->kind], ddp_last_error());
  size_t bad = st == DDP_OK ? verify(s) : s->count;
  if (bad && *wrong_total < 10)
    fprintf(stderr, "[rank %d] #%" PRIu64 " %s count %zu %s %s %s algo %s: %zu wrong\n", rank_,
            s->k, kind_names[s->kind], s->count, ddp_dtype_name(s->dt), ddp_op_name(s->op),
            s->inplace ? "in-place" : "out-of-place", s->algo ? s->algo : "-", bad);
  *wrong_total += bad;
  per_kind[s->kind]++;
  *bytes_total += s->count * ddp_dtype_size(s->dt);
  free(s->send);
  free(s->recv);
  s->send = s->recv = NULL;
}

/* SOAK_TRACE: the mappings holding the most resident memory (where growth comes from). */
static void print_top_mappings(uint64_t k) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) return;
  char line[512], name[5][160] = {{0}}, cur[160] = "";
  long top[5] = {0}, rss = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long a, b;
    if (sscanf(line, "%lx-%lx", &a, &b) == 2 && strchr(line, ' ')) {
      char *p = strrchr(line, ' ');
      snprintf(cur, sizeof cur, "%lx %s", a, p && p[1] != '\n' ? p + 1 : "[anon]\n");
      cur[strcspn(cur, "\n")] = '\0';
    } else if (sscanf(line, "Rss: %ld kB", &rss) == 1) {
      for (int i = 0; i < 5; i++)
        if (rss > top[i]) {
          for (int j = 4; j > i; j--) {
            top[j] = top[j - 1];
            memcpy(name[j], name[j - 1], sizeof name[j]);
          }
          top[i] = rss;
          snprintf(name[i], sizeof name[i], "%s", cur);
          break;
        }
    }
  }
  fclose(f);
  for (int i = 0; i < 5; i++) printf("[rank %d] #%" PRIu64 "   %6ld kB %s\n", rank_, k, top[i], name[i]);
}

/* Resident memory from /proc/self/status, in kB: total, private anonymous (heap, anonymous
 * mmaps, thread stacks) and shared memory (the shm algorithm's windows, the node pool). */
typedef struct {
  long rss, anon, shmem;
} mem_t;
static mem_t mem_now(void) {
  mem_t m = {0, 0, 0};
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  while (f && fgets(line, sizeof line, f)) {
    sscanf(line, "VmRSS: %ld kB", &m.rss);
    sscanf(line, "RssAnon: %ld kB", &m.anon);
    sscanf(line, "RssShmem: %ld kB", &m.shmem);
  }
  if (f) fclose(f);
  return m;
}
static long rss_kb(void) { return mem_now().rss; }

int main(int argc, char **argv) {
  ddp_comm_t *comm = NULL;
  if (ddp_init(&argc, &argv, MPI_COMM_NULL, &comm) != DDP_OK) {
    fprintf(stderr, "ddp_init: %s\n", ddp_last_error());
    return 1;
  }
  ddp_comm_rank(comm, &rank_);
  ddp_comm_size(comm, &size_);
  uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 20000;
  size_t w = argc > 2 ? (size_t)strtoul(argv[2], NULL, 10) : 16;
  rng_state = argc > 3 ? strtoull(argv[3], NULL, 10) : 12345;
  if (w < 1) w = 1;
  max_elems_ = (size_t)1 << 18;
  /* A fixed mmap threshold: freed large blocks go back to the system instead of staying in a
   * heap whose size depends on the order of frees, so resident memory tracks what is live. */
  mallopt(M_MMAP_THRESHOLD, 256 * 1024);
  mallopt(M_TRIM_THRESHOLD, 256 * 1024);
  /* Allreduce algorithms usable on this communicator (the same on every rank). */
  const char *algos[16];
  size_t nalgos = 0;
  for (const char *const *a = ddp_allreduce_algos(); *a && nalgos < 16; a++) {
    const char *name = NULL;
    ddp_coll_opts_t o;
    ddp_coll_opts_default(&o);
    o.algo = *a;
    float probe[64];
    if (ddp_allreduce_choice(comm, probe, 64, DDP_F32, &o, &name) == DDP_OK) algos[nalgos++] = *a;
  }
  slot_t *slots = calloc(w, sizeof *slots);
  /* Priming: every kind and algorithm once at the largest size, in and out of place, so
   * scratch buffers and pools reach their final size before resident memory is sampled
   * (otherwise each new record size grows a cache, which is not a leak). */
  {
    size_t big = max_elems_ * (size_t)size_;
    double *a = calloc(big, sizeof *a), *b = calloc(big, sizeof *b);
    for (size_t i = 0; i <= nalgos; i++)
      for (int ip = 0; ip < 2; ip++) {
        ddp_coll_opts_t o;
        ddp_coll_opts_default(&o);
        o.algo = i < nalgos ? algos[i] : NULL;
        CHECK_OK(ddp_allreduce(comm, ip ? DDP_IN_PLACE : a, b, max_elems_, DDP_F64, DDP_SUM, &o));
      }
    for (int ip = 0; ip < 2; ip++) {
      CHECK_OK(ddp_broadcast(comm, a, max_elems_, DDP_F64, 0, NULL));
      CHECK_OK(ddp_allgather(comm, ip ? (void *)(b + (size_t)rank_ * max_elems_) : a, b,
                             max_elems_, DDP_F64, NULL));
      CHECK_OK(ddp_reduce_scatter(comm, ip ? b : a, b, max_elems_, DDP_F64, DDP_SUM, NULL));
    }
    free(a);
    free(b);
  }
  uint64_t per_kind[K_COUNT] = {0}, wrong_total = 0, bytes_total = 0;
  mem_t warm = {0, 0, 0};
  long rss_max = 0;
  uint64_t warm_at = n / 4; /* caches, pools and heap arenas settle in the first quarter */
  int trace = getenv("SOAK_TRACE") != NULL;
  double t0 = MPI_Wtime();
  for (uint64_t k = 0; k < n; k++) {
    if (k == warm_at) { /* drain, so both samples see nothing in flight */
      for (size_t i = 0; i < w; i++) complete(&slots[i], per_kind, &wrong_total, &bytes_total);
      warm = mem_now();
    }
    if (trace && k > 0 && k % 2000 == 0) {
      for (size_t i = 0; i < w; i++) complete(&slots[i], per_kind, &wrong_total, &bytes_total);
      struct mallinfo2 mi = mallinfo2();
      mem_t m = mem_now();
      printf("[rank %d] #%" PRIu64 " drained RSS %ld kB (private %ld, shared %ld; heap in use %zu kB, "
             "free in heap %zu kB, mmapped %zu kB)\n", rank_, k, m.rss, m.anon, m.shmem,
             mi.uordblks / 1024, mi.fordblks / 1024, mi.hblkhd / 1024);
      if (k % 10000 == 0) print_top_mappings(k);
    }
    slot_t *s = &slots[k % w];
    complete(s, per_kind, &wrong_total, &bytes_total); /* the oldest, whose slot is reused */
    if (k > warm_at && k % 500 == 0) {
      long r = rss_kb();
      if (r > rss_max) rss_max = r;
      if (trace && k % 2000 == 0) printf("[rank %d] #%" PRIu64 " RSS %ld kB\n", rank_, k, r);
    }
    post(comm, s, k, algos, nalgos);
  }
  for (size_t i = 0; i < w; i++) complete(&slots[(n + i) % w], per_kind, &wrong_total, &bytes_total);
  double dt = MPI_Wtime() - t0;
  mem_t end = mem_now();
  if (end.rss > rss_max) rss_max = end.rss;
  CHECK(wrong_total == 0, "%" PRIu64 " wrong elements", wrong_total);
  /* The check is on resident memory less shared memory, where a leak shows (heap, anonymous
   * mmaps, stacks; plus the mapped libraries, which do not change). Shared-memory windows are
   * counted in RSS page by page as offsets are first touched, which goes on as new sizes and
   * slices come up; that is bounded by the windows' size (reported) and is not a leak. */
  long own_warm = warm.rss - warm.shmem, own_end = end.rss - end.shmem;
  double growth = own_warm > 0 ? (double)(own_end - own_warm) / (double)own_warm : 0.0;
  double growth_all = 0.0;
  MPI_Allreduce(&growth, &growth_all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  /* Short runs (the quick variant) are too short for a steady state: checked from 10,000 on. */
  CHECK(n < 10000 || growth <= 0.05,
        "resident memory less shared memory grew %.1f%% (%ld kB after warm-up, %ld kB at the end)",
        100.0 * growth, own_warm, own_end);
  if (rank_ == 0) {
    printf("# soak: np %d, %" PRIu64 " collectives, window %zu, seed %s, algorithms:", size_, n, w,
           argc > 3 ? argv[3] : "12345");
    for (size_t i = 0; i < nalgos; i++) printf(" %s", algos[i]);
    printf("\n# %-14s %8s\n", "kind", "count");
    for (int i = 0; i < K_COUNT; i++) printf("  %-14s %8" PRIu64 "\n", kind_names[i], per_kind[i]);
    printf("# %.1f s, %.0f collectives/s, %.1f MB reduced per rank, %" PRIu64 " wrong\n", dt,
           (double)n / dt, (double)bytes_total / 1e6, wrong_total);
    printf("# rank 0 RSS less shared memory: %ld kB after warm-up (#%" PRIu64 "), %ld kB at the "
           "end (private anonymous %ld -> %ld kB); largest growth over ranks %+.2f%% (limit 5%%)\n",
           own_warm, warm_at, own_end, warm.anon, end.anon, 100.0 * growth_all);
    printf("# rank 0 total RSS: %ld kB after warm-up, %ld kB max (collectives in flight), %ld kB "
           "at the end, of which shared memory %ld kB -> %ld kB\n",
           warm.rss, rss_max, end.rss, warm.shmem, end.shmem);
  }
  free(slots);
  int rc = ddp_test_finish("soak");
  ddp_finalize(&comm);
  return rc;
}
