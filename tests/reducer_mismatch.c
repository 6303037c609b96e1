/* Creation-time safety of the reducer: ranks that registered different parameters (count,
 * dtype, number of parameters) or passed different options get DDP_EMISMATCH on every rank,
 * with the same message naming the first differing parameter; nobody hangs, and a correct
 * creation afterwards works. Needs at least 2 ranks (the last rank is the odd one out). */
#include "ddp_test.h"

#define NP 4

static int g_rank, g_size;
static ddp_comm_t *g_comm = NULL;
static float g_data[NP][64];
static const char *g_names[NP] = {"layer0.weight", "layer0.bias", "layer1.weight", "layer1.bias"};

static size_t fill(ddp_param_t *p) {
  static const size_t counts[NP] = {64, 8, 32, 4};
  for (size_t i = 0; i < NP; i++)
    p[i] = (ddp_param_t){.data = g_data[i], .count = counts[i], .dtype = DDP_F32, .mem = DDP_MEM_HOST,
                         .name = g_names[i], .grad = NULL};
  return NP;
}

/* Every rank got the same status and the same message. */
static void expect_everywhere(ddp_status_t st, ddp_status_t want, const char *label) {
  CHECK(st == want, "[%s] status %d (%s), expected %d; message: %s", label, (int)st, ddp_strerror(st),
        (int)want, ddp_last_error());
  char msg[512] = {0}, first[512] = {0};
  snprintf(msg, sizeof msg, "%s", ddp_last_error());
  if (g_rank == 0) memcpy(first, msg, sizeof first);
  MPI_Bcast(first, sizeof first, MPI_CHAR, 0, MPI_COMM_WORLD);
  CHECK(strcmp(first, msg) == 0, "[%s] message differs from rank 0's:\n  here:   %s\n  rank 0: %s", label, msg, first);
  if (g_rank == 0) printf("[%s] %s\n", label, msg);
}

int main(int argc, char **argv) {
  if (ddp_init(&argc, &argv, MPI_COMM_NULL, &g_comm) != DDP_OK) return 1;
  ddp_comm_rank(g_comm, &g_rank);
  ddp_comm_size(g_comm, &g_size);
  if (g_size < 2) {
    if (g_rank == 0) printf("reducer_mismatch needs 2 or more ranks\n");
    ddp_finalize(&g_comm);
    return 77;
  }
  int odd = g_rank == g_size - 1;
  char who[32];
  snprintf(who, sizeof who, "rank %d", g_size - 1);
  ddp_param_t p[NP + 1];
  ddp_reducer_t *r = NULL;

  /* 1. A count differs in parameter 2. */
  size_t n = fill(p);
  if (odd) p[2].count = 33;
  ddp_status_t st = ddp_reducer_create(g_comm, p, n, NULL, &r);
  expect_everywhere(st, DDP_EMISMATCH, "count");
  CHECK_MSG("parameter 2 ('layer1.weight')");
  CHECK_MSG("count 32 f32");
  CHECK_MSG("count 33 f32");
  CHECK_MSG(who);
  CHECK(r == NULL, "out written on mismatch");

  /* 2. The dtype of parameter 0 differs. */
  fill(p);
  if (odd) p[0].dtype = DDP_F64;
  st = ddp_reducer_create(g_comm, p, n, NULL, &r);
  expect_everywhere(st, DDP_EMISMATCH, "dtype");
  CHECK_MSG("parameter 0 ('layer0.weight')");
  CHECK_MSG("f64");

  /* 3. The odd rank registered one parameter fewer. */
  fill(p);
  st = ddp_reducer_create(g_comm, p, odd ? n - 1 : n, NULL, &r);
  expect_everywhere(st, DDP_EMISMATCH, "fewer");
  CHECK_MSG("parameter 3 ('layer1.bias')");
  CHECK_MSG("registered only 3");

  /* 4. The odd rank registered one more (rank 0 has fewer). */
  fill(p);
  p[NP] = p[0];
  p[NP].name = "extra.weight";
  st = ddp_reducer_create(g_comm, p, odd ? n + 1 : n, NULL, &r);
  expect_everywhere(st, DDP_EMISMATCH, "more");
  CHECK_MSG("parameter 4 ('extra.weight')");
  CHECK_MSG("rank 0 registered only 4");

  /* 5. Options differ. */
  fill(p);
  ddp_reducer_opts_t o;
  ddp_reducer_opts_default(&o);
  if (odd) o.bucket_cap_mb = 5.0;
  st = ddp_reducer_create(g_comm, p, n, &o, &r);
  CHECK(st == DDP_EMISMATCH, "[options] status %d: %s", (int)st, ddp_last_error());
  CHECK_MSG("different options");

  /* 6. A correct creation afterwards works and broadcasts rank 0's values. */
  fill(p);
  for (int i = 0; i < NP; i++)
    for (int k = 0; k < 64; k++) g_data[i][k] = (float)(g_rank * 100 + i + k);
  CHECK_OK(ddp_reducer_create(g_comm, p, n, NULL, &r));
  for (int i = 0; i < NP; i++)
    CHECK(g_data[i][1] == (float)(i + 1), "param %d not broadcast: %g", i, g_data[i][1]);
  if (r) CHECK_OK(ddp_reducer_destroy(&r));

  int rc = ddp_test_finish("reducer_mismatch");
  ddp_finalize(&g_comm);
  return rc;
}
