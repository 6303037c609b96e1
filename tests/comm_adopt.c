/* Caller-initialised MPI: the library adopts it, works on a caller-given communicator, and
 * never finalises it. Also bad DDP_* values (init error naming variable, value and allowed
 * set) and EBUSY/NULL argument checks of the runtime API. */
#include <stdlib.h>

#include "ddp_test.h"

static void bad_env(const char *name, const char *value, const char *needle) {
  setenv(name, value, 1);
  ddp_comm_t *const before = (ddp_comm_t *)(uintptr_t)0xABABAB0;
  ddp_comm_t *c = before;
  CHECK_ST(ddp_comm_create(MPI_COMM_WORLD, &c), DDP_ECONFIG);
  CHECK_MSG(name);
  CHECK_MSG(value);
  CHECK_MSG(needle);
  CHECK(c == before, "ddp_comm_create wrote its output (%p) on error", (void *)c);
  unsetenv(name);
}

static int run_adopt(ddp_test_t *t) {
  int argc = t->argc, provided = t->thread_provided;
  char **argv = t->argv;
  int wr = 0, ws = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &wr);
  MPI_Comm_size(MPI_COMM_WORLD, &ws);

  /* A caller communicator: even ranks and odd ranks separately. */
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, wr % 2, wr, &half);
  ddp_comm_t *comm = NULL;
  CHECK_OK(ddp_init(&argc, &argv, half, &comm));
  ddp_comm_info_t info;
  CHECK_OK(ddp_comm_info(comm, &info));
  int hs = 0;
  MPI_Comm_size(half, &hs);
  CHECK(info.size == hs, "size %d vs caller comm %d", info.size, hs);
  CHECK(info.mpi_owned == 0, "adopted MPI must not be owned");
  CHECK(info.thread_level == provided, "thread level %d vs provided %d", info.thread_level, provided);
  MPI_Comm w;
  CHECK_OK(ddp_comm_mpi(comm, DDP_COMM_WORLD, &w));
  int cmp = 0;
  MPI_Comm_compare(w, half, &cmp);
  CHECK(cmp == MPI_CONGRUENT, "world is not a duplicate of the caller's comm (%d)", cmp);
  CHECK_OK(ddp_finalize(&comm));
  int fin = 0;
  MPI_Finalized(&fin);
  CHECK(!fin, "ddp_finalize finalised MPI it did not initialise");

  /* Bad environment values: every one is an init error naming variable, value, allowed set. */
  bad_env("DDP_DEBUG", "LOUD", "INFO");
  bad_env("DDP_RANKS_PER_NODE", "0", "integer");
  bad_env("DDP_RANKS_PER_NODE", "2x", "integer");
  bad_env("DDP_DEVICE", "-3", "none");
  bad_env("DDP_CUDA_AWARE", "maybe", "0 or 1");
  bad_env("DDP_ALLREDUCE_ALGO", "tree", "ring");
  bad_env("DDP_DEVICE_EMULATE", "2", "0 or 1");
  bad_env("DDP_STAGING_CHUNK", "12Q", "size");
  bad_env("DDP_STAGING_CHUNK", "1K", "4K");
  bad_env("DDP_STAGING_DEPTH", "9", "2, 3 or 4");
  bad_env("DDP_TRANSPORT", "carrier-pigeon", "staged");
  bad_env("DDP_TIMEOUT_S", "-1", "seconds");
  bad_env("DDP_TIMEOUT_S", "nan", "seconds");
  bad_env("DDP_ON_TIMEOUT", "ignore", "abort or return");
  bad_env("DDP_CHECK", "yes please", "0 or 1");
  bad_env("DDP_SHM", "sometimes", "0 or 1");
  bad_env("DDP_HIER_PIPELINE", "2G", "up to 1G");
  bad_env("DDP_HIER_PIPELINE", "-1", "chunk size");
  /* Good values are accepted. */
  setenv("DDP_STAGING_CHUNK", "8M", 1);
  setenv("DDP_TIMEOUT_S", "2.5", 1);
  setenv("DDP_TRANSPORT", "staged", 1);
  setenv("DDP_SHM", "0", 1);
  setenv("DDP_HIER_PIPELINE", "0", 1);
  ddp_comm_t *ok = NULL;
  CHECK_OK(ddp_comm_create(MPI_COMM_WORLD, &ok));
  ddp_comm_info_t oki;
  CHECK_OK(ddp_comm_info(ok, &oki));
  CHECK(!oki.shm, "DDP_SHM=0: the communicator still reports node-shared memory");
  CHECK_OK(ddp_comm_destroy(&ok));
  unsetenv("DDP_STAGING_CHUNK");
  unsetenv("DDP_TIMEOUT_S");
  unsetenv("DDP_TRANSPORT");
  unsetenv("DDP_SHM");
  unsetenv("DDP_HIER_PIPELINE");
  /* Values hier's ranks must share: a rank with another one is an init error on every rank. */
  if (ws > 1) {
    const char *vars[3] = {"DDP_SHM", "DDP_HIER_PIPELINE", "DDP_ALLREDUCE_ALGO"};
    const char *vals[3][2] = {{"0", "1"}, {"1M", "2M"}, {"ring", "rhd"}};
    for (int i = 0; i < 3; i++) {
      setenv(vars[i], vals[i][wr == 0], 1);
      ddp_comm_t *c = NULL;
      CHECK_ST(ddp_comm_create(MPI_COMM_WORLD, &c), DDP_ECONFIG);
      CHECK_MSG(vars[i]);
      CHECK_MSG("differs across ranks");
      CHECK(c == NULL, "ddp_comm_create wrote its output on error");
      unsetenv(vars[i]);
    }
  }

  /* NULL / invalid arguments to every runtime function: DDP_EINVAL naming the argument. */
  ddp_comm_t *c2 = NULL;
  CHECK_ST(ddp_init(NULL, NULL, MPI_COMM_WORLD, NULL), DDP_EINVAL);
  CHECK_MSG("comm");
  CHECK_ST(ddp_init(&argc, NULL, MPI_COMM_WORLD, &c2), DDP_EINVAL);
  CHECK_MSG("argv");
  CHECK_ST(ddp_comm_create(MPI_COMM_WORLD, NULL), DDP_EINVAL);
  CHECK_MSG("comm");
  /* Destroying nothing is nothing to do, as for every handle of the library. */
  CHECK_OK(ddp_comm_destroy(NULL));
  CHECK_OK(ddp_finalize(NULL));
  ddp_comm_t *none = NULL;
  CHECK_OK(ddp_comm_destroy(&none));
  uint64_t junk[64];
  memset(junk, 0x5A, sizeof junk);
  ddp_comm_t *garbage = (ddp_comm_t *)junk;
  CHECK_ST(ddp_comm_destroy(&garbage), DDP_EINVAL);
  CHECK_MSG("not an initialised communicator");
  CHECK(garbage == (ddp_comm_t *)junk, "a refused destroy cleared the caller's pointer");
  ddp_comm_info_t inf;
  CHECK_ST(ddp_comm_info(NULL, &inf), DDP_EINVAL);
  CHECK_MSG("comm");
  CHECK_OK(ddp_comm_create(MPI_COMM_WORLD, &c2));
  CHECK_ST(ddp_comm_info(c2, NULL), DDP_EINVAL);
  CHECK_MSG("info");
  CHECK_ST(ddp_comm_rank(c2, NULL), DDP_EINVAL);
  CHECK_MSG("rank");
  CHECK_ST(ddp_comm_size(c2, NULL), DDP_EINVAL);
  CHECK_MSG("size");
  CHECK_ST(ddp_comm_mpi(c2, DDP_COMM_WORLD, NULL), DDP_EINVAL);
  CHECK_MSG("out");
  MPI_Comm out = MPI_COMM_NULL;
  CHECK_ST(ddp_comm_mpi(c2, (ddp_comm_kind_t)7, &out), DDP_EINVAL);
  CHECK_MSG("kind 7");
  CHECK(out == MPI_COMM_NULL, "output written on error");
  CHECK_ST(ddp_mpi_library_version(NULL, 10), DDP_EINVAL);
  CHECK_MSG("buf");
  char vb[4] = "xyz";
  CHECK_ST(ddp_mpi_library_version(vb, 0), DDP_EINVAL);
  CHECK_MSG("bytes");
  CHECK(strcmp(vb, "xyz") == 0, "output written on error");
  CHECK_ST(ddp_log(c2, (ddp_log_level_t)9, "x"), DDP_EINVAL);
  CHECK_MSG("level 9");
  CHECK_ST(ddp_log(c2, DDP_LOG_INFO, NULL), DDP_EINVAL);
  CHECK_MSG("fmt");
  CHECK_ST(ddp_abort(c2, NULL), DDP_EINVAL);
  CHECK_MSG("reason");
  CHECK_ST(ddp_abort(NULL, "x"), DDP_EINVAL);
  CHECK_ST(ddp_timeline_begin(c2, NULL, "c", NULL), DDP_EINVAL);
  CHECK_MSG("name");
  CHECK_ST(ddp_timeline_end(NULL, "n", "c", NULL), DDP_EINVAL);
  CHECK_ST(ddp_timeline_instant(c2, NULL, "c", NULL), DDP_EINVAL);
  CHECK_ST(ddp_timeline_flush(NULL), DDP_EINVAL);
  ddp_dtype_t dt = DDP_U8;
  CHECK_ST(ddp_dtype_parse("float128", &dt), DDP_EINVAL);
  CHECK_MSG("float128");
  CHECK(dt == DDP_U8, "dtype written on error");
  CHECK_OK(ddp_dtype_parse("bf16", &dt));
  CHECK(dt == DDP_BF16, "bf16 parsed as %d", dt);
  ddp_op_t op = DDP_MIN;
  CHECK_ST(ddp_op_parse("xor", &op), DDP_EINVAL);
  CHECK(op == DDP_MIN, "op written on error");
  CHECK(ddp_dtype_size(DDP_BF16) == 2 && ddp_dtype_size((ddp_dtype_t)99) == 0, "dtype sizes");
  CHECK(strcmp(ddp_strerror(DDP_EBUSY), "resource busy") == 0, "strerror");
  CHECK_OK(ddp_comm_destroy(&c2));
  CHECK(c2 == NULL, "ddp_comm_destroy left the handle set");
  CHECK_ST(ddp_comm_info(c2, &inf), DDP_EINVAL);

  MPI_Comm_free(&half);
  return 0;
}

/* MPI started by the harness at MPI_THREAD_SERIALIZED: the library must adopt that level. */
DDP_TEST_PROGRAM("comm_adopt", {.name = "adopt", .run = run_adopt, .start = DDP_TEST_MPI, .thread_level = MPI_THREAD_SERIALIZED});
