/* The training kit's checkpoint directory (see ckpt_dir.h). */
#include "ckpt_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"

#define CKDIR_PREFIX "ckpt-"
#define CKDIR_SUFFIX ".ddp"
#define CKDIR_DIGITS 12
#define CKDIR_MAX_STEP UINT64_C(999999999999)

/* Appends a formatted sentence to note (never overflows; "" stays valid). */
static void ckdir__note(char *note, size_t len, const char *fmt, ...) {
  if (!note || len == 0) return;
  size_t used = strnlen(note, len - 1);
  if (used + 1 >= len) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(note + used, len - used, fmt, ap);
  va_end(ap);
}

static int ckdir__path(const char *dir, const char *name, char *out, size_t len, char *err,
                       size_t errlen) {
  int n = snprintf(out, len, "%s/%s", dir, name);
  if (n < 0 || (size_t)n >= len) {
    snprintf(err, errlen, "checkpoint directory path too long (%zu bytes)", strlen(dir));
    return -1;
  }
  return 0;
}

int ckdir_name(uint64_t step, char *name, size_t len) {
  if (!name || step > CKDIR_MAX_STEP) return -1;
  int n = snprintf(name, len, CKDIR_PREFIX "%0*llu" CKDIR_SUFFIX, CKDIR_DIGITS,
                   (unsigned long long)step);
  return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* Parses "ckpt-<12 digits>.ddp" at the start of s (len bytes available); returns the bytes
 * consumed, 0 when s does not start with a checkpoint name. */
static size_t ckdir__name_prefix(const char *s, size_t len, uint64_t *step) {
  size_t pl = strlen(CKDIR_PREFIX), sl = strlen(CKDIR_SUFFIX), total = pl + CKDIR_DIGITS + sl;
  if (len < total || memcmp(s, CKDIR_PREFIX, pl) != 0 ||
      memcmp(s + pl + CKDIR_DIGITS, CKDIR_SUFFIX, sl) != 0)
    return 0;
  uint64_t v = 0;
  for (size_t i = 0; i < CKDIR_DIGITS; i++) {
    char c = s[pl + i];
    if (c < '0' || c > '9') return 0;
    v = v * 10 + (uint64_t)(c - '0');
  }
  *step = v;
  return total;
}

int ckdir_parse_name(const char *name, uint64_t *step) {
  uint64_t v = 0;
  if (!name || !step) return -1;
  size_t len = strlen(name), used = ckdir__name_prefix(name, len, &v);
  if (used == 0 || used != len) return -1;
  *step = v;
  return 0;
}

int ckdir_parse_pointer(const void *buf, size_t bytes, uint64_t *step, char *err, size_t errlen) {
  const char *s = (const char *)buf;
  uint64_t v = 0;
  if (!buf && bytes) {
    snprintf(err, errlen, "pointer buffer is NULL");
    return -1;
  }
  size_t used = bytes ? ckdir__name_prefix(s, bytes, &v) : 0;
  if (used == 0) {
    snprintf(err, errlen, "%s does not name a checkpoint file (%zu bytes)", CKDIR_POINTER, bytes);
    return -1;
  }
  if (used < bytes && s[used] == '\n') used++;
  if (used != bytes) {
    snprintf(err, errlen, "%s has %zu unexpected byte(s) after the file name", CKDIR_POINTER,
             bytes - used);
    return -1;
  }
  *step = v;
  return 0;
}

int ckdir_prepare(const char *dir, char *err, size_t errlen) {
  struct stat sb;
  if (!dir || !*dir) {
    snprintf(err, errlen, "checkpoint directory name is empty");
    return -1;
  }
  if (stat(dir, &sb) != 0) {
    if (errno != ENOENT || mkdir(dir, 0755) != 0) {
      snprintf(err, errlen, "cannot create checkpoint directory %.300s: %s", dir, strerror(errno));
      return -1;
    }
  } else if (!S_ISDIR(sb.st_mode)) {
    snprintf(err, errlen, "checkpoint directory %.300s exists and is not a directory", dir);
    return -1;
  }
  char probe[4096], name[64];
  snprintf(name, sizeof name, ".probe.%ld", (long)getpid());
  if (ckdir__path(dir, name, probe, sizeof probe, err, errlen) != 0) return -1;
  int fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int ok = fd >= 0 && write(fd, "x", 1) == 1 && fsync(fd) == 0;
  int saved = errno;
  if (fd >= 0) close(fd);
  if (fd >= 0) unlink(probe);
  if (!ok) {
    snprintf(err, errlen, "checkpoint directory %.300s is not writable: %s", dir, strerror(saved));
    return -1;
  }
  return 0;
}

static int ckdir__desc(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

int ckdir_scan(const char *dir, uint64_t **steps, size_t *n, char *err, size_t errlen) {
  *steps = NULL;
  *n = 0;
  DIR *d = opendir(dir);
  if (!d) {
    if (errno == ENOENT) return 0;
    snprintf(err, errlen, "cannot list checkpoint directory %.300s: %s", dir, strerror(errno));
    return -1;
  }
  uint64_t *v = NULL;
  size_t cnt = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    uint64_t s;
    if (ckdir_parse_name(e->d_name, &s) != 0) continue;
    if (cnt == cap) {
      size_t nc = cap ? 2 * cap : 16;
      uint64_t *nv = realloc(v, nc * sizeof *nv);
      if (!nv) {
        free(v);
        closedir(d);
        snprintf(err, errlen, "out of memory listing %.300s", dir);
        return -1;
      }
      v = nv, cap = nc;
    }
    v[cnt++] = s;
  }
  closedir(d);
  if (cnt) qsort(v, cnt, sizeof *v, ckdir__desc);
  *steps = v;
  *n = cnt;
  return 0;
}

int ckdir_candidates(const char *dir, uint64_t **steps, size_t *n, char *note, size_t notelen,
                     char *err, size_t errlen) {
  if (note && notelen) note[0] = '\0';
  uint64_t *all = NULL;
  size_t cnt = 0;
  if (ckdir_scan(dir, &all, &cnt, err, errlen) != 0) return -1;
  char path[4096], perr[256];
  if (ckdir__path(dir, CKDIR_POINTER, path, sizeof path, err, errlen) != 0) {
    free(all);
    return -1;
  }
  void *pbuf = NULL;
  size_t pbytes = 0;
  uint64_t latest = 0;
  int have = 0;
  struct stat sb;
  if (stat(path, &sb) != 0) {
    if (cnt) ckdir__note(note, notelen, "%s/%s is missing; trying every checkpoint, newest first. ", dir, CKDIR_POINTER);
  } else if (ckpt_read_file(path, &pbuf, &pbytes, perr, sizeof perr) != 0 ||
             ckdir_parse_pointer(pbuf, pbytes, &latest, perr, sizeof perr) != 0) {
    ckdir__note(note, notelen, "%s/%s is unusable (%s); trying every checkpoint, newest first. ", dir,
                CKDIR_POINTER, perr);
  } else {
    have = 1;
  }
  free(pbuf);
  size_t out = 0;
  for (size_t i = 0; i < cnt; i++) {
    if (have && all[i] > latest) {
      ckdir__note(note, notelen, "ckpt step %llu is newer than %s (a save cut short) and is not used. ",
                  (unsigned long long)all[i], CKDIR_POINTER);
      continue;
    }
    all[out++] = all[i];
  }
  if (have && (out == 0 || all[0] != latest))
    ckdir__note(note, notelen, "%s names step %llu, whose file is missing. ", CKDIR_POINTER,
                (unsigned long long)latest);
  *steps = all;
  *n = out;
  return 0;
}

/* A temporary file of ckpt_write_atomic ("<name>.tmp.<pid>") whose writer has ended. */
static int ckdir__stale_tmp(const char *name) {
  const char *t = strstr(name, ".tmp.");
  if (!t) return 0;
  size_t base = (size_t)(t - name);
  uint64_t s;
  int ours = (base == strlen(CKDIR_POINTER) && memcmp(name, CKDIR_POINTER, base) == 0) ||
             ckdir__name_prefix(name, base, &s) == base;
  if (!ours) return 0;
  char *end = NULL;
  long pid = strtol(t + 5, &end, 10);
  if (end == t + 5 || *end || pid <= 0) return 0;
  if (pid == (long)getpid()) return 0;
  return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

int ckdir_save(const char *dir, uint64_t step, const void *buf, size_t bytes, unsigned keep,
               char *note, size_t notelen, char *err, size_t errlen) {
  if (note && notelen) note[0] = '\0';
  char name[CKDIR_NAME_BYTES], path[4096], line[CKDIR_NAME_BYTES + 1];
  if (keep < 1) {
    snprintf(err, errlen, "keep %u: at least one checkpoint must be kept", keep);
    return -1;
  }
  if (ckdir_name(step, name, sizeof name) != 0) {
    snprintf(err, errlen, "global step %llu too large for a checkpoint name", (unsigned long long)step);
    return -1;
  }
  if (ckdir__path(dir, name, path, sizeof path, err, errlen) != 0 ||
      ckpt_write_atomic(path, buf, bytes, err, errlen) != 0)
    return -1;
  snprintf(line, sizeof line, "%s\n", name);
  if (ckdir__path(dir, CKDIR_POINTER, path, sizeof path, err, errlen) != 0 ||
      ckpt_write_atomic(path, line, strlen(line), err, errlen) != 0)
    return -1;
  /* The new checkpoint and its pointer are durable: only now may older files go. */
  uint64_t *all = NULL;
  size_t cnt = 0;
  char perr[512];
  if (ckdir_scan(dir, &all, &cnt, perr, sizeof perr) != 0) {
    ckdir__note(note, notelen, "not pruned: %s. ", perr);
    return 0;
  }
  unsigned kept = 0;
  for (size_t i = 0; i < cnt; i++) {
    int abandoned = all[i] > step;
    if (!abandoned && kept < keep) {
      kept++;
      continue;
    }
    char old[CKDIR_NAME_BYTES];
    ckdir_name(all[i], old, sizeof old);
    if (ckdir__path(dir, old, path, sizeof path, perr, sizeof perr) != 0 || unlink(path) != 0)
      ckdir__note(note, notelen, "could not remove %s: %s. ", old, strerror(errno));
    else if (abandoned)
      ckdir__note(note, notelen, "removed %s (newer than this run's step %llu: abandoned). ", old,
                  (unsigned long long)step);
  }
  free(all);
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) {
    if (!ckdir__stale_tmp(e->d_name)) continue;
    if (ckdir__path(dir, e->d_name, path, sizeof path, perr, sizeof perr) == 0 && unlink(path) == 0)
      ckdir__note(note, notelen, "removed the stale temporary file %.100s. ", e->d_name);
  }
  if (d) closedir(d);
  return 0;
}
