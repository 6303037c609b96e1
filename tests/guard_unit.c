/* Unit test of the guard (runtime/core/guard.c) through its internal interface: fingerprint
 * agreement and mismatch reports (DDP_CHECK=1), watchdog deadlines with DDP_ON_TIMEOUT=return.
 * Run with DDP_CHECK=1 DDP_ON_TIMEOUT=return; linked to the static library for ddp__ symbols. */
#include <string.h>

#include "ddp_internal.h"
#include "ddp_test.h"

static ddp__coll_fp_t fp_of(uint64_t seq, int coll, int dtype, int op, uint64_t count, int root) {
  ddp__coll_fp_t fp = {seq, coll, dtype, op, count, root};
  return fp;
}

static void check_match(ddp__comm_t *c) {
  uint64_t seq = 1;
  ddp__coll_fp_t a = fp_of(seq++, 0, DDP_F32, DDP_SUM, 1000, -1);
  CHECK_OK(ddp__guard_check(c, &a));
  ddp__coll_fp_t b = fp_of(seq++, 1, DDP_I64, -1, 7, c->size - 1);
  CHECK_OK(ddp__guard_check(c, &b));
  ddp__coll_fp_t z = fp_of(seq++, 4, -1, -1, 0, -1);
  for (int i = 0; i < 50; i++) CHECK_OK(ddp__guard_check(c, &z));
  CHECK_ST(ddp__guard_check(c, NULL), DDP_EINTERNAL);
  /* With DDP_CHECK off the check is free and always agrees, even with different inputs. */
  c->cfg.check = 0;
  ddp__coll_fp_t odd = fp_of(99, 0, DDP_F32, DDP_SUM, (uint64_t)c->rank + 1, -1);
  CHECK_OK(ddp__guard_check(c, &odd));
  c->cfg.check = 1;
}

/* One rank (`who`) differs in one field: every rank gets DDP_EMISMATCH with the same message
 * naming that rank and field, and the next matching check works again. */
static void check_mismatch(ddp__comm_t *c, int who, ddp__coll_fp_t ref, ddp__coll_fp_t odd,
                           const char *want_ref, const char *want_odd) {
  ddp__coll_fp_t *mine = (c->rank == who) ? &odd : &ref;
  CHECK_ST(ddp__guard_check(c, mine), DDP_EMISMATCH);
  char who_txt[64];
  snprintf(who_txt, sizeof who_txt, "rank %d has %s", who, want_odd);
  CHECK_MSG(who_txt);
  CHECK_MSG(want_ref);
  CHECK_MSG("DDP_CHECK: ranks disagree on collective #");
  /* Only `who` is named. */
  for (int r = 1; r < c->size; r++) {
    char other[32];
    snprintf(other, sizeof other, "rank %d has", r);
    if (r != who) CHECK(strstr(ddp_last_error(), other) == NULL, "'%s' names rank %d: %s", other, r, ddp_last_error());
  }
  ref.seq++;
  CHECK_OK(ddp__guard_check(c, &ref));
}

static void check_mismatches(ddp__comm_t *c) {
  int last = c->size - 1;
  ddp__coll_fp_t ref = fp_of(100, 0, DDP_F32, DDP_SUM, 1024, -1);
  ddp__coll_fp_t odd = ref;
  odd.count = 512;
  check_mismatch(c, 1, ref, odd, "rank 0: allreduce dtype=f32 op=sum count=1024 root=-1", "count=512");
  odd = ref;
  odd.dtype = DDP_F64;
  check_mismatch(c, last, ref, odd, "dtype=f32", "dtype=f64");
  odd = ref;
  odd.op = DDP_MAX;
  check_mismatch(c, 1, ref, odd, "op=sum", "op=max");
  ddp__coll_fp_t bref = fp_of(200, 1, DDP_U8, -1, 16, 0);
  odd = bref;
  odd.root = 1;
  check_mismatch(c, last, bref, odd, "rank 0: broadcast", "root=1");
  odd = ref;
  odd.coll = 2;
  odd.seq = 101;
  check_mismatch(c, 1, ref, odd, "rank 0: allreduce", "seq=101 collective=allgather");
  /* Several fields at once. */
  odd = ref;
  odd.count = 3;
  odd.dtype = DDP_BF16;
  odd.op = DDP_AVG;
  check_mismatch(c, 1, ref, odd, "count=1024", "dtype=bf16 op=avg count=3");
  /* Every rank different: each one is named. */
  ddp__coll_fp_t mine = fp_of(300, 0, DDP_F32, DDP_SUM, 10 + (uint64_t)c->rank, -1);
  CHECK_ST(ddp__guard_check(c, &mine), DDP_EMISMATCH);
  for (int r = 1; r < c->size; r++) {
    char txt[48];
    snprintf(txt, sizeof txt, "rank %d has count=%d", r, 10 + r);
    CHECK_MSG(txt);
  }
}

/* ddp__wait_all with a receive that is never matched: DDP_ETIMEDOUT naming the peer, the
 * sequence number, collective, bytes and tag, after about DDP_TIMEOUT_S. */
static void check_wait_timeout(ddp__comm_t *c) {
  int last = c->size - 1;
  double saved = c->cfg.timeout_s;
  c->cfg.timeout_s = 0.5;
  int buf[4] = {0, 0, 0, 0};
  if (c->rank == 0) {
    MPI_Request req[2];
    int peers[2] = {1, last};
    MPI_Irecv(buf, 2, MPI_INT, 1, 901, c->world, &req[0]);
    MPI_Irecv(buf + 2, 2, MPI_INT, last, 902, c->world, &req[1]);
    ddp__wait_desc_t d = {77, "allreduce", "ring", 4096, 5, peers};
    double t0 = ddp__now();
    CHECK_ST(ddp__wait_all(c, 2, req, &d), DDP_ETIMEDOUT);
    double dt = ddp__now() - t0;
    CHECK(dt >= 0.5 && dt < 2.0, "timed out after %.2f s, DDP_TIMEOUT_S 0.5", dt);
    CHECK_MSG("collective #77 allreduce");
    CHECK_MSG("algo ring, 4096 bytes, tag/bucket 5");
    char want[64];
    if (last == 1) snprintf(want, sizeof want, "had not answered: 1");
    else snprintf(want, sizeof want, "had not answered: 1,%d", last);
    CHECK_MSG(want);
    MPI_Barrier(c->world); /* peers send only now: the requests complete and are not leaked */
    ddp__wait_desc_t d2 = {78, "allreduce", "ring", 16, -1, peers};
    CHECK_OK(ddp__wait_all(c, 2, req, &d2));
    CHECK(buf[0] == 11 && buf[2] == 13, "late messages %d %d", buf[0], buf[2]);
  } else {
    MPI_Barrier(c->world);
    int v[2] = {11, 12}, w[2] = {13, 14};
    if (c->rank == 1) MPI_Send(v, 2, MPI_INT, 0, 901, c->world);
    if (c->rank == last) MPI_Send(w, 2, MPI_INT, 0, 902, c->world);
  }
  /* A wait with nothing pending and a NULL description. */
  MPI_Request none = MPI_REQUEST_NULL;
  CHECK_OK(ddp__wait_all(c, 1, &none, NULL));
  CHECK_OK(ddp__wait_all(c, 0, NULL, NULL));
  /* Spin-wait deadline. Every rank expires together: the stall inspector finds all of them
   * waiting in the same collective, so nobody is named (a rank descheduled for longer than
   * the inspector's grace would be, hence the barrier first). */
  CHECK_OK(ddp__deadline_check(c, ddp__now(), NULL));
  ddp__wait_desc_t ds = {9, "allreduce", "shm", 64, 3, NULL};
  MPI_Barrier(c->world);
  CHECK_ST(ddp__deadline_check(c, ddp__now() - 1.0, &ds), DDP_ETIMEDOUT);
  CHECK_MSG("collective #9 allreduce (algo shm, 64 bytes, tag/bucket 3); peers that had not answered: ");
  if (!strstr(ddp_last_error(), "had not answered: unknown"))
    fprintf(stderr, "[rank %d] note: the inspector named a rank (a slow machine?): %s\n", c->rank,
            ddp_last_error());
  MPI_Barrier(c->world); /* nobody leaves while others still inspect */
  c->cfg.timeout_s = saved;
}

/* The last rank skips a fingerprint exchange: the others time out naming it, and the guard
 * then refuses further checks (DDP_ESTATE) instead of mis-pairing messages. Uses its own
 * communicator, destroyed after the skipper catches up. */
static void check_fp_timeout(void) {
  ddp_comm_t *comm2 = NULL;
  CHECK_OK(ddp_comm_create(MPI_COMM_WORLD, &comm2));
  ddp__comm_t *c = comm2;
  int last = c->size - 1;
  c->cfg.timeout_s = 0.5;
  ddp__coll_fp_t fp = fp_of(5, 0, DDP_F32, DDP_SUM, 8, -1);
  if (c->rank != last) {
    CHECK_ST(ddp__guard_check(c, &fp), DDP_ETIMEDOUT);
    char want[64];
    snprintf(want, sizeof want, "had not answered: %d", last);
    CHECK_MSG(want);
    CHECK_MSG("collective #5 fingerprint of allreduce");
    CHECK_ST(ddp__guard_check(c, &fp), DDP_ESTATE);
    CHECK_MSG("timed out");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  /* The skipper arrives late: its exchange completes with what the others sent. */
  if (c->rank == last) CHECK_OK(ddp__guard_check(c, &fp));
  CHECK_OK(ddp_comm_destroy(&comm2));
}

int main(int argc, char **argv) {
  ddp_comm_t *comm = NULL;
  if (ddp_init(&argc, &argv, MPI_COMM_NULL, &comm) != DDP_OK) {
    fprintf(stderr, "ddp_init: %s\n", ddp_last_error());
    return 1;
  }
  ddp__comm_t *c = comm;
  CHECK(c->cfg.check == 1, "run with DDP_CHECK=1 (got %d)", c->cfg.check);
  CHECK(c->cfg.on_timeout_return == 1, "run with DDP_ON_TIMEOUT=return");
  if (c->size < 2 || !c->cfg.check || !c->cfg.on_timeout_return) {
    fprintf(stderr, "guard_unit needs np >= 2, DDP_CHECK=1, DDP_ON_TIMEOUT=return\n");
    int rc = ddp_test_finish("guard_unit");
    ddp_finalize(&comm);
    return rc ? rc : 1;
  }
  check_match(c);
  check_mismatches(c);
  check_wait_timeout(c);
  check_fp_timeout();
  int rc = ddp_test_finish("guard_unit");
  CHECK_OK(ddp_finalize(&comm));
  return rc;
}
