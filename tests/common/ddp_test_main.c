/* The main() of every test program built on the harness (ddp_test.h): start MPI and the
 * communicator as the selected cases ask, check the world size the test was registered for,
 * run the cases, agree on the verdict over MPI_COMM_WORLD, finalise. The program supplies
 * ddp_test_program and ddp_test_cases (DDP_TEST_PROGRAM). */
#include "ddp_test.h"

extern const char ddp_test_program[];
extern const ddp_test_case_t ddp_test_cases[];

#define MAX_SELECTED 32

static void usage(void) {
  fprintf(stderr, "usage: %s [--case NAME[,NAME...]] [ARGS...]; cases:", ddp_test_program);
  for (const ddp_test_case_t *c = ddp_test_cases; c->name; c++) fprintf(stderr, " %s", c->name);
  fprintf(stderr, "\n");
}

/* Adds the cases named in the comma-separated list to sel; 0 on an unknown name. */
static int select_cases(const char *list, const ddp_test_case_t **sel, int *n) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", list);
  for (char *save = NULL, *name = strtok_r(buf, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
    const ddp_test_case_t *c = ddp_test_cases;
    while (c->name && strcmp(c->name, name)) c++;
    if (!c->name) {
      fprintf(stderr, "%s: no case '%s'\n", ddp_test_program, name);
      return 0;
    }
    if (*n == MAX_SELECTED) return 0;
    sel[(*n)++] = c;
  }
  return 1;
}

/* The rank count the test was registered for: MPIDDP_TEST_NP (ddp_add_mpi_test), else the
 * launcher's DDP_WORLD_SIZE (tools/mpilaunch); 0 when neither is set (a run by hand). */
static int registered_np(const char **from) {
  const char *v = getenv(*from = "MPIDDP_TEST_NP");
  if (v == NULL) v = getenv(*from = "DDP_WORLD_SIZE");
  return v ? atoi(v) : 0;
}

int main(int argc, char **argv) {
  const ddp_test_case_t *sel[MAX_SELECTED];
  int nsel = 0, out = 1;
  /* The harness's options come out of argv; the rest is the cases'. */
  for (int i = 1; i < argc; i++) {
    const char *list = NULL;
    if (!strcmp(argv[i], "--case") && i + 1 < argc) list = argv[++i];
    else if (!strncmp(argv[i], "--case=", 7)) list = argv[i] + 7;
    else {
      argv[out++] = argv[i];
      continue;
    }
    if (!select_cases(list, sel, &nsel)) {
      usage();
      return 2;
    }
  }
  argc = out;
  argv[argc] = NULL;
  /* None named: every case that starts as the table's first one does. */
  if (nsel == 0)
    for (const ddp_test_case_t *c = ddp_test_cases; c->name && nsel < MAX_SELECTED; c++)
      if (c->start == ddp_test_cases[0].start) sel[nsel++] = c;
  ddp_test_start_t start = sel[0]->start;
  int level = sel[0]->thread_level ? sel[0]->thread_level : MPI_THREAD_MULTIPLE;
  for (int k = 1; k < nsel; k++)
    if (sel[k]->start != start) {
      fprintf(stderr, "%s: cases %s and %s start differently: run them as separate tests\n",
              ddp_test_program, sel[0]->name, sel[k]->name);
      return 2;
    }

  ddp_test_t t = {.rank = 0, .size = 1, .argc = argc, .argv = argv, .program = ddp_test_program};
  int fail_start = 0;
  if (start == DDP_TEST_ADOPT || start == DDP_TEST_MPI)
    MPI_Init_thread(&t.argc, &t.argv, level, &t.thread_provided);
  if (start == DDP_TEST_INIT || start == DDP_TEST_ADOPT) {
    ddp_status_t st = ddp_init(&t.argc, &t.argv, MPI_COMM_WORLD, &t.comm);
    if (st != DDP_OK) {
      int init = 0;
      MPI_Initialized(&init);
      fprintf(stderr, "%s: ddp_init failed: %s: %s\n", ddp_test_program, ddp_strerror(st), ddp_last_error());
      if (start == DDP_TEST_INIT) return 1; /* no MPI to agree over */
      fail_start = 1;
      ddp_test_failures_++;
    }
  }
  if (start != DDP_TEST_NO_MPI) {
    MPI_Comm_rank(MPI_COMM_WORLD, &t.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &t.size);
    const char *from = NULL;
    int np = registered_np(&from);
    if (np > 0 && np != t.size) {
      /* Every rank sees the same sizes: all fail, rank 0 says why. */
      if (t.rank == 0)
        fprintf(stderr, "%s: the MPI world has %d rank(s) but the test was registered for %d "
                "(%s=%d): wrong launcher, or a registration that does not match the job\n",
                ddp_test_program, t.size, np, from, np);
      fail_start = 1;
      ddp_test_failures_++;
    }
  }

  int skipped = 0;
  for (int k = 0; k < nsel && !fail_start; k++) {
    t.name = sel[k]->name;
    int r = sel[k]->run(&t);
    if (r == DDP_TEST_SKIP) skipped = 1;
    else if (r != 0) CHECK(r == 0, "case %s returned %d", t.name, r);
  }

  char names[256] = "";
  for (int k = 0, o = 0; k < nsel && o < (int)sizeof names; k++)
    o += snprintf(names + o, sizeof names - (size_t)o, "%s%s", k ? "," : "", sel[k]->name);
  int fails = ddp_test_failures_, checks = ddp_test_checks_, skip = skipped;
  if (start != DDP_TEST_NO_MPI) {
    /* The verdict: the sum of the failures, the worst skip; rank 0 names the failing ranks. */
    int *per = t.rank == 0 ? calloc((size_t)t.size, sizeof *per) : NULL;
    MPI_Gather(&ddp_test_failures_, 1, MPI_INT, per, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Allreduce(&ddp_test_failures_, &fails, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&ddp_test_checks_, &checks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&skipped, &skip, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (t.rank == 0 && fails) {
      char who[256] = "";
      for (int r = 0, o = 0; r < t.size && o < (int)sizeof who; r++)
        if (per && per[r]) o += snprintf(who + o, sizeof who - (size_t)o, "%s%d", o ? "," : "", r);
      printf("%s %s: %d checks on %d rank(s), %d failed (ranks %s) -> FAIL\n", ddp_test_program,
             names, checks, t.size, fails, who);
    }
    free(per);
  } else if (fails) {
    printf("%s %s: %d checks, %d failed -> FAIL\n", ddp_test_program, names, checks, fails);
  }
  if (t.rank == 0 && !fails)
    printf("%s %s: %d checks on %d rank(s) -> %s\n", ddp_test_program, names, checks, t.size,
           skip ? "SKIP" : "PASS");
  fflush(stdout);
  int rc = fails ? 1 : skip ? DDP_TEST_SKIP : 0;

  int had_comm = t.comm != NULL;
  if (had_comm) {
    ddp_status_t st = ddp_finalize(&t.comm);
    if (st != DDP_OK) {
      fprintf(stderr, "[rank %d] %s: ddp_finalize failed: %s: %s\n", t.rank, ddp_test_program,
              ddp_strerror(st), ddp_last_error());
      rc = 1;
    }
  }
  int fin = 0;
  MPI_Finalized(&fin);
  if (t.comm != NULL) {
    fprintf(stderr, "[rank %d] %s: ddp_finalize left the handle set\n", t.rank, ddp_test_program);
    rc = 1;
  }
  if (start == DDP_TEST_INIT && had_comm && !fin) {
    fprintf(stderr, "[rank %d] %s: ddp_finalize did not finalise the MPI that ddp_init started\n",
            t.rank, ddp_test_program);
    rc = 1;
  }
  if ((start == DDP_TEST_ADOPT || start == DDP_TEST_MPI) && !fin) MPI_Finalize();
  else if (start == DDP_TEST_ADOPT) {
    fprintf(stderr, "[rank %d] %s: ddp_finalize finalised MPI it did not start\n", t.rank, ddp_test_program);
    rc = 1;
  }
  return rc;
}
