/* Writes a few timeline events from two threads per rank; the driving script checks that
 * the DDP_TIMELINE file(s) are valid Chrome-trace JSON. */
#include <pthread.h>

#include "ddp_test.h"

static void *worker(void *arg) {
  ddp_comm_t *comm = arg;
  for (int i = 0; i < 50; i++) {
    ddp_timeline_begin(comm, "worker \"quoted\" step", "test", "{\"i\":1}");
    ddp_timeline_end(comm, "worker \"quoted\" step", "test", NULL);
  }
  return NULL;
}

static int run_timeline(ddp_test_t *t) {
  ddp_comm_t *comm = t->comm;
  pthread_t th;
  pthread_create(&th, NULL, worker, comm);
  for (int i = 0; i < 50; i++) {
    CHECK_OK(ddp_timeline_begin(comm, "main step", "test", "{\"bytes\":4096}"));
    CHECK_OK(ddp_timeline_instant(comm, "tick\n", NULL, NULL));
    CHECK_OK(ddp_timeline_end(comm, "main step", "test", NULL));
  }
  pthread_join(th, NULL);
  CHECK_OK(ddp_log(comm, DDP_LOG_WARN, "timeline test warning line"));
  return 0;
}

DDP_TEST_PROGRAM("timeline_prog", DDP_TEST_CASE("timeline", run_timeline));
