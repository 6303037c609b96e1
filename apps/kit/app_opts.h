/* The apps' one command-line parser: a program describes its options in a table (name, type,
 * target, range or choices) and app_opts_parse() fills the targets from argv, accepting
 * `--opt value` and `--opt=value`, and refusing with one message that names the option and the
 * value ("gpt_train: --steps: 'abc' is not an integer in [1, 1000000]"). Usage texts stay
 * hand-written per program. Definitions in app_opts.c. */
#ifndef APP_OPTS_H
#define APP_OPTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  APP_OPT_END = 0, /* the table's last entry */
  APP_OPT_INT,     /* int *, decimal in [min, max] */
  APP_OPT_LONG,    /* long *, decimal in [min, max] */
  APP_OPT_U64,     /* uint64_t *, decimal digits only, the whole 0 .. 2^64-1 */
  APP_OPT_DOUBLE,  /* double *, a number in [dmin, dmax] */
  APP_OPT_STR,     /* const char **, any text (a file, a folder, a name) */
  APP_OPT_ENUM,    /* int *, one of choices (the value at the same index of values, or the index) */
  APP_OPT_FLAG,    /* int *, no value: stores min */
  APP_OPT_CUSTOM   /* parse(value, target) == 0, else "is not <what>" */
} app_opt_kind_t;

typedef struct app_opt {
  const char *names; /* "--steps", or aliases "-J|--json" */
  app_opt_kind_t kind;
  void *target;
  long min, max;              /* APP_OPT_INT/LONG range; APP_OPT_FLAG: the value stored */
  double dmin, dmax;          /* APP_OPT_DOUBLE range */
  const char *const *choices; /* APP_OPT_ENUM: the names, NULL-terminated */
  const int *values;          /* APP_OPT_ENUM: the value of each name (NULL: its index) */
  int (*parse)(const char *value, void *target); /* APP_OPT_CUSTOM */
  const char *what;           /* APP_OPT_CUSTOM: what a good value is ("a size such as 64M") */
  int *seen;                  /* optional: set to the argv index where the option was last given */
} app_opt_t;

/* Table entries. */
#define APP_INT(name, ptr, lo, hi) {.names = (name), .kind = APP_OPT_INT, .target = (ptr), .min = (lo), .max = (hi)}
#define APP_LONG(name, ptr, lo, hi) {.names = (name), .kind = APP_OPT_LONG, .target = (ptr), .min = (lo), .max = (hi)}
#define APP_U64(name, ptr) {.names = (name), .kind = APP_OPT_U64, .target = (ptr)}
#define APP_DOUBLE(name, ptr, lo, hi) \
  {.names = (name), .kind = APP_OPT_DOUBLE, .target = (ptr), .dmin = (lo), .dmax = (hi)}
#define APP_STR(name, ptr) {.names = (name), .kind = APP_OPT_STR, .target = (ptr)}
#define APP_ENUM(name, ptr, choices_, values_) \
  {.names = (name), .kind = APP_OPT_ENUM, .target = (ptr), .choices = (choices_), .values = (values_)}
#define APP_FLAG(name, ptr, value) {.names = (name), .kind = APP_OPT_FLAG, .target = (ptr), .min = (value)}
#define APP_CUSTOM(name, ptr, fn, what_) \
  {.names = (name), .kind = APP_OPT_CUSTOM, .target = (ptr), .parse = (fn), .what = (what_)}
#define APP_OPTS_END {.names = NULL, .kind = APP_OPT_END}

enum { APP_OPTS_ERROR = -1, APP_OPTS_OK = 0, APP_OPTS_HELP = 1 };

/* Parses argv[1 .. argc-1] against opts (ended by APP_OPTS_END) in order, a later option
 * overriding an earlier one. Returns APP_OPTS_OK, APP_OPTS_HELP on -h/--help (nothing printed:
 * the caller prints its usage), or APP_OPTS_ERROR after one line "PROG: ..." on err (NULL:
 * quiet, as on ranks other than 0). Targets of options not given keep their values (the
 * defaults); after an error some targets may have been set. */
int app_opts_parse(const char *prog, const app_opt_t *opts, int argc, char **argv, FILE *err);

#ifdef __cplusplus
}
#endif

#endif /* APP_OPTS_H */
