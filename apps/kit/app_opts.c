/* The apps' table-driven option parser (app_opts.h): every program's options, one set of
 * rules for values and one wording for refusals. */
#include "app_opts.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static void say(FILE *err, const char *prog, const char *fmt, ...) {
  if (!err) return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(err, "%s: ", prog);
  vfprintf(err, fmt, ap);
  fputc('\n', err);
  va_end(ap);
}

/* Whether key (klen bytes) is one of the '|'-separated names. */
static int matches(const char *names, const char *key, size_t klen) {
  for (const char *p = names; *p;) {
    const char *bar = strchr(p, '|');
    size_t n = bar ? (size_t)(bar - p) : strlen(p);
    if (n == klen && !strncmp(p, key, n)) return 1;
    if (!bar) break;
    p = bar + 1;
  }
  return 0;
}

static const app_opt_t *find(const app_opt_t *opts, const char *key, size_t klen) {
  for (const app_opt_t *o = opts; o->kind != APP_OPT_END; o++)
    if (matches(o->names, key, klen)) return o;
  return NULL;
}

static int parse_integer(const char *v, long lo, long hi, long *out) {
  char *end = NULL;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (errno || end == v || *end || x < lo || x > hi) return -1;
  *out = x;
  return 0;
}

static int parse_u64(const char *v, uint64_t *out) {
  char *end = NULL;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 10);
  if (v[0] < '0' || v[0] > '9' || *end || errno == ERANGE) return -1;
  *out = (uint64_t)x;
  return 0;
}

static int parse_double(const char *v, double lo, double hi, double *out) {
  char *end = NULL;
  errno = 0;
  double x = strtod(v, &end);
  if (errno || end == v || *end || !(x >= lo && x <= hi)) return -1;
  *out = x;
  return 0;
}

static int parse_enum(const app_opt_t *o, const char *v) {
  for (int k = 0; o->choices[k]; k++)
    if (!strcmp(v, o->choices[k])) {
      *(int *)o->target = o->values ? o->values[k] : k;
      return 0;
    }
  return -1;
}

/* "is not one of a, b, c" for an enum's refusal. */
static void say_enum(FILE *err, const char *prog, const char *key, const app_opt_t *o,
                     const char *v) {
  char list[256] = "";
  size_t used = 0;
  for (int k = 0; o->choices[k] && used < sizeof list; k++) {
    int n = snprintf(list + used, sizeof list - used, "%s%s", k ? ", " : "", o->choices[k]);
    if (n < 0) break;
    used += (size_t)n;
  }
  say(err, prog, "%s: '%s' is not one of %s", key, v, list);
}

/* Stores value v of option o (given as key); 0 ok, -1 refused (message said). */
static int store(const char *prog, const char *key, const app_opt_t *o, const char *v, FILE *err) {
  long x = 0;
  switch (o->kind) {
    case APP_OPT_INT:
    case APP_OPT_LONG:
      if (parse_integer(v, o->min, o->max, &x)) {
        say(err, prog, "%s: '%s' is not an integer in [%ld, %ld]", key, v, o->min, o->max);
        return -1;
      }
      if (o->kind == APP_OPT_INT) *(int *)o->target = (int)x;
      else *(long *)o->target = x;
      return 0;
    case APP_OPT_U64:
      if (parse_u64(v, (uint64_t *)o->target) == 0) return 0;
      say(err, prog, "%s: '%s' is not an integer in [0, 18446744073709551615]", key, v);
      return -1;
    case APP_OPT_DOUBLE:
      if (parse_double(v, o->dmin, o->dmax, (double *)o->target) == 0) return 0;
      say(err, prog, "%s: '%s' is not a number in [%g, %g]", key, v, o->dmin, o->dmax);
      return -1;
    case APP_OPT_STR:
      *(const char **)o->target = v;
      return 0;
    case APP_OPT_ENUM:
      if (parse_enum(o, v) == 0) return 0;
      say_enum(err, prog, key, o, v);
      return -1;
    case APP_OPT_CUSTOM:
      if (o->parse(v, o->target) == 0) return 0;
      say(err, prog, "%s: '%s' is not %s", key, v, o->what ? o->what : "a valid value");
      return -1;
    case APP_OPT_FLAG:
    case APP_OPT_END:
      break;
  }
  return -1;
}

int app_opts_parse(const char *prog, const app_opt_t *opts, int argc, char **argv, FILE *err) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *eq = NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) return APP_OPTS_HELP;
    if (!strncmp(a, "--", 2)) eq = strchr(a, '=');
    size_t klen = eq ? (size_t)(eq - a) : strlen(a);
    const app_opt_t *o = find(opts, a, klen);
    if (!o) {
      say(err, prog, "unknown option '%s' (see --help)", a);
      return APP_OPTS_ERROR;
    }
    int at = i;
    char key[64];
    snprintf(key, sizeof key, "%.*s", (int)(klen < 63 ? klen : 63), a);
    if (o->kind == APP_OPT_FLAG) {
      if (eq) {
        say(err, prog, "%s takes no value, got '%s'", key, eq + 1);
        return APP_OPTS_ERROR;
      }
      *(int *)o->target = (int)o->min;
    } else {
      const char *v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
      if (!v) {
        say(err, prog, "%s needs a value", key);
        return APP_OPTS_ERROR;
      }
      if (store(prog, key, o, v, err)) return APP_OPTS_ERROR;
    }
    if (o->seen) *o->seen = at;
  }
  return APP_OPTS_OK;
}
