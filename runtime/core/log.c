/* Logging: DDP_DEBUG=WARN|INFO|TRACE, each line prefixed "host:pid:rank LEVEL", to stderr or
 * to one file per rank (DDP_DEBUG_FILE=name.%r, like NCCL_DEBUG_FILE). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ddp_internal.h"

/* Expands %r (rank), %h (host), %p (pid) and %% in a file-name pattern. */
static void expand_pattern(char *out, size_t cap, const char *pat, int rank, const char *host) {
  size_t o = 0;
  for (const char *p = pat; *p && o + 1 < cap; p++) {
    int n = 0;
    if (p[0] == '%' && p[1] == 'r') n = snprintf(out + o, cap - o, "%d", rank), p++;
    else if (p[0] == '%' && p[1] == 'h') n = snprintf(out + o, cap - o, "%s", host), p++;
    else if (p[0] == '%' && p[1] == 'p') n = snprintf(out + o, cap - o, "%ld", (long)getpid()), p++;
    else if (p[0] == '%' && p[1] == '%') out[o] = '%', n = 1, p++;
    else out[o] = *p, n = 1;
    if (n < 0) break;
    o += (size_t)n;
    if (o >= cap) o = cap - 1;
  }
  out[o] = '\0';
}

ddp_status_t ddp__logger_open(ddp__logger_t *lg, const ddp__config_t *cfg, int rank,
                              const char *host) {
  memset(lg, 0, sizeof *lg);
  lg->level = cfg->debug;
  lg->fp = stderr;
  snprintf(lg->prefix, sizeof lg->prefix, "%s:%ld:%d", host, (long)getpid(), rank);
  pthread_mutex_init(&lg->mu, NULL);
  if (cfg->debug_file[0]) {
    char path[512];
    expand_pattern(path, sizeof path, cfg->debug_file, rank, host);
    FILE *fp = fopen(path, "w");
    if (!fp) {
      pthread_mutex_destroy(&lg->mu);
      return ddp__error(DDP_EIO, "DDP_DEBUG_FILE='%s': cannot open '%s' for writing",
                        cfg->debug_file, path);
    }
    lg->fp = fp;
    lg->owns_fp = 1;
  }
  return DDP_OK;
}

void ddp__logger_close(ddp__logger_t *lg) {
  if (lg->owns_fp && lg->fp) fclose(lg->fp);
  lg->fp = NULL;
  lg->owns_fp = 0;
  pthread_mutex_destroy(&lg->mu);
}

void ddp__logv(ddp__logger_t *lg, ddp_log_level_t level, const char *fmt, va_list ap) {
  static const char *names[] = {"NONE", "WARN", "INFO", "TRACE"};
  if (!lg->fp || level > lg->level || level == DDP_LOG_NONE) return;
  char line[2048];
  int n = snprintf(line, sizeof line, "%s mpiddp %s ", lg->prefix, names[level]);
  if (n < 0) return;
  size_t len = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
  if (len < sizeof line - 1) {
    int m = vsnprintf(line + len, sizeof line - len, fmt, ap);
    if (m > 0) len += (size_t)m;
    if (len > sizeof line - 2) len = sizeof line - 2; /* truncated: keep room for '\n' */
  }
  line[len++] = '\n';
  /* One write per line: with several ranks on one terminal (unbuffered stderr) a line written
   * in pieces interleaves with the other ranks' lines. */
  pthread_mutex_lock(&lg->mu);
  fwrite(line, 1, len, lg->fp);
  fflush(lg->fp);
  pthread_mutex_unlock(&lg->mu);
}

void ddp__log(ddp__logger_t *lg, ddp_log_level_t level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ddp__logv(lg, level, fmt, ap);
  va_end(ap);
}
