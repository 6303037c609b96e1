/* apps/kit/app_opts: good and bad command lines against one table of every option kind; each
 * refusal must name the option and the value. No MPI, well under a second. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "app_opts.h"

typedef struct {
  int steps;
  long warmup;
  uint64_t seed;
  double lr;
  const char *data;
  int hook, flag, size;
  int steps_at, flag_at;
} vals_t;

static int parse_even(const char *v, void *target) { /* a custom kind: an even digit */
  if (!v[0] || v[1] || v[0] < '0' || v[0] > '8' || (v[0] - '0') % 2) return -1;
  *(int *)target = v[0] - '0';
  return 0;
}

static const char *const hooks[] = {"none", "fp16", "bf16", "half", NULL};
static const int hook_values[] = {10, 11, 12, 11};

/* Parses the words of line (space separated) into v; the message goes to msg. */
static int run(const char *line, vals_t *v, char *msg, size_t cap) {
  *v = (vals_t){.steps = 7, .warmup = -1, .lr = 0.5, .data = "dflt", .hook = 10, .size = -1};
  app_opt_t opts[] = {
      APP_INT("--steps", &v->steps, 1, 1000000),
      APP_LONG("-w|--warmup", &v->warmup, 0, 100),
      APP_U64("--seed", &v->seed),
      APP_DOUBLE("--lr", &v->lr, 0.0, 10.0),
      APP_STR("--data", &v->data),
      APP_ENUM("--hook", &v->hook, hooks, hook_values),
      APP_FLAG("--on", &v->flag, 1),
      APP_FLAG("--off", &v->flag, 0),
      APP_CUSTOM("--even", &v->size, parse_even, "an even digit"),
      APP_OPTS_END};
  opts[0].seen = &v->steps_at;
  opts[6].seen = &v->flag_at;
  static char buf[512];
  char *argv[32] = {"prog"};
  int argc = 1;
  snprintf(buf, sizeof buf, "%s", line);
  for (char *save = NULL, *t = strtok_r(buf, " ", &save); t && argc < 31; t = strtok_r(NULL, " ", &save))
    argv[argc++] = t;
  FILE *f = tmpfile();
  if (!f) return -99;
  int rc = app_opts_parse("prog", opts, argc, argv, f);
  rewind(f);
  size_t n = fread(msg, 1, cap - 1, f);
  msg[n] = '\0';
  fclose(f);
  return rc;
}

static int failures = 0;

static void expect(const char *line, int want_rc, const char *want_msg) {
  vals_t v;
  char msg[512];
  int rc = run(line, &v, msg, sizeof msg);
  int ok = rc == want_rc && (want_msg ? strstr(msg, want_msg) != NULL : msg[0] == '\0');
  if (!ok) {
    printf("FAIL: '%s': rc %d (want %d), message '%s' (want '%s')\n", line, rc, want_rc, msg,
           want_msg ? want_msg : "");
    failures++;
  }
}

#define CHECK(cond)                                     \
  do {                                                  \
    if (!(cond)) {                                      \
      printf("FAIL: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                       \
    }                                                   \
  } while (0)

int main(void) {
  vals_t v;
  char msg[512];
  /* Defaults stay when nothing is given; every kind, both spellings, aliases. */
  CHECK(run("", &v, msg, sizeof msg) == APP_OPTS_OK && v.steps == 7 && v.warmup == -1 &&
        !strcmp(v.data, "dflt") && v.hook == 10 && v.steps_at == 0);
  CHECK(run("--steps 12 -w 3 --seed 18446744073709551615 --lr=0.25 --data x/y --hook bf16 --on "
            "--even 4", &v, msg, sizeof msg) == APP_OPTS_OK);
  CHECK(v.steps == 12 && v.warmup == 3 && v.seed == UINT64_MAX && v.lr == 0.25 &&
        !strcmp(v.data, "x/y") && v.hook == 12 && v.flag == 1 && v.size == 4 && !msg[0]);
  CHECK(run("--warmup=100 --hook=half --data= --steps 1 --steps 9", &v, msg, sizeof msg) == 0 &&
        v.warmup == 100 && v.hook == 11 && !strcmp(v.data, "") && v.steps == 9 && v.steps_at == 6);
  CHECK(run("--on --off", &v, msg, sizeof msg) == 0 && v.flag == 0 && v.flag_at == 1);
  CHECK(run("--lr -0 --warmup 0", &v, msg, sizeof msg) == 0 && v.lr == 0.0 && v.warmup == 0);
  CHECK(run("--steps 3 --help --bogus", &v, msg, sizeof msg) == APP_OPTS_HELP && !msg[0]);
  expect("-h", APP_OPTS_HELP, NULL);
  /* Refusals: one line naming the option and the value. */
  expect("--steps abc", APP_OPTS_ERROR, "prog: --steps: 'abc' is not an integer in [1, 1000000]\n");
  expect("--steps 0", APP_OPTS_ERROR, "--steps: '0' is not an integer in [1, 1000000]");
  expect("--steps 12x", APP_OPTS_ERROR, "'12x' is not an integer");
  expect("--steps 99999999999999999999", APP_OPTS_ERROR, "is not an integer");
  expect("--steps=", APP_OPTS_ERROR, "--steps: '' is not an integer");
  expect("-w 101", APP_OPTS_ERROR, "-w: '101' is not an integer in [0, 100]");
  expect("--warmup=-1", APP_OPTS_ERROR, "--warmup: '-1' is not an integer in [0, 100]");
  expect("--seed -3", APP_OPTS_ERROR, "--seed: '-3' is not an integer in [0, 18446744073709551615]");
  expect("--seed 18446744073709551616", APP_OPTS_ERROR, "'18446744073709551616' is not an integer");
  expect("--seed +3", APP_OPTS_ERROR, "'+3' is not an integer");
  expect("--lr 11", APP_OPTS_ERROR, "--lr: '11' is not a number in [0, 10]");
  expect("--lr nan", APP_OPTS_ERROR, "--lr: 'nan' is not a number");
  expect("--lr 1e400", APP_OPTS_ERROR, "'1e400' is not a number");
  expect("--lr 0.1x", APP_OPTS_ERROR, "'0.1x' is not a number");
  expect("--hook fp8", APP_OPTS_ERROR, "--hook: 'fp8' is not one of none, fp16, bf16, half");
  expect("--even 3", APP_OPTS_ERROR, "--even: '3' is not an even digit");
  expect("--steps", APP_OPTS_ERROR, "prog: --steps needs a value");
  expect("--data", APP_OPTS_ERROR, "--data needs a value");
  expect("--on=1", APP_OPTS_ERROR, "--on takes no value, got '1'");
  expect("--bogus", APP_OPTS_ERROR, "prog: unknown option '--bogus' (see --help)");
  expect("--steps 3 --step 4", APP_OPTS_ERROR, "unknown option '--step'");
  expect("-w=3", APP_OPTS_ERROR, "unknown option '-w=3'");
  expect("steps", APP_OPTS_ERROR, "unknown option 'steps'");
  /* Quiet: no stream, same verdict. */
  app_opt_t none[] = {APP_OPTS_END};
  char *argv[] = {"prog", "--x", NULL};
  CHECK(app_opts_parse("prog", none, 2, argv, NULL) == APP_OPTS_ERROR);
  CHECK(app_opts_parse("prog", none, 1, argv, NULL) == APP_OPTS_OK);
  if (failures) {
    printf("app_opts_unit: %d failure(s)\n", failures);
    return 1;
  }
  printf("app_opts_unit: PASS\n");
  return 0;
}
