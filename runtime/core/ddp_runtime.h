/* Former name of the communicator's header, kept so that code written against earlier releases
 * still compiles: include "ddp_comm.h" (or the umbrella "ddp.h"). */
#ifndef DDP_RUNTIME_H
#define DDP_RUNTIME_H
#include "ddp_comm.h"
#endif /* DDP_RUNTIME_H */
