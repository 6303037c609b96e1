/* The test harness every MPI test program shares (library ddp_test_common, tests/common/).
 *
 * A test program is a table of named cases and no main():
 *
 *   static int run_basic(ddp_test_t *t) { CHECK_OK(ddp_barrier(t->comm)); return 0; }
 *   DDP_TEST_PROGRAM("coll_api", DDP_TEST_CASE("basic", run_basic),
 *                    DDP_TEST_CASE_AS("badenv", run_badenv, DDP_TEST_MPI));
 *
 * The harness's main (ddp_test_main.c) starts MPI and the communicator as the cases ask
 * (ddp_test_start_t), checks that MPI's world has the rank count the test was registered for
 * (MPIDDP_TEST_NP, set by ddp_add_mpi_test; else the launcher's DDP_WORLD_SIZE), runs the cases
 * named by `--case a,b` (default: every case that starts as the first one does, in table
 * order; the others run only when named), agrees on the verdict over
 * MPI_COMM_WORLD (every rank exits 1 if a check failed on any rank, else 77 if a case skipped
 * on any rank, else 0), prints it on rank 0 with the failing ranks, and finalises.
 * The case's other arguments stay in t->argc / t->argv (argv[0] is the program).
 *
 * A case returns 0 (its CHECKs decide), DDP_TEST_SKIP (77: it cannot run here; it printed why,
 * e.g. through ddp_test_skip) or any other value (a failure). Programs with a main() of their
 * own (apps' unit tests) may still use CHECK and ddp_test_finish. */
#ifndef DDP_TEST_H
#define DDP_TEST_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp.h"

#define DDP_TEST_SKIP 77

/* How a case starts: the harness does the rest and undoes it after the cases. */
typedef enum {
  DDP_TEST_INIT = 0, /* ddp_init(MPI_COMM_WORLD) starts MPI; ddp_finalize ends it (default) */
  DDP_TEST_ADOPT,    /* MPI_Init_thread first, then ddp_init adopts MPI_COMM_WORLD */
  DDP_TEST_MPI,      /* MPI only (t->comm is NULL): the case makes its own communicators */
  DDP_TEST_NO_MPI,   /* neither (pure functions; rank 0 of 1) */
} ddp_test_start_t;

typedef struct ddp_test {
  ddp_comm_t *comm;    /* the communicator (DDP_TEST_INIT, DDP_TEST_ADOPT), else NULL */
  int rank, size;      /* in MPI_COMM_WORLD */
  int argc;            /* the arguments after the harness's own (argv[0] is the program) */
  char **argv;
  const char *program; /* the program's name, and the case running */
  const char *name;
  int thread_provided; /* MPI's thread level when the harness started MPI */
} ddp_test_t;

typedef struct {
  const char *name;
  int (*run)(ddp_test_t *t);
  ddp_test_start_t start;
  int thread_level; /* DDP_TEST_ADOPT / DDP_TEST_MPI: requested level (0: MPI_THREAD_MULTIPLE) */
} ddp_test_case_t;

/* The program's case table (the harness's main reads it), of DDP_TEST_CASE("name", fn) (a
 * case on the harness's communicator) and DDP_TEST_CASE_AS("name", fn, start). */
#define DDP_TEST_PROGRAM(program_name, ...)                                                  \
  const char ddp_test_program[] = program_name;                                              \
  const ddp_test_case_t ddp_test_cases[] = {__VA_ARGS__, {.name = NULL}}
#define DDP_TEST_CASE(case_name, fn) {.name = (case_name), .run = (fn)}
#define DDP_TEST_CASE_AS(case_name, fn, how) {.name = (case_name), .run = (fn), .start = (how)}

extern int ddp_test_failures_;
extern int ddp_test_checks_;

/* Prints "[rank r] FAIL file:line: cond: message" and counts the failure. */
void ddp_test_fail_(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define CHECK(cond, ...)                                                                     \
  do {                                                                                       \
    ddp_test_checks_++;                                                                      \
    if (!(cond)) ddp_test_fail_(__FILE__, __LINE__, #cond, __VA_ARGS__);                     \
  } while (0)

/* Checks a status, printing ddp_last_error() when it differs from the expected one. */
#define CHECK_ST(expr, expected)                                                             \
  do {                                                                                       \
    ddp_status_t st_ = (expr);                                                               \
    CHECK(st_ == (expected), "%s returned %d (%s), expected %d; last error: %s", #expr,     \
          (int)st_, ddp_strerror(st_), (int)(expected), ddp_last_error());                   \
  } while (0)
#define CHECK_OK(expr) CHECK_ST(expr, DDP_OK)

/* Error message must mention `needle` (the argument's name or value). */
#define CHECK_MSG(needle)                                                                    \
  CHECK(strstr(ddp_last_error(), (needle)) != NULL, "message '%s' lacks '%s'",              \
        ddp_last_error(), (needle))

/* Prints "[rank r] <program> <case>: SKIP: <reason>" and returns DDP_TEST_SKIP, for the case
 * to return (the harness then exits 77 on every rank, unless a check failed somewhere). */
int ddp_test_skip(const ddp_test_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* 1 when every rank can run allreduce algorithm `algo` on this communicator (shm needs one
 * node, ...); rank 0 says so when it cannot, so the caller skips it. */
int ddp_test_algo_usable(ddp_comm_t *comm, const char *algo);

/* 1 on every rank when every rank passed the same hash (of its parameters, its result):
 * collective over MPI_COMM_WORLD. */
int ddp_test_same_everywhere(uint64_t h);

/* For programs with their own main(): checks MPI's world size against DDP_WORLD_SIZE,
 * reduces the failure count over MPI_COMM_WORLD (if MPI is still up), prints one verdict on
 * rank 0 and returns the process exit code. */
int ddp_test_finish(const char *name);

/* May this test run on the device the communicator has? The kind it wants: a real CUDA device
 * (the `gpu` tests), the host emulation (the `emulate` tests, which are told so on their
 * command line, since an environment variable may not reach the ranks), or either.
 * Returns 0 to go on, 77 to skip (no CUDA device for a GPU test) or 1 for a failure: an
 * emulate test without the emulated device, or any test without a device when
 * DDP_DEVICE_EMULATE=1 or DDP_REQUIRE_GPU=1 asked for one. Every rank gets the same verdict;
 * rank 0 prints the reason. */
typedef enum { DDP_TEST_WANT_CUDA, DDP_TEST_WANT_EMULATED, DDP_TEST_WANT_ANY } ddp_test_want_t;
int ddp_test_device_verdict(ddp_comm_t *comm, const char *name, ddp_test_want_t want);

#endif /* DDP_TEST_H */
