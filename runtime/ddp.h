/* mpiddp umbrella header: include this one. */
#ifndef DDP_H
#define DDP_H

#include "ddp_config.h"
#include "ddp_types.h"
#include "ddp_comm.h"
#include "ddp_collectives.h"
#include "ddp_reducer.h"
#include "ddp_device.h"
#include "ddp_sampler.h"

#endif /* DDP_H */
