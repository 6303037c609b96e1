/* Chrome-trace timeline (DDP_TIMELINE=file.json, opens in Perfetto / chrome://tracing).
 * Events are buffered in memory and written at flush/destroy: one file per rank when the name
 * contains %r, otherwise merged into one file on rank 0 (pid = rank, tid = thread). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ddp_internal.h"

struct ddp__timeline {
  pthread_mutex_t mu;
  char *buf; /* comma-separated JSON event objects */
  size_t len, cap;
  double t0;
  int rank;
  int per_rank;
  char path[512];
};

ddp_status_t ddp__timeline_open(ddp__timeline_t **out, const ddp__config_t *cfg, int rank) {
  *out = NULL;
  if (!cfg->timeline[0]) return DDP_OK;
  ddp__timeline_t *tl = calloc(1, sizeof *tl);
  if (!tl) return ddp__error(DDP_ENOMEM, "timeline: out of memory");
  pthread_mutex_init(&tl->mu, NULL);
  tl->rank = rank;
  tl->t0 = ddp__now();
  const char *pat = cfg->timeline;
  tl->per_rank = strstr(pat, "%r") != NULL;
  size_t o = 0;
  for (const char *p = pat; *p && o + 16 < sizeof tl->path; p++) {
    if (p[0] == '%' && p[1] == 'r') o += (size_t)snprintf(tl->path + o, sizeof tl->path - o, "%d", rank), p++;
    else tl->path[o++] = *p;
  }
  tl->path[o] = '\0';
  *out = tl;
  return DDP_OK;
}

/* Appends JSON-escaped text. */
static void esc(char *dst, size_t cap, const char *s) {
  size_t o = 0;
  for (; s && *s && o + 7 < cap; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') dst[o++] = '\\', dst[o++] = (char)ch;
    else if (ch < 0x20) o += (size_t)snprintf(dst + o, cap - o, "\\u%04x", ch);
    else dst[o++] = (char)ch;
  }
  dst[o] = '\0';
}

void ddp__timeline_event(ddp__timeline_t *tl, char phase, const char *name, const char *cat,
                         const char *args_json) {
  if (!tl) return;
  double ts = (ddp__now() - tl->t0) * 1e6;
  char ename[128], ecat[64], ev[1024];
  esc(ename, sizeof ename, name ? name : "?");
  esc(ecat, sizeof ecat, cat ? cat : "ddp");
  long tid = (long)syscall(SYS_gettid);
  int n = snprintf(ev, sizeof ev,
                   "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"%c\",\"ts\":%.3f,\"pid\":%d,\"tid\":%ld%s%s%s}",
                   ename, ecat, phase, ts, tl->rank, tid, phase == 'i' ? ",\"s\":\"t\"" : "",
                   args_json ? ",\"args\":" : "", args_json ? args_json : "");
  if (n < 0 || (size_t)n >= sizeof ev) return; /* oversized args: drop rather than corrupt */
  pthread_mutex_lock(&tl->mu);
  if (tl->len + (size_t)n + 2 > tl->cap) {
    size_t cap = tl->cap ? tl->cap * 2 : 65536;
    while (cap < tl->len + (size_t)n + 2) cap *= 2;
    char *nb = realloc(tl->buf, cap);
    if (!nb) {
      pthread_mutex_unlock(&tl->mu);
      return;
    }
    tl->buf = nb;
    tl->cap = cap;
  }
  if (tl->len) tl->buf[tl->len++] = ',';
  memcpy(tl->buf + tl->len, ev, (size_t)n);
  tl->len += (size_t)n;
  tl->buf[tl->len] = '\0';
  pthread_mutex_unlock(&tl->mu);
}

static ddp_status_t write_file(const char *path, const char *body, size_t len) {
  char tmp[600];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *fp = fopen(tmp, "w");
  if (!fp) return ddp__error(DDP_EIO, "timeline: cannot open '%s' for writing", tmp);
  int ok = fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", fp) >= 0;
  if (len) ok = ok && fwrite(body, 1, len, fp) == len;
  ok = ok && fputs("]}\n", fp) >= 0;
  ok = (fclose(fp) == 0) && ok;
  if (!ok || rename(tmp, path) != 0) {
    remove(tmp);
    return ddp__error(DDP_EIO, "timeline: writing '%s' failed", path);
  }
  return DDP_OK;
}

ddp_status_t ddp__timeline_write(ddp__timeline_t *tl, MPI_Comm world, int collective) {
  if (!tl) return DDP_OK;
  pthread_mutex_lock(&tl->mu);
  char *snap = tl->len ? malloc(tl->len + 1) : NULL;
  size_t len = snap ? tl->len : 0;
  if (snap) memcpy(snap, tl->buf, len + 1);
  pthread_mutex_unlock(&tl->mu);
  ddp_status_t st = DDP_OK;
  if (tl->per_rank || !collective) {
    /* Non-collective writes (the watchdog's last flush) go to a per-rank file. */
    char path[600];
    if (tl->per_rank) snprintf(path, sizeof path, "%s", tl->path);
    else snprintf(path, sizeof path, "%s.rank%d", tl->path, tl->rank);
    st = write_file(path, snap ? snap : "", len);
    free(snap);
    return st;
  }
  int size = 0, rank = 0;
  MPI_Comm_size(world, &size);
  MPI_Comm_rank(world, &rank);
  int mylen = (int)(len > (size_t)INT32_MAX / 2 ? (size_t)INT32_MAX / 2 : len);
  int *lens = NULL, *displs = NULL;
  char *all = NULL;
  if (rank == 0) {
    lens = calloc((size_t)size, sizeof *lens);
    displs = calloc((size_t)size, sizeof *displs);
  }
  int rc = MPI_Gather(&mylen, 1, MPI_INT, lens, 1, MPI_INT, 0, world);
  size_t total = 0;
  if (rank == 0 && rc == MPI_SUCCESS) {
    for (int r = 0; r < size; r++) {
      displs[r] = (int)total;
      total += (size_t)lens[r] + 1; /* room for a separating comma */
    }
    all = malloc(total + 1);
  }
  if (rc == MPI_SUCCESS)
    rc = MPI_Gatherv(snap ? snap : "", mylen, MPI_CHAR, all, lens, displs, MPI_CHAR, 0, world);
  if (rc != MPI_SUCCESS) st = ddp__mpi_error(rc, "timeline gather");
  if (rank == 0 && st == DDP_OK && all) {
    /* Join the per-rank chunks with commas, skipping empty ones. */
    size_t o = 0;
    for (int r = 0; r < size; r++) {
      if (!lens[r]) continue;
      if (o) all[o++] = ',';
      memmove(all + o, all + displs[r], (size_t)lens[r]);
      o += (size_t)lens[r];
    }
    st = write_file(tl->path, all, o);
  }
  free(all);
  free(lens);
  free(displs);
  free(snap);
  return st;
}

void ddp__timeline_close(ddp__timeline_t *tl) {
  if (!tl) return;
  pthread_mutex_destroy(&tl->mu);
  free(tl->buf);
  free(tl);
}
