/* The checks and verdict helpers of the test harness (ddp_test.h); the shared main() is in
 * ddp_test_main.c. */
#include "ddp_test.h"

#include <stdarg.h>

int ddp_test_failures_ = 0;
int ddp_test_checks_ = 0;

/* This process's rank in MPI_COMM_WORLD while MPI is up, else -1. */
static int world_rank(void) {
  int init = 0, fin = 0, r = -1;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (init && !fin) MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

void ddp_test_fail_(const char *file, int line, const char *cond, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "[rank %d] FAIL %s:%d: %s: %s\n", world_rank(), file, line, cond, msg);
  ddp_test_failures_++;
}

int ddp_test_skip(const ddp_test_t *t, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  printf("[rank %d] %s %s: SKIP: %s\n", t->rank, t->program, t->name, msg);
  fflush(stdout);
  return DDP_TEST_SKIP;
}

int ddp_test_algo_usable(ddp_comm_t *comm, const char *algo) {
  float buf[1024] = {0};
  ddp_coll_opts_t co;
  ddp_coll_opts_default(&co);
  const char *name = NULL;
  int ok = ddp_algo_parse(algo, &co.algo) == DDP_OK &&
           ddp_allreduce_choice(comm, buf, 1024, DDP_F32, &co, &name) == DDP_OK,
      all = 0, rank = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (!all && rank == 0) printf("algorithm %s cannot run here: skipped\n", algo);
  return all;
}

int ddp_test_same_everywhere(uint64_t h) {
  unsigned long long v[2] = {h, ~h}, o[2];
  MPI_Allreduce(v, o, 2, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  return o[0] == h && ~o[1] == h; /* the maximum of h and of ~h (its minimum) agree */
}

int ddp_test_finish(const char *name) {
  int rank = 0, init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  int total = ddp_test_failures_, checks = ddp_test_checks_;
  if (init && !fin) {
    const char *want = getenv("DDP_WORLD_SIZE");
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (want != NULL)
      CHECK(atoi(want) == size, "MPI_COMM_WORLD has %d rank(s) but the test was launched for "
            "DDP_WORLD_SIZE=%s: the launcher does not belong to this MPI library", size, want);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Allreduce(&ddp_test_failures_, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&ddp_test_checks_, &checks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  }
  if (rank == 0)
    printf("%s: %d checks, %d failed -> %s\n", name, checks, total, total ? "FAIL" : "PASS");
  return total ? 1 : 0;
}

int ddp_test_device_verdict(ddp_comm_t *comm, const char *name, ddp_test_want_t want) {
  char desc[160] = "?";
  ddp_device_describe(comm, desc, sizeof desc);
  ddp_device_kind_t kind = ddp_device_kind(comm);
  const char *emu = getenv("DDP_DEVICE_EMULATE"), *req = getenv("DDP_REQUIRE_GPU");
  int asked = (emu && !strcmp(emu, "1")) || (req && !strcmp(req, "1"));
  int v = 0; /* 0 go on, 1 skip, 2 fail: the worst over the ranks wins */
  char why[256] = "";
  if (want == DDP_TEST_WANT_EMULATED && kind != DDP_DEVICE_EMULATED) {
    v = 2;
    snprintf(why, sizeof why, "the emulated device did not start (DDP_DEVICE_EMULATE=%s, device: %s)",
             emu ? emu : "unset", desc);
  } else if (want == DDP_TEST_WANT_CUDA && kind != DDP_DEVICE_CUDA) {
    v = req && !strcmp(req, "1") ? 2 : 1;
    snprintf(why, sizeof why, "no CUDA device (device: %s)", desc);
  } else if (kind == DDP_DEVICE_NONE) {
    v = asked ? 2 : 1;
    snprintf(why, sizeof why, "no device (%s)%s", desc,
             asked ? " although DDP_DEVICE_EMULATE=1 or DDP_REQUIRE_GPU=1 asked for one" : "");
  }
  int all = v, rank = 0;
  MPI_Allreduce(&v, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (all && rank == 0)
    printf("%s: %s: %s\n", name, all == 2 ? "FAIL" : "SKIP", why[0] ? why : "another rank has no usable device");
  return all == 2 ? 1 : all == 1 ? 77 : 0;
}
