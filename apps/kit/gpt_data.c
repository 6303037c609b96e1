/* gpt_train's corpus reader and train/validation split (see gpt_data.h). */
#include "gpt_data.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "train_util.h" /* train_fail */

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Appends file `path` to *buf (capacity *cap, *n used). */
static int append_file(const char *path, uint8_t **buf, size_t *n, size_t *cap, char *err,
                       size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) return train_fail(err, errlen, "%s: cannot open: %s", path, strerror(errno));
  for (;;) {
    if (*cap - *n < 65536) {
      size_t nc = *cap ? 2 * *cap : 1 << 20;
      uint8_t *nb = realloc(*buf, nc);
      if (!nb) {
        fclose(f);
        return train_fail(err, errlen, "out of memory reading %s", path);
      }
      *buf = nb, *cap = nc;
    }
    size_t got = fread(*buf + *n, 1, *cap - *n, f);
    *n += got;
    if (got == 0) break;
  }
  int bad = ferror(f);
  fclose(f);
  return bad ? train_fail(err, errlen, "%s: read error", path) : 0;
}

int gpt_corpus_read(const char *path, uint8_t **bytes, size_t *n, int *files, char *err,
                    size_t errlen) {
  struct stat sb;
  uint8_t *buf = NULL;
  size_t used = 0, cap = 0;
  int nfiles = 0, rc = 0;
  if (!path || stat(path, &sb) != 0)
    return train_fail(err, errlen, "corpus %s: %s (the default is Debian's package `fortunes`)",
                     path ? path : "(null)", path ? strerror(errno) : "no path");
  if (S_ISDIR(sb.st_mode)) {
    DIR *d = opendir(path);
    if (!d) return train_fail(err, errlen, "corpus %s: %s", path, strerror(errno));
    char **names = NULL;
    size_t nn = 0, capn = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
      size_t len = strlen(e->d_name);
      if (e->d_name[0] == '.' || (len > 4 && !strcmp(e->d_name + len - 4, ".dat"))) continue;
      char full[4096];
      struct stat fs;
      snprintf(full, sizeof full, "%s/%s", path, e->d_name);
      if (lstat(full, &fs) != 0 || !S_ISREG(fs.st_mode)) continue; /* links, folders */
      if (nn == capn) {
        capn = capn ? 2 * capn : 64;
        char **nb = realloc(names, capn * sizeof(char *));
        if (!nb) rc = train_fail(err, errlen, "out of memory");
        else names = nb;
      }
      if (rc == 0 && !(names[nn++] = strdup(e->d_name))) rc = train_fail(err, errlen, "out of memory");
    }
    closedir(d);
    if (rc == 0 && nn) qsort(names, nn, sizeof(char *), by_name);
    for (size_t i = 0; i < nn; i++) {
      char full[4096];
      snprintf(full, sizeof full, "%s/%s", path, names[i]);
      if (rc == 0) rc = append_file(full, &buf, &used, &cap, err, errlen);
      if (rc == 0) nfiles++;
      free(names[i]);
    }
    free(names);
  } else {
    rc = append_file(path, &buf, &used, &cap, err, errlen);
    nfiles = 1;
  }
  if (rc == 0 && used == 0) rc = train_fail(err, errlen, "corpus %s is empty", path);
  if (rc != 0) {
    free(buf);
    return -1;
  }
  *bytes = buf, *n = used;
  if (files) *files = nfiles;
  return 0;
}

void gpt_corpus_split(const uint8_t *all, size_t n, uint8_t *train, size_t *ntrain, uint8_t *val,
                      size_t *nval) {
  size_t nt = 0, nv = 0;
  for (size_t off = 0, k = 0; off < n; off += GPT_VAL_CHUNK, k++) {
    size_t len = n - off < GPT_VAL_CHUNK ? n - off : GPT_VAL_CHUNK;
    if (k % GPT_VAL_EVERY == GPT_VAL_EVERY - 1) memcpy(val + nv, all + off, len), nv += len;
    else memcpy(train + nt, all + off, len), nt += len;
  }
  *ntrain = nt, *nval = nv;
}
