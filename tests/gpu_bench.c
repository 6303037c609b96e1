/* Device microbenchmarks for the GPU targets, one table each, JSON beside them:
 *   copy    device-to-device memcpy, pinned host<->device copies (the rates the targets use);
 *   kernel  the reduction kernel's memory traffic (2 reads + 1 write) against copy traffic;
 *   allreduce  f32 sum on device buffers for each transport side by side (staged, mpi, nccl),
 *           busbw = algbw * 2(n-1)/n as in nccl-tests. Every size and transport is checked
 *           twice before it is timed (#wrong): in place and out of place, with inputs that
 *           depend on the rank, the position and a fresh seed per check (a misplaced or stale
 *           chunk is wrong), and the out-of-place output poisoned first (a transport that does
 *           nothing is wrong, also at np=1, where an in-place sum of one rank is its input).
 * usage: gpu_bench [-b min_bytes] [-e max_bytes] [-f factor] [-n iters] [-A staged,mpi,nccl]
 *                  [-d f32|f16|bf16]
 *                  [-o out.json] [--emulate]
 * Without a CUDA device it exits 77 (1 with DDP_REQUIRE_GPU=1). --emulate runs it on the host
 * emulation instead, for a check of the harness (numbers there are host memcpy speeds, not a
 * GPU's); then no emulated device is a failure. */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "ddp_test.h"
#include "device_util.h"

static ddp_comm_t *comm = NULL;
static int rank, size;
static ddp_dtype_t dt = DDP_F32; /* -d */
static size_t es = 4;
static FILE *json;
static int json_first = 1;
/* For the target lines: the pinned copy rate (slower direction) and the kernel/copy traffic
 * ratio at the largest size >= 64 MB measured, and the lowest staged busbw at >= 64 MB. */
static double pinned_gbs = 0, kernel_ratio = 0, staged_busbw_min = -1;

static double now(void) { return MPI_Wtime(); }

static void json_row(const char *table, const char *fields) {
  if (!json) return;
  fprintf(json, "%s\n  {\"table\":\"%s\",%s}", json_first ? "" : ",", table, fields);
  json_first = 0;
}

/* Mean seconds per call of fn over iters after 2 warm-up calls; the max over ranks. */
typedef ddp_status_t (*op_fn)(void *arg);
static double time_it(op_fn fn, void *arg, int iters, ddp_status_t *st) {
  *st = DDP_OK;
  for (int i = 0; i < 2 && *st == DDP_OK; i++) *st = fn(arg);
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = now();
  for (int i = 0; i < iters && *st == DDP_OK; i++) *st = fn(arg);
  double t = (now() - t0) / iters, tmax = t;
  MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return tmax;
}

typedef struct {
  void *dst;
  const void *src;
  size_t bytes;
  ddp_stream_t *s;
} copy_arg_t;

static ddp_status_t do_copy(void *arg) {
  copy_arg_t *a = arg;
  ddp_status_t st = ddp_memcpy_async(comm, a->dst, a->src, a->bytes, a->s);
  return st == DDP_OK ? ddp_stream_synchronize(comm, a->s) : st;
}

static ddp_status_t do_reduce(void *arg) {
  copy_arg_t *a = arg;
  ddp_status_t st = ddp_device_reduce_async(comm, a->dst, a->src, a->bytes / 4, DDP_F32, DDP_SUM, a->s);
  return st == DDP_OK ? ddp_stream_synchronize(comm, a->s) : st;
}

typedef struct {
  const void *send; /* DDP_IN_PLACE for the timed calls */
  void *d;
  size_t count;
} ar_arg_t;

static ddp_status_t do_allreduce(void *arg) {
  ar_arg_t *a = arg;
  ddp_coll_opts_t o;
  ddp_coll_opts_default(&o);
  o.mem = DDP_MEM_CUDA;
  return ddp_allreduce(comm, a->send, a->d, a->count, dt, DDP_SUM, &o);
}

/* Input of rank r at position i for check number `seed`: an integer in [-11, 11] (sums over
 * up to 23 ranks are exact in bf16), hashed so that no shift of a chunk or period matches. */
static double input(int r, size_t i, unsigned seed) {
  uint64_t x = ((uint64_t)i << 20) ^ ((uint64_t)(unsigned)r << 8) ^ seed;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return (double)(x % 23) - 11.0;
}

static long check_sum(const void *h, size_t count, unsigned seed) {
  long wrong = 0;
  for (size_t i = 0; i < count; i++) {
    double want = 0;
    for (int r = 0; r < size; r++) want += input(r, i, seed);
    wrong += get(h, dt, i) != want;
  }
  return wrong;
}

static void fill(void *h, size_t count, unsigned seed) {
  for (size_t i = 0; i < count; i++) put(h, dt, i, input(rank, i, seed));
}

static ddp_status_t upload(void *d, const void *h, size_t bytes) {
  ddp_status_t st = ddp_memcpy_async(comm, d, h, bytes, NULL);
  return st == DDP_OK ? ddp_stream_synchronize(comm, NULL) : st;
}

/* One checked in-place and one checked out-of-place allreduce of `count` elements with
 * transport `tp`; returns the number of wrong elements (-1: a call failed). */
static long checked_allreduce(const char *tp, void *d, void *d2, char *h, size_t count,
                              unsigned *seed) {
  size_t bytes = count * es;
  long wrong = 0;
  ddp_status_t st;
  /* in place */
  unsigned s1 = (*seed)++;
  fill(h, count, s1);
  ar_arg_t a = {DDP_IN_PLACE, d, count};
  if ((st = upload(d, h, bytes)) != DDP_OK || (st = do_allreduce(&a)) != DDP_OK ||
      (st = upload(h, d, bytes)) != DDP_OK) {
    CHECK_OK(st);
    return -1;
  }
  long w_in = check_sum(h, count, s1);
  /* out of place, into a poisoned buffer (0xff bytes: NaN, or -1 for integers) */
  unsigned s2 = (*seed)++;
  fill(h, count, s2);
  a = (ar_arg_t){d, d2, count};
  if ((st = upload(d, h, bytes)) != DDP_OK || (st = ddp_memset_async(comm, d2, 0xff, bytes, NULL)) != DDP_OK ||
      (st = do_allreduce(&a)) != DDP_OK || (st = upload(h, d2, bytes)) != DDP_OK) {
    CHECK_OK(st);
    return -1;
  }
  long w_out = check_sum(h, count, s2);
  /* ... which must leave its input alone */
  if ((st = upload(h, d, bytes)) != DDP_OK) {
    CHECK_OK(st);
    return -1;
  }
  long w_send = 0;
  for (size_t i = 0; i < count; i++) w_send += get(h, dt, i) != input(rank, i, s2);
  wrong = w_in + w_out + w_send;
  CHECK(wrong == 0, "allreduce %s %zu bytes: %ld wrong in place, %ld wrong out of place, %ld "
        "input elements changed out of place", tp, bytes, w_in, w_out, w_send);
  return wrong;
}

static int iters_for(size_t bytes, int base) {
  if (bytes >= ((size_t)256 << 20)) return base > 5 ? 5 : base;
  if (bytes >= ((size_t)16 << 20)) return base > 10 ? 10 : base;
  return base;
}

static void bench_copy(size_t maxb, int iters) {
  size_t sizes[] = {(size_t)1 << 20, (size_t)64 << 20, (size_t)256 << 20, (size_t)1 << 30};
  ddp_stream_t *s;
  CHECK_OK(ddp_stream_create(comm, &s));
  if (rank == 0)
    printf("# copy and kernel rates (rank 0's view; every rank runs them at once)\n"
           "# %12s %12s %12s %12s %12s %12s %10s\n", "bytes", "d2d GB/s", "h2d GB/s",
           "d2h GB/s", "copy traffic", "reduce traffic", "red/copy");
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    size_t b = sizes[k];
    if (b > maxb) break;
    void *d1 = NULL, *d2 = NULL, *h = NULL;
    if (ddp_device_malloc(comm, b, &d1) != DDP_OK || ddp_device_malloc(comm, b, &d2) != DDP_OK ||
        ddp_host_alloc_pinned(comm, b, &h) != DDP_OK) {
      if (rank == 0) printf("# %zu bytes: allocation failed (%s)\n", b, ddp_last_error());
      ddp_device_free(comm, d1), ddp_device_free(comm, d2), ddp_host_free_pinned(comm, h);
      break;
    }
    memset(h, 0, b);
    CHECK_OK(ddp_memset_async(comm, d1, 0, b, s));
    CHECK_OK(ddp_memset_async(comm, d2, 0, b, s));
    int it = iters_for(b, iters);
    ddp_status_t st;
    copy_arg_t a = {d2, d1, b, s};
    double t_d2d = time_it(do_copy, &a, it, &st);
    CHECK_OK(st);
    a = (copy_arg_t){d1, h, b, s};
    double t_h2d = time_it(do_copy, &a, it, &st);
    CHECK_OK(st);
    a = (copy_arg_t){h, d1, b, s};
    double t_d2h = time_it(do_copy, &a, it, &st);
    CHECK_OK(st);
    a = (copy_arg_t){d2, d1, b, s};
    double t_red = time_it(do_reduce, &a, it, &st);
    CHECK_OK(st);
    double copy_traffic = 2.0 * (double)b / t_d2d / 1e9, red_traffic = 3.0 * (double)b / t_red / 1e9;
    if (rank == 0) {
      printf("  %12zu %12.2f %12.2f %12.2f %12.2f %12.2f %9.0f%%\n", b, (double)b / t_d2d / 1e9,
             (double)b / t_h2d / 1e9, (double)b / t_d2h / 1e9, copy_traffic, red_traffic,
             100.0 * red_traffic / copy_traffic);
      char f[256];
      snprintf(f, sizeof f,
               "\"bytes\":%zu,\"d2d_gbs\":%.3f,\"h2d_gbs\":%.3f,\"d2h_gbs\":%.3f,"
               "\"copy_traffic_gbs\":%.3f,\"reduce_traffic_gbs\":%.3f",
               b, (double)b / t_d2d / 1e9, (double)b / t_h2d / 1e9, (double)b / t_d2h / 1e9,
               copy_traffic, red_traffic);
      json_row("copy", f);
      if (b >= ((size_t)64 << 20)) {
        double h2d = (double)b / t_h2d / 1e9, d2h = (double)b / t_d2h / 1e9;
        pinned_gbs = h2d < d2h ? h2d : d2h;
        kernel_ratio = red_traffic / copy_traffic;
      }
    }
    ddp_device_free(comm, d1), ddp_device_free(comm, d2), ddp_host_free_pinned(comm, h);
  }
  CHECK_OK(ddp_stream_destroy(comm, &s));
}

static void bench_allreduce(size_t minb, size_t maxb, size_t factor, int iters, char *list) {
  const char *tps[3];
  int ntp = 0;
  for (char *tok = strtok(list, ","); tok && ntp < 3; tok = strtok(NULL, ",")) {
    if (ddp_device_set_transport(comm, tok) != DDP_OK) {
      if (rank == 0) printf("# transport %s skipped: %s\n", tok, ddp_last_error());
      continue;
    }
    tps[ntp++] = tok;
  }
  if (ntp == 0) return;
  if (rank == 0) {
    printf("# allreduce %s sum in place on device buffers, np=%d; time in us, bw in GB/s\n# %12s %10s",
           ddp_dtype_name(dt), size,
           "bytes", "count");
    for (int k = 0; k < ntp; k++) printf(" | %-6s %9s %8s %8s %6s", tps[k], "time", "algbw", "busbw", "#wrong");
    printf("\n");
  }
  size_t maxcount = maxb / es ? maxb / es : 1;
  void *d = NULL, *d2 = NULL;
  char *h = malloc(maxcount * es);
  if (!h || ddp_device_malloc(comm, maxcount * es, &d) != DDP_OK ||
      ddp_device_malloc(comm, maxcount * es, &d2) != DDP_OK) {
    if (rank == 0) printf("# cannot allocate 2 x %zu bytes: %s\n", maxcount * es, ddp_last_error());
    CHECK(0, "allocation of the allreduce buffers failed");
    ddp_device_free(comm, d);
    free(h);
    return;
  }
  unsigned seed = 1;
  for (size_t b = minb; b <= maxb; b *= factor) {
    size_t count = b / es ? b / es : 1;
    if (rank == 0) printf("  %12zu %10zu", count * es, count);
    for (int k = 0; k < ntp; k++) {
      CHECK_OK(ddp_device_set_transport(comm, tps[k]));
      long mine[2] = {0, 0}, all[2] = {0, 0};
      long w = checked_allreduce(tps[k], d, d2, h, count, &seed);
      mine[0] = w < 0, mine[1] = w > 0 ? w : 0;
      MPI_Allreduce(mine, all, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
      if (all[0]) { /* a call failed (on some rank): nothing to time */
        if (rank == 0) printf(" | %-6s %9s %8s %8s %6s", tps[k], "FAILED", "-", "-", "-");
        continue;
      }
      long wrong = all[1]; /* over all ranks */
      ar_arg_t a = {DDP_IN_PLACE, d, count};
      ddp_status_t st;
      double t = time_it(do_allreduce, &a, iters_for(b, iters), &st);
      CHECK_OK(st);
      double algbw = (double)(count * es) / t / 1e9, busbw = algbw * 2.0 * (size - 1) / size;
      if (rank == 0) {
        printf(" | %-6s %9.1f %8.2f %8.2f %6ld", tps[k], t * 1e6, algbw, busbw, wrong);
        char f[256];
        snprintf(f, sizeof f,
                 "\"transport\":\"%s\",\"dtype\":\"%s\",\"np\":%d,\"bytes\":%zu,\"time_us\":%.2f,"
                 "\"algbw_gbs\":%.4f,\"busbw_gbs\":%.4f,\"wrong\":%ld",
                 tps[k], ddp_dtype_name(dt), size, count * es, t * 1e6, algbw, busbw, wrong);
        json_row("allreduce", f);
        if (!strcmp(tps[k], "staged") && count * es >= ((size_t)64 << 20) && size > 1 &&
            (staged_busbw_min < 0 || busbw < staged_busbw_min))
          staged_busbw_min = busbw;
      }
    }
    if (rank == 0) printf("\n");
    if (b > SIZE_MAX / factor) break;
  }
  ddp_device_free(comm, d);
  ddp_device_free(comm, d2);
  free(h);
}

int main(int argc, char **argv) {
  size_t minb = 8, maxb = (size_t)1 << 30, factor = 4;
  int iters = 20, emulate = 0;
  char list[64] = "staged,mpi,nccl";
  const char *out = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-b") && i + 1 < argc) minb = strtoull(argv[++i], NULL, 0);
    else if (!strcmp(argv[i], "-e") && i + 1 < argc) maxb = strtoull(argv[++i], NULL, 0);
    else if (!strcmp(argv[i], "-f") && i + 1 < argc) factor = strtoull(argv[++i], NULL, 0);
    else if (!strcmp(argv[i], "-n") && i + 1 < argc) iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-A") && i + 1 < argc) snprintf(list, sizeof list, "%s", argv[++i]);
    else if (!strcmp(argv[i], "-o") && i + 1 < argc) out = argv[++i];
    else if (!strcmp(argv[i], "--emulate")) emulate = 1;
    else if (!strcmp(argv[i], "-d") && i + 1 < argc) {
      if (ddp_dtype_parse(argv[++i], &dt) != DDP_OK || !(dt == DDP_F32 || dt == DDP_F16 || dt == DDP_BF16)) {
        fprintf(stderr, "gpu_bench: -d takes f32, f16 or bf16 (got '%s')\n", argv[i]);
        return 2;
      }
      es = ddp_dtype_size(dt);
    }
    else {
      fprintf(stderr, "gpu_bench: unknown argument '%s'\n", argv[i]);
      return 2;
    }
  }
  if (minb == 0 || factor < 2 || maxb < minb || iters < 1) {
    fprintf(stderr, "gpu_bench: need -b >= 1, -f >= 2, -e >= -b, -n >= 1\n");
    return 2;
  }
  if (ddp_init(&argc, &argv, MPI_COMM_NULL, &comm) != DDP_OK) {
    fprintf(stderr, "ddp_init: %s\n", ddp_last_error());
    return 1;
  }
  ddp_comm_rank(comm, &rank);
  ddp_comm_size(comm, &size);
  char desc[128];
  ddp_device_describe(comm, desc, sizeof desc);
  int verdict = ddp_test_device_verdict(comm, "gpu_bench",
                                        emulate ? DDP_TEST_WANT_EMULATED : DDP_TEST_WANT_CUDA);
  if (verdict) {
    ddp_finalize(&comm);
    return verdict;
  }
  ddp_comm_info_t info;
  ddp_comm_info(comm, &info);
  if (rank == 0) {
    char lib[256] = "";
    ddp_mpi_library_version(lib, sizeof lib);
    char *nl = strchr(lib, '\n');
    if (nl) *nl = '\0';
    printf("# gpu_bench: np=%d, device %s, cuda_aware=%d (%s), nccl built=%d\n# MPI: %s\n", size,
           desc, info.cuda_aware, info.cuda_aware_reason, info.nccl, lib);
    if (out && !(json = fopen(out, "w"))) fprintf(stderr, "gpu_bench: cannot write %s\n", out);
    if (json) fprintf(json, "{\"np\":%d,\"device\":\"%s\",\"cuda_aware\":%d,\"rows\":[", size, desc, info.cuda_aware);
  }
  bench_copy(maxb, iters);
  bench_allreduce(minb, maxb, factor, iters, list);
  if (rank == 0) {
    printf("# targets (a GPU's numbers only mean something on a GPU):\n");
    if (kernel_ratio > 0)
      printf("#   reduction kernel traffic / copy traffic at >= 64 MB: %.0f%% (target >= 80%%) %s\n",
             100 * kernel_ratio, kernel_ratio >= 0.8 ? "MET" : "NOT MET");
    else
      printf("#   reduction kernel vs copy: not measured (needs -e >= 64M)\n");
    if (staged_busbw_min >= 0 && pinned_gbs > 0)
      printf("#   staged allreduce busbw at >= 64 MB: min %.2f GB/s = %.0f%% of the pinned copy rate "
             "%.2f GB/s (target >= 80%%) %s\n", staged_busbw_min, 100 * staged_busbw_min / pinned_gbs,
             pinned_gbs, staged_busbw_min >= 0.8 * pinned_gbs ? "MET" : "NOT MET");
    else
      printf("#   staged busbw vs pinned copy rate: not measured (needs np >= 2, -e >= 64M, staged)\n");
  }
  if (json) {
    fprintf(json, "\n]}\n");
    fclose(json);
  }
  int rc = ddp_test_finish("gpu_bench");
  ddp_finalize(&comm);
  return rc;
}
