/* Tiny test harness shared by the MPI test programs: checks count failures per rank, and
 * ddp_test_finish() reduces the count so every rank agrees on the verdict. Header-only. */
#ifndef DDP_TEST_H
#define DDP_TEST_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp.h"

static int ddp_test_failures_ = 0;
static int ddp_test_checks_ = 0;

#define CHECK(cond, ...)                                                              \
  do {                                                                                \
    ddp_test_checks_++;                                                               \
    if (!(cond)) {                                                                    \
      int r_ = -1;                                                                    \
      int init_ = 0;                                                                  \
      MPI_Initialized(&init_);                                                        \
      if (init_) MPI_Comm_rank(MPI_COMM_WORLD, &r_);                                  \
      fprintf(stderr, "[rank %d] FAIL %s:%d: %s: ", r_, __FILE__, __LINE__, #cond);  \
      fprintf(stderr, __VA_ARGS__);                                                   \
      fprintf(stderr, "\n");                                                          \
      ddp_test_failures_++;                                                           \
    }                                                                                 \
  } while (0)

/* Checks a status, printing ddp_last_error() when it differs from the expected one. */
#define CHECK_ST(expr, expected)                                                      \
  do {                                                                                \
    ddp_status_t st_ = (expr);                                                        \
    CHECK(st_ == (expected), "%s returned %d (%s), expected %d; last error: %s", #expr, \
          (int)st_, ddp_strerror(st_), (int)(expected), ddp_last_error());            \
  } while (0)
#define CHECK_OK(expr) CHECK_ST(expr, DDP_OK)

/* Error message must mention `needle` (the argument's name or value). */
#define CHECK_MSG(needle)                                                             \
  CHECK(strstr(ddp_last_error(), (needle)) != NULL, "message '%s' lacks '%s'",       \
        ddp_last_error(), (needle))

/* 1 when every rank can run allreduce algorithm `algo` on this communicator (shm needs one
 * node, ...); rank 0 says so when it cannot, so the caller skips it. */
static inline int ddp_test_algo_usable(ddp_comm_t *comm, const char *algo) {
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

/* The test was launched for DDP_WORLD_SIZE ranks (tools/mpilaunch sets it for every job,
 * ctest for singletons): MPI's world must be that size, or a launcher of another MPI started
 * N singletons that would each pass as a 1-rank job. ddp_init refuses such a world too; this
 * covers the programs that start MPI themselves. */
static inline void ddp_test_check_world(void) {
  const char *want = getenv("DDP_WORLD_SIZE");
  int size = 0;
  if (want == NULL) return;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CHECK(atoi(want) == size, "MPI_COMM_WORLD has %d rank(s) but the test was launched for "
        "DDP_WORLD_SIZE=%s: the launcher does not belong to this MPI library", size, want);
}

/* Reduces the failure count over MPI_COMM_WORLD (if MPI is still up), prints one verdict on
 * rank 0 and returns the process exit code. */
static inline int ddp_test_finish(const char *name) {
  int rank = 0, init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (init && !fin) ddp_test_check_world();
  int total = ddp_test_failures_, checks = ddp_test_checks_;
  if (init && !fin) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Allreduce(&ddp_test_failures_, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&ddp_test_checks_, &checks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  }
  if (rank == 0)
    printf("%s: %d checks, %d failed -> %s\n", name, checks, total, total ? "FAIL" : "PASS");
  return total ? 1 : 0;
}

/* May this test run on the device the communicator has? The kind it wants: a real CUDA device
 * (the `gpu` tests), the host emulation (the `emulate` tests, which are told so on their
 * command line, since an environment variable may not reach the ranks), or either.
 * Returns 0 to go on, 77 to skip (no CUDA device for a GPU test) or 1 for a failure: an
 * emulate test without the emulated device, or any test without a device when
 * DDP_DEVICE_EMULATE=1 or DDP_REQUIRE_GPU=1 asked for one. Every rank gets the same verdict;
 * rank 0 prints the reason. */
typedef enum { DDP_TEST_WANT_CUDA, DDP_TEST_WANT_EMULATED, DDP_TEST_WANT_ANY } ddp_test_want_t;
static inline int ddp_test_device_verdict(ddp_comm_t *comm, const char *name, ddp_test_want_t want) {
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

#endif /* DDP_TEST_H */
