/* Fashion-MNIST for the apps and tests: where Debian puts it, its normalisation statistics,
 * and opening it through the library's public IDX reader (ddp_dataset_open_idx). Definitions
 * in fmnist.c. */
#ifndef FMNIST_H
#define FMNIST_H

#include <stddef.h>

#include "ddp.h"

/* Fashion-MNIST's per-pixel statistics over the 60,000 training images, after /255. */
#define FMNIST_MEAN 0.2860f
#define FMNIST_STD 0.3530f
/* Where Debian's dataset-fashion-mnist package installs the files. */
#define FMNIST_DEFAULT_DIR "/usr/share/datasets/fashion-mnist"

/* dir (NULL = FMNIST_DEFAULT_DIR) holds train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz]
 * (train = 1, 60,000 samples) or t10k-* (train = 0, 10,000); the .gz file is used when the plain
 * one is absent. Samples are 28 x 28 = 784 values normalised with FMNIST_MEAN / FMNIST_STD (see
 * ddp_dataset_open_idx), 10 classes. Returns the library's status: DDP_EINVAL for train not 0
 * or 1, out NULL or a dir too long, else what ddp_dataset_open_idx returns (DDP_EIO naming the
 * file, DDP_EFORMAT, ...); on error a message goes to err (errlen bytes; err may be NULL) and
 * *out is untouched. */
ddp_status_t fmnist_open(const char *dir, int train, ddp_dataset_t **out, char *err, size_t errlen);

#endif /* FMNIST_H */
