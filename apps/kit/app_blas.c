/* The apps' OpenBLAS check (see app_blas.h). */
#include "app_blas.h"

#include <cblas.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define APP_BLAS_FROM "MPIDDP_BLAS_SWITCHED_FROM"

/* What happened at start-up (the apps are single programs: one state per process). */
static struct {
  char from[32];   /* generic kernel the library chose, when we switched away from it */
  int exec_errno;  /* re-exec failed with this errno (the generic kernel stays) */
} app_blas_state;

/* Kernels that use AVX or better: anything else on an AVX2 machine is the generic fallback. */
static int app_blas_kernel_is_vector(const char *core) {
  static const char *const fast[] = {"Haswell",   "Zen",        "SkylakeX",  "Cooperlake",
                                     "SapphireRapids", "Sandybridge", "Bulldozer", "Piledriver",
                                     "Steamroller", "Excavator"};
  for (size_t i = 0; i < sizeof fast / sizeof fast[0]; i++)
    if (!strcasecmp(core, fast[i])) return 1;
  return 0;
}

/* The OpenBLAS kernels this CPU supports (as the OS has enabled their registers), best first,
 * NULL-terminated; the first entry is NULL on a CPU without AVX2. Cooperlake is SkylakeX's
 * kernels plus bf16 ones with other blocking: 95 against 81 GFLOP/s (sgemm 64x2048x2048, one
 * thread) on an AVX512-BF16 Xeon, family 6 model 207. Older OpenBLAS releases do not accept
 * every name in OPENBLAS_CORETYPE (0.3.21 does not list Cooperlake: it then detects by CPU
 * features, which gives Cooperlake there; earlier ones fall back to Prescott), hence the list. */
static const char *const *app_blas_kernels_for_cpu(void) {
  static const char *const bf16[] = {"Cooperlake", "SkylakeX", "Haswell", NULL};
  static const char *const avx512[] = {"SkylakeX", "Haswell", NULL};
  static const char *const avx2[] = {"Haswell", NULL};
  static const char *const none[] = {NULL};
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512cd"))
    return __builtin_cpu_supports("avx512bf16") ? bf16 : avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return avx2;
  return none;
}

const char *app_blas_kernel_for_cpu(void) { return app_blas_kernels_for_cpu()[0]; }

/* Re-executes this program with OPENBLAS_CORETYPE = candidate `k`, having found `generic`. */
static void app_blas_reexec(char **argv, const char *generic, int k) {
  char from[48];
  snprintf(from, sizeof from, "%.31s/%d", generic, k);
  if (setenv("OPENBLAS_CORETYPE", app_blas_kernels_for_cpu()[k], 1) != 0 ||
      setenv(APP_BLAS_FROM, from, 1) != 0)
    return;
  fflush(NULL);
  execv("/proc/self/exe", argv);
  app_blas_state.exec_errno = errno ? errno : ENOEXEC;
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv(APP_BLAS_FROM);
}

void app_blas_auto(char **argv) {
  const char *core = openblas_get_corename(), *from = getenv(APP_BLAS_FROM);
  const char *const *cand = app_blas_kernels_for_cpu();
  if (from) { /* we are the re-executed process: "Prescott/0" = generic kernel / candidate */
    snprintf(app_blas_state.from, sizeof app_blas_state.from, "%s", from);
    char *slash = strrchr(app_blas_state.from, '/');
    int k = slash ? atoi(slash + 1) : 0;
    if (slash) *slash = '\0';
    unsetenv(APP_BLAS_FROM);
    /* This OpenBLAS did not take that name: try the next one the CPU supports. */
    if (core && !app_blas_kernel_is_vector(core) && k >= 0 && k < 3 && cand[k] && cand[k + 1])
      app_blas_reexec(argv, app_blas_state.from, k + 1);
    return;
  }
  if (getenv("OPENBLAS_CORETYPE")) return; /* the user's choice */
  const char *cfg = openblas_get_config();
  if (!core || !cand[0] || app_blas_kernel_is_vector(core)) return;
  if (!cfg || !strstr(cfg, "DYNAMIC_ARCH")) return; /* one kernel built in: app_blas_note warns */
  app_blas_reexec(argv, core, 0);
}

void app_blas_describe(char *buf, size_t cap) {
  const char *cfg = openblas_get_config(), *core = openblas_get_corename();
  char ver[32] = "OpenBLAS"; /* "OpenBLAS 0.3.21": the config string's first two words */
  if (cfg && !strncmp(cfg, "OpenBLAS ", 9)) {
    snprintf(ver, sizeof ver, "%.31s", cfg);
    char *sp = strchr(ver + 9, ' ');
    if (sp) *sp = '\0';
  }
  const char *user = getenv("OPENBLAS_CORETYPE"), *want = app_blas_kernel_for_cpu();
  if (!core) core = "?";
  if (user && !app_blas_state.from[0])
    snprintf(buf, cap, "%s, kernel %s (OPENBLAS_CORETYPE=%s, the user's choice)", ver, core, user);
  else if (want && !app_blas_kernel_is_vector(core))
    snprintf(buf, cap, "%s, kernel %s (generic: this CPU supports %s; %s)", ver, core, want,
             app_blas_state.from[0] ? "the restart with OPENBLAS_CORETYPE did not change it"
             : app_blas_state.exec_errno ? "the restart with OPENBLAS_CORETYPE failed"
             : cfg && strstr(cfg, "DYNAMIC_ARCH") ? "no switch was attempted"
             : "the library has one kernel built in");
  else if (app_blas_state.from[0])
    snprintf(buf, cap, "%s, kernel %s (auto: the library chose %s for this CPU; OPENBLAS_CORETYPE=%s)",
             ver, core, app_blas_state.from, user ? user : "?");
  else
    snprintf(buf, cap, "%s, kernel %s", ver, core);
}

void app_blas_note(int print, int always) {
  if (!print) return;
  const char *core = openblas_get_corename(), *want = app_blas_kernel_for_cpu();
  int users = getenv("OPENBLAS_CORETYPE") && !app_blas_state.from[0];
  int generic = !users && core && want && !app_blas_kernel_is_vector(core);
  if (!always && !generic && !app_blas_state.from[0]) return;
  char d[320];
  app_blas_describe(d, sizeof d);
  printf("# BLAS: %s%s\n", generic ? "WARNING: GEMMs run far below this CPU's speed: " : "", d);
  fflush(stdout);
}

void app_cpu_describe(char *buf, size_t cap) {
  char name[96] = "?", vendor[24] = "?", family[8] = "?", model[8] = "?", line[512];
  FILE *f = fopen("/proc/cpuinfo", "r");
  while (f && fgets(line, sizeof line, f)) {
    char *colon = strchr(line, ':');
    if (!colon) continue;
    if (line[0] == '\n') break; /* first processor only */
    char *v = colon + 1 + (colon[1] == ' ');
    v[strcspn(v, "\n")] = '\0';
    if (!strncmp(line, "model name", 10)) snprintf(name, sizeof name, "%s", v);
    else if (!strncmp(line, "vendor_id", 9)) snprintf(vendor, sizeof vendor, "%s", v);
    else if (!strncmp(line, "cpu family", 10)) snprintf(family, sizeof family, "%s", v);
    else if (!strncmp(line, "model\t", 6)) snprintf(model, sizeof model, "%s", v);
  }
  if (f) fclose(f);
  __builtin_cpu_init();
  const char *isa = __builtin_cpu_supports("avx512f")
                        ? (__builtin_cpu_supports("avx512bf16") ? "AVX-512 BF16" : "AVX-512")
                    : __builtin_cpu_supports("avx2") ? "AVX2" : "no AVX2";
  snprintf(buf, cap, "%s (%s family %s model %s), %ld CPUs online, %s", name, vendor, family,
           model, sysconf(_SC_NPROCESSORS_ONLN), isa);
}

double app_blas_sgemm_gflops(double seconds) {
  const int M = 64, N = 2048, K = 2048;
  float *a = malloc(sizeof(float) * (size_t)M * K), *b = malloc(sizeof(float) * (size_t)N * K);
  float *c = malloc(sizeof(float) * (size_t)M * N);
  if (!a || !b || !c) {
    free(a), free(b), free(c);
    return -1.0;
  }
  for (size_t i = 0; i < (size_t)M * K; i++) a[i] = (float)(i % 7) * 1e-3f;
  for (size_t i = 0; i < (size_t)N * K; i++) b[i] = (float)(i % 5) * 1e-3f;
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  double t0 = (double)t.tv_sec + 1e-9 * (double)t.tv_nsec, el = 0.0;
  long n = 0;
  do {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a, K, b, K, 0.0f, c, N);
    n++;
    clock_gettime(CLOCK_MONOTONIC, &t);
    el = (double)t.tv_sec + 1e-9 * (double)t.tv_nsec - t0;
  } while (el < seconds);
  free(a), free(b), free(c);
  return 2.0 * M * N * K * (double)n / el / 1e9;
}
