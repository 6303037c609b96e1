/* Check macros for the apps (not the library): print file:line and the library's message,
 * then end the whole job with MPI_Abort, as nccl-tests' CHECK macros do. */
#ifndef APP_CHECK_H
#define APP_CHECK_H

#include <mpi.h>
#include <stdio.h>

#include "ddp.h"

#define APP_CHECK(call)                                                                  \
  do {                                                                                   \
    ddp_status_t app_st_ = (call);                                                       \
    if (app_st_ != DDP_OK) {                                                             \
      fprintf(stderr, "%s:%d: %s failed: %s: %s\n", __FILE__, __LINE__, #call,           \
              ddp_strerror(app_st_), ddp_last_error());                                  \
      int app_init_ = 0, app_fin_ = 0;                                                   \
      MPI_Initialized(&app_init_);                                                       \
      MPI_Finalized(&app_fin_);                                                          \
      if (app_init_ && !app_fin_) MPI_Abort(MPI_COMM_WORLD, 1);                          \
      return 1;                                                                          \
    }                                                                                    \
  } while (0)

#endif /* APP_CHECK_H */
