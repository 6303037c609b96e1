/* Fashion-MNIST over the library's IDX reader (see fmnist.h). */
#include "fmnist.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* Picks dir/name, or dir/name.gz when the plain file is absent. */
static void fmnist_path(char *buf, size_t bytes, const char *dir, const char *name) {
  struct stat sb;
  snprintf(buf, bytes, "%s/%s", dir, name);
  if (stat(buf, &sb) == 0) return;
  snprintf(buf, bytes, "%s/%s.gz", dir, name);
}

static ddp_status_t fmnist_fail(ddp_status_t st, char *err, size_t errlen, const char *msg) {
  if (err && errlen) snprintf(err, errlen, "%s", msg);
  return st;
}

ddp_status_t fmnist_open(const char *dir, int train, ddp_dataset_t **out, char *err, size_t errlen) {
  char msg[160];
  if (train != 0 && train != 1) {
    snprintf(msg, sizeof msg, "fmnist_open: train %d must be 0 or 1", train);
    return fmnist_fail(DDP_EINVAL, err, errlen, msg);
  }
  if (!out) return fmnist_fail(DDP_EINVAL, err, errlen, "fmnist_open: out is NULL");
  if (dir == NULL) dir = FMNIST_DEFAULT_DIR;
  if (strlen(dir) >= 3800) {
    snprintf(msg, sizeof msg, "fmnist_open: dir is %zu characters long, at most 3800", strlen(dir));
    return fmnist_fail(DDP_EINVAL, err, errlen, msg);
  }
  char images[4096], labels[4096], name[64];
  const char *prefix = train ? "train" : "t10k";
  snprintf(name, sizeof name, "%s-images-idx3-ubyte", prefix);
  fmnist_path(images, sizeof images, dir, name);
  snprintf(name, sizeof name, "%s-labels-idx1-ubyte", prefix);
  fmnist_path(labels, sizeof labels, dir, name);
  ddp_status_t st = ddp_dataset_open_idx(images, labels, FMNIST_MEAN, FMNIST_STD, out);
  if (st != DDP_OK) return fmnist_fail(st, err, errlen, ddp_last_error());
  return DDP_OK;
}
