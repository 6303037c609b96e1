/* Device layer (CUDA or host emulation): public part. Filled in by the GPU work. */
#ifndef DDP_DEVICE_H
#define DDP_DEVICE_H

#include "ddp_types.h"

#endif /* DDP_DEVICE_H */
