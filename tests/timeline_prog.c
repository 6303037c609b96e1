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

int main(int argc, char **argv) {
  ddp_comm_t *comm = NULL;
  if (ddp_init(&argc, &argv, MPI_COMM_NULL, &comm) != DDP_OK) {
    fprintf(stderr, "init: %s\n", ddp_last_error());
    return 1;
  }
  pthread_t th;
  pthread_create(&th, NULL, worker, comm);
  for (int i = 0; i < 50; i++) {
    CHECK_OK(ddp_timeline_begin(comm, "main step", "test", "{\"bytes\":4096}"));
    CHECK_OK(ddp_timeline_instant(comm, "tick\n", NULL, NULL));
    CHECK_OK(ddp_timeline_end(comm, "main step", "test", NULL));
  }
  pthread_join(th, NULL);
  CHECK_OK(ddp_log(comm, DDP_LOG_WARN, "timeline test warning line"));
  int rc = ddp_test_finish("timeline_prog");
  CHECK_OK(ddp_finalize(&comm));
  return rc;
}
