/* allreduce_bench: the nccl-tests of mpiddp. Sweeps message sizes for one collective, runs
 * several algorithms side by side in the same job, with the MPI library's own call as "raw"
 * (the reference: MPI_Allreduce as an application would call it, without mpiddp), prints
 * nccl-tests style tables (time, algbw, busbw, #wrong for out-of-place and in-place), a
 * comparison table of every algorithm's busbw divided by raw's, and optionally JSON records.
 *
 *   mpirun -np 2 allreduce_bench -b 8 -e 64M -f 4 -A raw,mpi,auto -M shared -J out.json
 *
 * Flags (as nccl-tests where they exist):
 *   -b SIZE  smallest size in bytes (K/M/G suffixes), default 8
 *   -e SIZE  largest size, default 64M
 *   -f N     multiplication factor between sizes, default 4
 *   -n N     timed iterations per size, default 20 (fewer for large sizes, see -t)
 *   -w N     warm-up iterations, default 5
 *   -c 0|1   check every result (default 1)
 *   -d TYPE  f32 f64 f16 bf16 i32 i64 u8 (default f32)
 *   -o OP    sum avg min max prod (default sum)
 *   -C COLL  allreduce | broadcast | allgather | reducescatter (default allreduce)
 *   -A LIST  algorithms, comma separated: raw (MPI's own call, no mpiddp), mpi, ring, rhd,
 *            shm, hier, auto; default: raw,mpi,ring,rhd,shm,hier,auto (those that can run).
 *            The comparison table divides by raw (by the first entry when raw is not listed
 *            or cannot run, e.g. with -M cuda).
 *            Collectives other than allreduce accept raw and mpi (mpiddp's call).
 *            With -M cuda the entries are device transports side by side: staged, mpi
 *            (CUDA-aware MPI), nccl, auto, optionally with an algorithm (staged:ring, mpi:rhd);
 *            default staged,mpi,nccl (those that can run here).
 *   -M MEM   host (malloc), shared (ddp_alloc: node-shared pool), cuda (device buffers)
 *   -t SEC   time budget per size and algorithm for the timed loop (default 2.0 s)
 *   -R N     repeat each timed loop N times and keep the fastest (default 1; for machines
 *            shared with other work, where preemption inflates averages)
 *   -P PLACE both (default), in or out: in-place and/or out-of-place calls (a slow link's
 *            sweep takes half the time with one)
 *   -J FILE  JSON records (also --json FILE)
 * Exit status 1 if any result was wrong. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app_opts.h"
#include "ddp.h"
#include "membw.h"

enum { C_ALLREDUCE, C_BROADCAST, C_ALLGATHER, C_REDUCESCATTER };
static const char *const coll_names[] = {"allreduce", "broadcast", "allgather", "reducescatter"};
enum { M_HOST, M_SHARED, M_CUDA };

typedef struct {
  size_t minb, maxb;
  double factor;
  int iters, warmup, check;
  ddp_dtype_t dtype;
  ddp_op_t op;
  int coll, mem;
  char algos[256];
  double budget;
  int reps;
  int place; /* bit 0: out of place, bit 1: in place */
  const char *json;
} args_t;

typedef struct {
  char algo[16];
  size_t bytes, count;
  int inplace;
  double time_us, algbw, busbw;
  long wrong;
  double bwpct; /* share of the memory bound (membw.h), -1 without one */
} rec_t;

static int rank_, size_;
static ddp_comm_t *comm_ = NULL;
static MPI_Comm raw_comm;

/* A byte count with an optional K/M/G suffix (and B): 8, 64M, 1.5G, 256KB. */
static int parse_size(const char *s, void *target) {
  char *end = NULL;
  double v = strtod(s, &end);
  if (end == s || !(v >= 0)) return -1;
  switch (*end) {
    case 'k': case 'K': v *= 1024; end++; break;
    case 'm': case 'M': v *= 1024 * 1024; end++; break;
    case 'g': case 'G': v *= 1024.0 * 1024 * 1024; end++; break;
    default: break;
  }
  if (*end == 'B' || *end == 'b') end++;
  if (*end || !(v < 0x1p63)) return -1;
  *(size_t *)target = (size_t)v;
  return 0;
}

static int parse_dtype(const char *s, void *target) {
  return ddp_dtype_parse(s, (ddp_dtype_t *)target) == DDP_OK ? 0 : -1;
}

static int parse_op(const char *s, void *target) {
  return ddp_op_parse(s, (ddp_op_t *)target) == DDP_OK ? 0 : -1;
}

static void usage(void) {
  if (rank_ == 0)
    fprintf(stderr, "usage: allreduce_bench [-b min] [-e max] [-f factor] [-n iters] [-w warmup] "
                    "[-c 0|1] [-d dtype] [-o op] [-C allreduce|broadcast|allgather|reducescatter] "
                    "[-A algo,...] [-M host|shared|cuda] [-t seconds] [-R reps] [-P both|in|out] "
                    "[-J file.json]\n");
}

/* Returns 0 ok, -2 help printed, -1 error (said on rank 0). */
static int parse_args(int argc, char **argv, args_t *a) {
  *a = (args_t){.minb = 8, .maxb = (size_t)64 << 20, .factor = 4, .iters = 20, .warmup = 5,
                .check = 1, .dtype = DDP_F32, .op = DDP_SUM, .coll = C_ALLREDUCE, .mem = M_HOST,
                .budget = 2.0, .reps = 1, .place = 3};
  static const char *const colls[] = {"allreduce", "broadcast", "allgather", "reducescatter",
                                      "reduce_scatter", NULL},
                           *const mems[] = {"host", "shared", "cuda", NULL},
                           *const places[] = {"both", "in", "out", NULL};
  static const int coll_ids[] = {C_ALLREDUCE, C_BROADCAST, C_ALLGATHER, C_REDUCESCATTER, C_REDUCESCATTER},
                   mem_ids[] = {M_HOST, M_SHARED, M_CUDA}, place_bits[] = {3, 2, 1};
  const char *algos = NULL;
  const app_opt_t table[] = {
      APP_CUSTOM("-b", &a->minb, parse_size, "a size in bytes (K, M, G suffixes)"),
      APP_CUSTOM("-e", &a->maxb, parse_size, "a size in bytes (K, M, G suffixes)"),
      APP_DOUBLE("-f", &a->factor, 1.0001, 1e30), APP_INT("-n", &a->iters, 1, INT_MAX),
      APP_INT("-w", &a->warmup, 0, INT_MAX), APP_INT("-c", &a->check, 0, 1),
      APP_DOUBLE("-t", &a->budget, 1e-6, 1e30), APP_INT("-R", &a->reps, 1, INT_MAX),
      APP_CUSTOM("-d", &a->dtype, parse_dtype, "a type (f32 f64 f16 bf16 i32 i64 u8)"),
      APP_CUSTOM("-o", &a->op, parse_op, "an op (sum avg min max prod)"),
      APP_ENUM("-C", &a->coll, colls, coll_ids), APP_STR("-A", &algos),
      APP_ENUM("-M", &a->mem, mems, mem_ids), APP_ENUM("-P", &a->place, places, place_bits),
      APP_STR("-J|--json", &a->json), APP_OPTS_END};
  int pr = app_opts_parse("allreduce_bench", table, argc, argv, rank_ == 0 ? stderr : NULL);
  if (pr == APP_OPTS_HELP) return usage(), -2;
  if (pr != APP_OPTS_OK) return -1;
  if (algos && snprintf(a->algos, sizeof a->algos, "%s", algos) >= (int)sizeof a->algos) {
    if (rank_ == 0) fprintf(stderr, "allreduce_bench: -A: the list is longer than %zu characters\n", sizeof a->algos - 1);
    return -1;
  }
  if (a->minb > a->maxb) {
    if (rank_ == 0) fprintf(stderr, "allreduce_bench: -b %zu is above -e %zu\n", a->minb, a->maxb);
    return -1;
  }
  return 0;
}

/* ---- data ---------------------------------------------------------------------------------- */
static int64_t val(int r, size_t i, ddp_op_t op, ddp_dtype_t dt) {
  int64_t k = (int64_t)((size_t)r * 5 + i * 3);
  if (op == DDP_PROD) return 1 + (int64_t)(((size_t)r + i) % 2);
  if (op == DDP_MIN || op == DDP_MAX) return dt == DDP_U8 ? k % 11 : k % 11 - 5;
  return dt == DDP_U8 ? k % 7 : k % 7 - 3;
}

static uint16_t f32_to_half(float f, int bf16) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if (bf16) return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  _Float16 h = (_Float16)f;
  uint16_t o;
  memcpy(&o, &h, 2);
  return o;
}

static double half_to_f64(uint16_t h, int bf16) {
  if (bf16) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  _Float16 x;
  memcpy(&x, &h, 2);
  return (double)x;
}

static void set_el(void *b, ddp_dtype_t dt, size_t i, double v) {
  switch (dt) {
    case DDP_F32: ((float *)b)[i] = (float)v; break;
    case DDP_F64: ((double *)b)[i] = v; break;
    case DDP_F16: ((uint16_t *)b)[i] = f32_to_half((float)v, 0); break;
    case DDP_BF16: ((uint16_t *)b)[i] = f32_to_half((float)v, 1); break;
    case DDP_I32: ((int32_t *)b)[i] = (int32_t)v; break;
    case DDP_I64: ((int64_t *)b)[i] = (int64_t)v; break;
    default: ((uint8_t *)b)[i] = (uint8_t)(int64_t)v; break;
  }
}

static double get_el(const void *b, ddp_dtype_t dt, size_t i) {
  switch (dt) {
    case DDP_F32: return ((const float *)b)[i];
    case DDP_F64: return ((const double *)b)[i];
    case DDP_F16: return half_to_f64(((const uint16_t *)b)[i], 0);
    case DDP_BF16: return half_to_f64(((const uint16_t *)b)[i], 1);
    case DDP_I32: return ((const int32_t *)b)[i];
    case DDP_I64: return (double)((const int64_t *)b)[i];
    default: return ((const uint8_t *)b)[i];
  }
}

/* Expected element i of the reduction over all ranks. Returns the tolerance in *tol. */
static double expect(size_t i, ddp_op_t op, ddp_dtype_t dt, double *tol) {
  int64_t acc = val(0, i, op, dt);
  for (int r = 1; r < size_; r++) {
    int64_t v = val(r, i, op, dt);
    if (op == DDP_MIN) acc = v < acc ? v : acc;
    else if (op == DDP_MAX) acc = v > acc ? v : acc;
    else if (op == DDP_PROD) acc *= v;
    else acc += v;
  }
  if (dt == DDP_U8) acc &= 0xff;
  *tol = 0;
  if (op != DDP_AVG) return (double)acc;
  switch (dt) {
    case DDP_I32: case DDP_I64: return (double)(acc / size_);
    case DDP_U8: return (double)((uint64_t)acc / (uint64_t)size_);
    case DDP_F32: return (double)((float)acc / (float)size_);
    case DDP_F64: return (double)acc / size_;
    default: *tol = 0.01 * fabs((double)acc / size_) + 1e-3; return (double)acc / size_;
  }
}

/* ---- buffers -------------------------------------------------------------------------------- */
typedef struct {
  void *send, *recv; /* where the collective runs (host, pool or device) */
  void *hs, *hr;     /* host copies for filling and checking (== send/recv unless cuda) */
  size_t sbytes, rbytes;
} bufs_t;

static int to_dev(const args_t *a, void *dst, const void *src, size_t n) {
  if (a->mem != M_CUDA || dst == src || n == 0) return 0;
  if (ddp_memcpy_async(comm_, dst, src, n, NULL) != DDP_OK) return -1;
  return ddp_stream_synchronize(comm_, NULL) == DDP_OK ? 0 : -1;
}

/* ---- one measurement ------------------------------------------------------------------------ */
/* Under -M cuda an -A entry names a device transport, optionally with an algorithm:
 * "staged", "mpi" (CUDA-aware MPI), "nccl", "auto", or "staged:ring", "mpi:rhd", ...
 * On host memory it is an algorithm name. */
static int is_transport(const char *t) {
  ddp_transport_t x;
  return ddp_transport_parse(t, &x) == DDP_OK;
}

static void split_entry(const args_t *a, const char *entry, char *xport, size_t xcap,
                        char *algo, size_t acap) {
  xport[0] = '\0';
  snprintf(algo, acap, "%s", entry);
  if (a->mem != M_CUDA) return;
  const char *colon = strchr(entry, ':');
  if (colon) {
    snprintf(xport, xcap, "%.*s", (int)(colon - entry), entry);
    snprintf(algo, acap, "%s", colon + 1);
  } else if (is_transport(entry)) {
    snprintf(xport, xcap, "%s", entry);
    snprintf(algo, acap, "auto");
  }
}

/* Selects the entry's transport (every rank, same point, nothing in flight). */
static ddp_status_t select_entry(const args_t *a, const char *entry, char *algo, size_t acap) {
  char xport[16];
  split_entry(a, entry, xport, sizeof xport, algo, acap);
  if (!xport[0]) return DDP_OK;
  ddp_transport_t t = DDP_TRANSPORT_AUTO;
  ddp_status_t st = ddp_transport_parse(xport, &t);
  return st == DDP_OK ? ddp_device_set_transport(comm_, t) : st;
}

/* One -A entry resolved once per measurement, so that the timed loop calls MPI or mpiddp and
 * nothing else (no string handling per call). */
typedef struct call {
  int raw;
  char alg[32];
  ddp_coll_opts_t o;
  MPI_Datatype mt;
  MPI_Op mo;
} call_t;

static ddp_status_t prepare_call(const args_t *a, const char *entry, call_t *k) {
  memset(k, 0, sizeof *k);
  k->raw = !strcmp(entry, "raw");
  ddp_status_t st = select_entry(a, entry, k->alg, sizeof k->alg);
  ddp_coll_opts_default(&k->o);
  if (!k->raw && st == DDP_OK) st = ddp_algo_parse(k->alg, &k->o.algo);
  k->o.mem = a->mem == M_CUDA ? DDP_MEM_CUDA : DDP_MEM_HOST;
  k->mt = a->dtype == DDP_F32 ? MPI_FLOAT : a->dtype == DDP_F64 ? MPI_DOUBLE
          : a->dtype == DDP_I32 ? MPI_INT32_T : a->dtype == DDP_I64 ? MPI_INT64_T : MPI_UINT8_T;
  k->mo = a->op == DDP_MIN ? MPI_MIN : a->op == DDP_MAX ? MPI_MAX
          : a->op == DDP_PROD ? MPI_PROD : MPI_SUM;
  return st;
}

static ddp_status_t run_once(const args_t *a, const call_t *k, bufs_t *b, size_t count,
                             int inplace) {
  int raw = k->raw;
  const ddp_coll_opts_t *op = &k->o;
  MPI_Datatype mt = k->mt;
  MPI_Op mo = k->mo;
  size_t es = ddp_dtype_size(a->dtype);
  switch (a->coll) {
    case C_ALLREDUCE:
      if (raw)
        return MPI_Allreduce(inplace ? MPI_IN_PLACE : b->send, b->recv, (int)count, mt, mo,
                             raw_comm) == MPI_SUCCESS ? DDP_OK : DDP_EMPI;
      return ddp_allreduce(comm_, inplace ? DDP_IN_PLACE : b->send, b->recv, count, a->dtype,
                           a->op, op);
    case C_BROADCAST:
      if (raw)
        return MPI_Bcast(b->recv, (int)(count * es), MPI_BYTE, 0, raw_comm) == MPI_SUCCESS ? DDP_OK : DDP_EMPI;
      return ddp_broadcast(comm_, b->recv, count, a->dtype, 0, op);
    case C_ALLGATHER: {
      void *mine = (char *)b->recv + (size_t)rank_ * count * es;
      if (raw)
        return MPI_Allgather(inplace ? MPI_IN_PLACE : b->send, (int)(count * es), MPI_BYTE,
                             b->recv, (int)(count * es), MPI_BYTE, raw_comm) == MPI_SUCCESS ? DDP_OK : DDP_EMPI;
      return ddp_allgather(comm_, inplace ? mine : b->send, b->recv, count, a->dtype, op);
    }
    default:
      if (raw)
        return MPI_Reduce_scatter_block(inplace ? MPI_IN_PLACE : b->send, b->recv, (int)count, mt,
                                        mo, raw_comm) == MPI_SUCCESS ? DDP_OK : DDP_EMPI;
      return ddp_reduce_scatter(comm_, inplace ? DDP_IN_PLACE : b->send, b->recv, count, a->dtype,
                                a->op, op);
  }
}

/* Fills inputs, runs once, counts wrong elements on this rank. -1 on a call failure. */
static long check_once(const args_t *a, const call_t *algo, bufs_t *b, size_t count, int inplace) {
  size_t es = ddp_dtype_size(a->dtype), p = (size_t)size_;
  ddp_op_t op = a->op;
  long wrong = 0;
  double tol = 0;
  switch (a->coll) {
    case C_ALLREDUCE: {
      void *in = inplace ? b->hr : b->hs;
      for (size_t i = 0; i < count; i++) set_el(in, a->dtype, i, (double)val(rank_, i, op, a->dtype));
      if (!inplace) memset(b->hr, 0, count * es);
      if (to_dev(a, inplace ? b->recv : b->send, in, count * es)) return -1;
      if (run_once(a, algo, b, count, inplace) != DDP_OK) return -1;
      if (a->mem == M_CUDA && ddp_memcpy_async(comm_, b->hr, b->recv, count * es, NULL) == DDP_OK)
        ddp_stream_synchronize(comm_, NULL);
      for (size_t i = 0; i < count; i++) {
        double want = expect(i, op, a->dtype, &tol), got = get_el(b->hr, a->dtype, i);
        if (tol ? fabs(got - want) > tol : got != want) wrong++;
      }
      break;
    }
    case C_BROADCAST:
      for (size_t i = 0; i < count; i++) set_el(b->hr, a->dtype, i, rank_ == 0 ? (double)(i % 97) : -1.0);
      if (to_dev(a, b->recv, b->hr, count * es)) return -1;
      if (run_once(a, algo, b, count, 1) != DDP_OK) return -1;
      if (a->mem == M_CUDA && ddp_memcpy_async(comm_, b->hr, b->recv, count * es, NULL) == DDP_OK)
        ddp_stream_synchronize(comm_, NULL);
      for (size_t i = 0; i < count; i++) wrong += get_el(b->hr, a->dtype, i) != (double)(i % 97);
      break;
    case C_ALLGATHER: {
      char *mine = (char *)b->hr + (size_t)rank_ * count * es;
      void *in = inplace ? (void *)mine : b->hs;
      for (size_t i = 0; i < count; i++) set_el(in, a->dtype, i, (double)((size_t)rank_ * 7 + i % 89));
      if (to_dev(a, inplace ? (char *)b->recv + (size_t)rank_ * count * es : b->send, in, count * es))
        return -1;
      if (run_once(a, algo, b, count, inplace) != DDP_OK) return -1;
      if (a->mem == M_CUDA && ddp_memcpy_async(comm_, b->hr, b->recv, count * es * p, NULL) == DDP_OK)
        ddp_stream_synchronize(comm_, NULL);
      for (size_t q = 0; q < p; q++)
        for (size_t i = 0; i < count; i++)
          wrong += get_el(b->hr, a->dtype, q * count + i) != (double)(q * 7 + i % 89);
      break;
    }
    default: {
      void *in = inplace ? b->hr : b->hs;
      for (size_t i = 0; i < count * p; i++) set_el(in, a->dtype, i, (double)val(rank_, i, op, a->dtype));
      if (to_dev(a, inplace ? b->recv : b->send, in, count * p * es)) return -1;
      if (run_once(a, algo, b, count, inplace) != DDP_OK) return -1;
      if (a->mem == M_CUDA && ddp_memcpy_async(comm_, b->hr, b->recv, count * es, NULL) == DDP_OK)
        ddp_stream_synchronize(comm_, NULL);
      for (size_t i = 0; i < count; i++) {
        double want = expect((size_t)rank_ * count + i, op, a->dtype, &tol), got = get_el(b->hr, a->dtype, i);
        if (tol ? fabs(got - want) > tol : got != want) wrong++;
      }
      break;
    }
  }
  return wrong;
}

static double busbw_factor(int coll) {
  double n = size_;
  switch (coll) {
    case C_ALLREDUCE: return 2 * (n - 1) / n;
    case C_BROADCAST: return 1;
    default: return (n - 1) / n;
  }
}

/* Elements per rank-call for `bytes` of the nccl-tests "size" column. */
static size_t count_for(const args_t *a, size_t bytes) {
  size_t es = ddp_dtype_size(a->dtype);
  if (a->coll == C_ALLGATHER || a->coll == C_REDUCESCATTER) return bytes / es / (size_t)size_;
  return bytes / es;
}

static int measure(const args_t *a, const char *algo, bufs_t *b, size_t bytes, int inplace,
                   rec_t *out) {
  size_t count = count_for(a, bytes);
  memset(out, 0, sizeof *out);
  snprintf(out->algo, sizeof out->algo, "%.15s", algo);
  out->bytes = bytes;
  out->count = a->coll == C_ALLGATHER || a->coll == C_REDUCESCATTER ? count * (size_t)size_ : count;
  out->inplace = inplace;
  call_t k;
  int fail = prepare_call(a, algo, &k) != DDP_OK;
  for (int i = 0; i < a->warmup && !fail; i++) fail = run_once(a, &k, b, count, inplace) != DDP_OK;
  /* Iterations: -n, fewer if one call already takes a large part of the budget. */
  int iters = a->iters;
  double t1 = MPI_Wtime();
  if (!fail) fail = run_once(a, &k, b, count, inplace) != DDP_OK;
  double one = MPI_Wtime() - t1, onemax = 0;
  MPI_Allreduce(&one, &onemax, 1, MPI_DOUBLE, MPI_MAX, raw_comm);
  if (onemax * iters > a->budget) iters = (int)(a->budget / (onemax > 0 ? onemax : 1)) + 1;
  double dtmax = 0;
  for (int rep = 0; rep < a->reps; rep++) {
    MPI_Barrier(raw_comm);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters && !fail; i++) fail = run_once(a, &k, b, count, inplace) != DDP_OK;
    double dt = (MPI_Wtime() - t0) / iters, m = 0;
    MPI_Allreduce(&dt, &m, 1, MPI_DOUBLE, MPI_MAX, raw_comm);
    if (rep == 0 || m < dtmax) dtmax = m;
  }
  long wrong = 0;
  if (a->check && !fail) {
    wrong = check_once(a, &k, b, count, inplace);
    if (wrong < 0) fail = 1, wrong = 0;
  }
  int anyfail = 0;
  MPI_Allreduce(&fail, &anyfail, 1, MPI_INT, MPI_MAX, raw_comm);
  long allwrong = 0;
  MPI_Allreduce(&wrong, &allwrong, 1, MPI_LONG, MPI_SUM, raw_comm);
  if (anyfail) {
    if (fail) fprintf(stderr, "[rank %d] %s %zu bytes: %s\n", rank_, algo, bytes, ddp_last_error());
    return -1;
  }
  out->time_us = dtmax * 1e6;
  out->algbw = dtmax > 0 ? (double)bytes / dtmax / 1e9 : 0;
  out->busbw = out->algbw * busbw_factor(a->coll);
  out->wrong = a->check ? allwrong : -1;
  return 0;
}

/* ---- the sweep ----------------------------------------------------------------------------- */
/* One run: the algorithms that can run, the sizes, the buffers and the records measured. */
typedef struct sweep {
  const args_t *a;
  char list[16][16];
  int nalg;
  size_t sizes[128];
  int nsizes;
  bufs_t b;
  rec_t *recs;
  int nrec;
  int *failed; /* [size][algorithm]: a call failed at that size */
  int anywrong, anyfail;
  membw_t mbw; /* the physical limit (above 1 MB; smaller runs stay in the caches) */
  int have_bw;
} sweep_t;

/* The nccl-tests "size" column for size index si (0: nothing to run at that size). */
static size_t sweep_bytes(const sweep_t *s, int si) {
  size_t cnt = count_for(s->a, s->sizes[si]), es = ddp_dtype_size(s->a->dtype);
  if (cnt == 0) return 0;
  return s->a->coll == C_ALLGATHER || s->a->coll == C_REDUCESCATTER ? cnt * (size_t)size_ * es : cnt * es;
}

/* -M cuda without a device: nothing to measure; a failure when a device was asked for (the
 * emulation, a GPU). Returns the exit status, or -1 to go on. */
static int no_device_status(const args_t *a) {
  if (a->mem != M_CUDA || ddp_device_available(comm_)) return -1;
  const char *emu = getenv("DDP_DEVICE_EMULATE"), *req = getenv("DDP_REQUIRE_GPU");
  int asked = (emu && !strcmp(emu, "1")) || (req && !strcmp(req, "1"));
  char d[160] = "";
  ddp_device_describe(comm_, d, sizeof d);
  if (rank_ == 0)
    printf("# -M cuda: no device on this communicator (%s): %s\n", d,
           asked ? "FAILED (DDP_DEVICE_EMULATE=1 or DDP_REQUIRE_GPU=1 asked for one)" : "skipping");
  return asked ? 1 : 0;
}

/* Why entry t of -A cannot run here (NULL: it can); the same verdict on every rank. */
static const char *cannot_run(const args_t *a, const char *t) {
  char alg[32], xp[16];
  int raw = !strcmp(t, "raw");
  if (raw && (a->dtype == DDP_F16 || a->dtype == DDP_BF16 || a->op == DDP_AVG))
    return "MPI has no f16/bf16 types or avg op";
  if (raw && a->mem == M_CUDA) return "MPI is not CUDA-aware here";
  if (!raw && a->mem == M_CUDA && select_entry(a, t, alg, sizeof alg) != DDP_OK)
    return ddp_last_error(); /* transport cannot run here (same verdict on every rank) */
  if (!raw && a->coll != C_ALLREDUCE && strcmp(t, "mpi") && strcmp(t, "auto") &&
      !(a->mem == M_CUDA && is_transport(t)))
    return "only allreduce has algorithms";
  if (!raw && a->coll == C_ALLREDUCE) {
    ddp_coll_opts_t o;
    ddp_coll_opts_default(&o);
    split_entry(a, t, xp, sizeof xp, alg, sizeof alg);
    o.mem = a->mem == M_CUDA ? DDP_MEM_CUDA : DDP_MEM_HOST;
    const char *nm = NULL;
    if (ddp_algo_parse(alg, &o.algo) != DDP_OK ||
        ddp_allreduce_choice(comm_, NULL, 1024, a->dtype, &o, &nm) != DDP_OK)
      return ddp_last_error();
  }
  return NULL;
}

/* Algorithm list: -A (or the default), less what cannot run (with a note), in order. */
static void pick_algos(args_t *a, sweep_t *s) {
  if (!a->algos[0])
    snprintf(a->algos, sizeof a->algos, "%s",
             a->coll == C_ALLREDUCE ? (a->mem == M_CUDA ? "staged,mpi,nccl" : "raw,mpi,ring,rhd,shm,hier,auto")
                                    : "raw,mpi");
  char tmp[256];
  snprintf(tmp, sizeof tmp, "%s", a->algos);
  s->nalg = 0;
  for (char *save = NULL, *t = strtok_r(tmp, ",", &save); t && s->nalg < 16; t = strtok_r(NULL, ",", &save)) {
    const char *why = cannot_run(a, t);
    if (why) {
      if (rank_ == 0) printf("# skipping %s: %s\n", t, why);
      continue;
    }
    snprintf(s->list[s->nalg++], 16, "%.15s", t);
  }
}

/* Buffers sized for the largest case, zeroed. */
static void alloc_bufs(const args_t *a, bufs_t *b) {
  size_t es = ddp_dtype_size(a->dtype), p = (size_t)size_, maxb = a->maxb < es ? es : a->maxb;
  memset(b, 0, sizeof *b);
  b->sbytes = a->coll == C_ALLGATHER ? maxb / p + es : maxb;
  b->rbytes = maxb; /* in-place reduce-scatter takes its input in recv */
  b->sbytes = (b->sbytes + 63) & ~(size_t)63;
  b->rbytes = (b->rbytes + 63) & ~(size_t)63;
  int ok = 1;
  if (a->mem == M_SHARED) {
    ok = ddp_alloc(comm_, b->sbytes, &b->send) == DDP_OK && ddp_alloc(comm_, b->rbytes, &b->recv) == DDP_OK;
    b->hs = b->send, b->hr = b->recv;
  } else {
    ok = posix_memalign(&b->hs, 64, b->sbytes) == 0 && posix_memalign(&b->hr, 64, b->rbytes) == 0;
    b->send = b->hs, b->recv = b->hr;
    if (ok && a->mem == M_CUDA)
      ok = ddp_device_malloc(comm_, b->sbytes, &b->send) == DDP_OK &&
           ddp_device_malloc(comm_, b->rbytes, &b->recv) == DDP_OK;
  }
  if (!ok) {
    fprintf(stderr, "[rank %d] allreduce_bench: buffers of %zu bytes: %s\n", rank_, maxb, ddp_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (a->mem != M_CUDA) {
    memset(b->hs, 0, b->sbytes);
    memset(b->hr, 0, b->rbytes);
  } else {
    ddp_memset_async(comm_, b->send, 0, b->sbytes, NULL);
    ddp_memset_async(comm_, b->recv, 0, b->rbytes, NULL);
    ddp_stream_synchronize(comm_, NULL);
  }
}

static void free_bufs(const args_t *a, bufs_t *b) {
  if (a->mem == M_SHARED) {
    ddp_free(comm_, b->recv);
    ddp_free(comm_, b->send);
    return;
  }
  if (a->mem == M_CUDA) {
    ddp_device_free(comm_, b->send);
    ddp_device_free(comm_, b->recv);
  }
  free(b->hs);
  free(b->hr);
}

/* Sizes: -e, -e/f, -e/f^2 ... down to -b (so -b 8 -e 64M -f 4 hits 4M, 16M and 64M), and
 * -b itself; ascending. */
static void make_sizes(const args_t *a, sweep_t *s) {
  s->nsizes = 0;
  for (double v = (double)a->maxb; v >= (double)a->minb * 0.9999999 && s->nsizes < 127; v /= a->factor)
    s->sizes[s->nsizes++] = (size_t)(v + 0.5);
  if (s->nsizes == 0 || s->sizes[s->nsizes - 1] != a->minb) s->sizes[s->nsizes++] = a->minb;
  for (int i = 0; i < s->nsizes / 2; i++) {
    size_t t = s->sizes[i];
    s->sizes[i] = s->sizes[s->nsizes - 1 - i];
    s->sizes[s->nsizes - 1 - i] = t;
  }
}

static void print_header(const args_t *a, const sweep_t *s) {
  char ver[256] = "";
  ddp_mpi_library_version(ver, sizeof ver);
  if (rank_ != 0) return;
  printf("# allreduce_bench: %s, %d ranks, dtype %s, op %s, memory %s, %d iters (+%d warm-up)\n",
         coll_names[a->coll], size_, ddp_dtype_name(a->dtype), ddp_op_name(a->op),
         a->mem == M_HOST ? "host (malloc)" : a->mem == M_SHARED ? "shared (ddp_alloc)" : "cuda",
         a->iters, a->warmup);
  printf("# %s\n", ver);
  if (s->have_bw)
    printf("# memcpy of %zu MB: %.2f GB/s one rank alone, %.2f GB/s per rank with %d at once; bw%%: "
           "time the algorithm's memory traffic needs at that rate / time measured (out / in place)\n",
           s->mbw.bytes >> 20, s->mbw.single_gbs, s->mbw.all_gbs, s->mbw.ranks);
}

/* Sizes outer, algorithms inner: every algorithm of one size runs under the same machine
 * conditions. Tables are printed per algorithm afterwards. */
static void run_sweep(sweep_t *s) {
  const args_t *a = s->a;
  for (int si = 0; si < s->nsizes; si++) {
    size_t bytes = sweep_bytes(s, si);
    if (bytes == 0) continue;
    for (int k = 0; k < s->nalg; k++) {
      rec_t r[2];
      int bad = 0;
      int done[2] = {0, 0};
      for (int ip = 0; ip < 2; ip++) {
        if (a->coll == C_BROADCAST && ip == 0) continue; /* broadcast is always in place */
        if (!(a->place & (1 << ip)) && !(a->coll == C_BROADCAST)) continue;
        if (measure(a, s->list[k], &s->b, bytes, ip, &r[ip]) != 0) bad = 1;
        done[ip] = 1;
        const char *model = s->list[k];
        ddp_coll_opts_t co;
        ddp_coll_opts_default(&co);
        if (s->have_bw && !strcmp(model, "auto"))
          ddp_allreduce_choice(comm_, s->b.recv, count_for(a, bytes), a->dtype, &co, &model);
        r[ip].bwpct = s->have_bw ? membw_percent(&s->mbw, model, bytes, ip, a->mem == M_SHARED, r[ip].time_us)
                                 : -1;
      }
      if (bad) {
        s->anyfail = 1;
        s->failed[si * s->nalg + k] = 1;
        continue;
      }
      for (int ip = 0; ip < 2; ip++) {
        if (!done[ip]) continue;
        s->recs[s->nrec++] = r[ip];
        if (r[ip].wrong > 0) s->anywrong = 1;
      }
    }
  }
}

/* The record of algorithm `algo` at `bytes`, out of place (0) or in place (1); NULL if none. */
static const rec_t *find_rec(const sweep_t *s, const char *algo, size_t bytes, int inplace) {
  const rec_t *r = NULL;
  for (int i = 0; i < s->nrec; i++)
    if (s->recs[i].bytes == bytes && s->recs[i].inplace == inplace && !strcmp(s->recs[i].algo, algo))
      r = &s->recs[i];
  return r;
}

/* One nccl-tests table: algorithm k's rows at every size, then its average busbw. */
static void print_table(const sweep_t *s, int k) {
  const args_t *a = s->a;
  ddp_coll_opts_t o;
  ddp_coll_opts_default(&o);
  const char *nm = s->list[k];
  if (!strcmp(s->list[k], "auto") && a->coll == C_ALLREDUCE &&
      ddp_allreduce_choice(comm_, s->b.recv, count_for(a, a->maxb), a->dtype, &o, &nm) == DDP_OK)
    printf("#\n# algorithm: auto (at %zu bytes: %s)\n", a->maxb, nm);
  else
    printf("#\n# algorithm: %s%s\n", s->list[k], !strcmp(s->list[k], "raw") ? " (MPI's own call)" : "");
  printf("#%12s %12s %6s %6s %6s   %9s %8s %8s %6s   %9s %8s %8s %6s %9s\n", "", "", "", "", "",
         "out-of-place", "", "", "", "in-place", "", "", "", "");
  printf("#%12s %12s %6s %6s %6s   %9s %8s %8s %6s   %9s %8s %8s %6s %9s\n", "size", "count", "type",
         "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", "bw%");
  printf("#%12s %12s %6s %6s %6s   %9s %8s %8s %6s   %9s %8s %8s %6s %9s\n", "(B)", "(elements)", "",
         "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", "(out/in)");
  double sum = 0;
  int nb = 0;
  for (int si = 0; si < s->nsizes; si++) {
    size_t bytes = sweep_bytes(s, si);
    if (bytes == 0) continue;
    if (s->failed[si * s->nalg + k]) {
      printf(" %12zu  (failed: see stderr)\n", bytes);
      continue;
    }
    const rec_t *r[2] = {find_rec(s, s->list[k], bytes, 0), find_rec(s, s->list[k], bytes, 1)};
    const rec_t *any = r[1] ? r[1] : r[0];
    if (!any) continue;
    printf(" %12zu %12zu %6s %6s %6s", bytes, any->count, ddp_dtype_name(a->dtype),
           a->coll == C_ALLREDUCE || a->coll == C_REDUCESCATTER ? ddp_op_name(a->op) : "none",
           a->coll == C_BROADCAST ? "0" : "-1");
    for (int ip = 0; ip < 2; ip++) {
      if (!r[ip]) printf("   %9s %8s %8s %6s", "-", "-", "-", "-");
      else {
        sum += r[ip]->busbw, nb++;
        if (r[ip]->wrong < 0)
          printf("   %9.2f %8.2f %8.2f %6s", r[ip]->time_us, r[ip]->algbw, r[ip]->busbw, "N/A");
        else
          printf("   %9.2f %8.2f %8.2f %6ld", r[ip]->time_us, r[ip]->algbw, r[ip]->busbw, r[ip]->wrong);
      }
    }
    char bw[2][8] = {"-", "-"};
    for (int ip = 0; ip < 2; ip++)
      if (r[ip] && r[ip]->bwpct >= 0) snprintf(bw[ip], sizeof bw[ip], "%.0f", r[ip]->bwpct);
    printf(" %4s/%-4s\n", bw[0], bw[1]);
  }
  printf("# Avg bus bandwidth    : %g GB/s (%s)\n", nb ? sum / nb : 0.0, s->list[k]);
}

/* Comparison: busbw of each algorithm over raw's, MPI_Allreduce as applications call it (or
 * over the first algorithm's when raw is not in the list). */
static void print_comparison(const sweep_t *s) {
  int refk = 0;
  for (int k = s->nalg - 1; k >= 0; k--)
    if (!strcmp(s->list[k], "raw")) refk = k;
  printf("#\n# busbw relative to %s (out-of-place / in-place)\n#%12s", s->list[refk], "size");
  for (int k = 0; k < s->nalg; k++) printf(" %15s", s->list[k]);
  printf("\n");
  for (int si = 0; si < s->nsizes; si++) {
    size_t bytes = sweep_bytes(s, si);
    if (bytes == 0) continue;
    double ref[2] = {0, 0};
    for (int ip = 0; ip < 2; ip++) {
      const rec_t *r = find_rec(s, s->list[refk], bytes, ip);
      if (r) ref[ip] = r->busbw;
    }
    printf(" %12zu", bytes);
    for (int k = 0; k < s->nalg; k++) {
      double v[2] = {-1, -1};
      for (int ip = 0; ip < 2; ip++) {
        const rec_t *r = find_rec(s, s->list[k], bytes, ip);
        if (r) v[ip] = ref[ip] > 0 ? r->busbw / ref[ip] : -1;
      }
      char cell[32];
      if (v[0] < 0 && v[1] < 0) snprintf(cell, sizeof cell, "-");
      else if (v[0] < 0) snprintf(cell, sizeof cell, "- / %.2f", v[1]);
      else snprintf(cell, sizeof cell, "%.2f / %.2f", v[0], v[1]);
      printf(" %15s", cell);
    }
    printf("\n");
  }
  printf("# Out of bounds values : %d %s\n", s->anywrong, s->anywrong ? "WRONG" : "OK");
}

/* -J: one JSON record per measurement; 0 written, -1 not. */
static int write_json(const sweep_t *s) {
  const args_t *a = s->a;
  FILE *f = fopen(a->json, "w");
  if (!f) {
    fprintf(stderr, "allreduce_bench: cannot write %s\n", a->json);
    return -1;
  }
  fprintf(f, "[\n");
  for (int i = 0; i < s->nrec; i++) {
    const rec_t *r = &s->recs[i];
    fprintf(f, "  {\"coll\": \"%s\", \"algo\": \"%s\", \"dtype\": \"%s\", \"op\": \"%s\", "
               "\"bytes\": %zu, \"count\": %zu, \"inplace\": %s, \"time_us\": %.3f, "
               "\"algbw\": %.4f, \"busbw\": %.4f, \"wrong\": %ld, \"np\": %d, \"mem\": \"%s\", "
               "\"bw_pct\": %.1f}%s\n",
            coll_names[a->coll], r->algo, ddp_dtype_name(a->dtype), ddp_op_name(a->op), r->bytes,
            r->count, r->inplace ? "true" : "false", r->time_us, r->algbw, r->busbw, r->wrong, size_,
            a->mem == M_HOST ? "host" : a->mem == M_SHARED ? "shared" : "cuda", r->bwpct,
            i + 1 < s->nrec ? "," : "");
  }
  fprintf(f, "]\n");
  fclose(f);
  return 0;
}

/* ---- main ---------------------------------------------------------------------------------- */
static int finish(int status) {
  MPI_Comm_free(&raw_comm);
  ddp_finalize(&comm_);
  return status;
}

int main(int argc, char **argv) {
  ddp_status_t st = ddp_init(&argc, &argv, MPI_COMM_WORLD, &comm_);
  if (st != DDP_OK) {
    fprintf(stderr, "allreduce_bench: ddp_init: %s\n", ddp_last_error());
    return 1;
  }
  ddp_comm_rank(comm_, &rank_);
  ddp_comm_size(comm_, &size_);
  MPI_Comm_dup(MPI_COMM_WORLD, &raw_comm);
  args_t a;
  int pr = parse_args(argc, argv, &a);
  if (pr < 0) return finish(pr == -2 ? 0 : 2);
  int nodev = no_device_status(&a);
  if (nodev >= 0) return finish(nodev);
  static sweep_t s; /* large (records, lists): off the stack */
  memset(&s, 0, sizeof s);
  s.a = &a;
  pick_algos(&a, &s);
  if (s.nalg == 0) {
    if (rank_ == 0) fprintf(stderr, "allreduce_bench: no algorithm can run\n");
    return finish(2);
  }
  alloc_bufs(&a, &s.b);
  make_sizes(&a, &s);
  s.recs = calloc((size_t)(s.nsizes * s.nalg * 2), sizeof *s.recs);
  s.failed = calloc((size_t)(s.nsizes * s.nalg), sizeof *s.failed);
  if (!s.recs || !s.failed) MPI_Abort(MPI_COMM_WORLD, 1);
  s.have_bw = a.coll == C_ALLREDUCE && a.mem != M_CUDA && a.maxb > ((size_t)1 << 20) &&
              membw_measure(comm_, 0, 10, &s.mbw) == DDP_OK;
  print_header(&a, &s);
  run_sweep(&s);
  for (int k = 0; k < s.nalg && rank_ == 0; k++) print_table(&s, k);
  if (rank_ == 0 && s.nalg > 1) print_comparison(&s);
  if (rank_ == 0 && a.json && write_json(&s) != 0) s.anyfail = 1;
  free(s.failed);
  free(s.recs);
  free_bufs(&a, &s.b);
  return finish(s.anywrong || s.anyfail ? 1 : 0);
}
