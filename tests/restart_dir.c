/* Unit test of ddp_train's checkpoint directory (apps/kit/ckpt_dir.c), no MPI job: names and
 * the LATEST pointer (every truncation and every 1-byte change of a valid pointer is refused
 * or still names a well-formed checkpoint), a save writes the file, then LATEST, then prunes to
 * --keep; the resume order (LATEST first, then older ones; newer than LATEST ignored; every
 * file when LATEST is damaged); abandoned newer checkpoints and stale temporary files removed;
 * a failed save (folder gone read-only: a path under a regular file) leaves everything as it
 * was; a directory that cannot be created or written is refused by ckdir_prepare.
 * Usage: restart_dir SCRATCH_DIR */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "ckpt_dir.h"
#include "ddp_test.h"

static char g_dir[4096];

static int exists(const char *name) {
  char p[4200];
  snprintf(p, sizeof p, "%s/%s", g_dir, name);
  return access(p, F_OK) == 0;
}

static void put_file(const char *name, const char *text) {
  char p[4200];
  snprintf(p, sizeof p, "%s/%s", g_dir, name);
  FILE *f = fopen(p, "wb");
  CHECK(f != NULL, "cannot create %s: %s", p, strerror(errno));
  if (f) {
    fputs(text, f);
    fclose(f);
  }
}

/* The candidate steps as "a,b,c" (for one-line comparisons). */
static void candidates(char *out, size_t len, char *note, size_t notelen) {
  uint64_t *s = NULL;
  size_t n = 0;
  char err[512] = "";
  out[0] = '\0';
  CHECK(ckdir_candidates(g_dir, &s, &n, note, notelen, err, sizeof err) == 0, "candidates: %s", err);
  for (size_t i = 0; i < n; i++) {
    size_t used = strlen(out);
    snprintf(out + used, len - used, "%s%llu", i ? "," : "", (unsigned long long)s[i]);
  }
  free(s);
}

static void names_and_pointer(void) {
  char name[CKDIR_NAME_BYTES], err[256];
  uint64_t step = 0;
  CHECK(ckdir_name(120, name, sizeof name) == 0 && strcmp(name, "ckpt-000000000120.ddp") == 0,
        "name of step 120: %s", name);
  CHECK(ckdir_parse_name(name, &step) == 0 && step == 120, "parse back: %llu", (unsigned long long)step);
  CHECK(ckdir_name(UINT64_C(1000000000000), name, sizeof name) != 0, "step 10^12 accepted");
  const char *bad[] = {"ckpt-000000000120.ddp.tmp.5", "ckpt-00000000012.ddp", "ckpt-0000000001x0.ddp",
                       "xckpt-000000000120.ddp", "ckpt-000000000120.dd", "LATEST", ""};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    CHECK(ckdir_parse_name(bad[i], &step) != 0, "'%s' taken for a checkpoint name", bad[i]);
  const char good[] = "ckpt-000000000120.ddp\n";
  size_t gl = strlen(good);
  CHECK(ckdir_parse_pointer(good, gl, &step, err, sizeof err) == 0 && step == 120, "%s", err);
  CHECK(ckdir_parse_pointer(good, gl - 1, &step, err, sizeof err) == 0 && step == 120,
        "without newline: %s", err);
  /* Every truncation but the one dropping the newline is refused. */
  for (size_t n = 0; n < gl - 1; n++)
    CHECK(ckdir_parse_pointer(good, n, &step, err, sizeof err) != 0, "truncated to %zu accepted", n);
  /* Every 1-byte change is refused, unless it turns one digit into another (still a name). */
  char buf[64];
  int refused = 0, renamed = 0;
  for (size_t i = 0; i < gl; i++)
    for (int b = 0; b < 256; b++) {
      if ((unsigned char)good[i] == b) continue;
      memcpy(buf, good, gl);
      buf[i] = (char)b;
      if (ckdir_parse_pointer(buf, gl, &step, err, sizeof err) != 0) {
        refused++;
        continue;
      }
      renamed++;
      CHECK(i >= 5 && i < 17 && b >= '0' && b <= '9', "byte %zu = 0x%02x accepted", i, b);
    }
  CHECK(renamed == 12 * 9 && refused == (int)gl * 255 - renamed, "%d refused, %d renamed", refused, renamed);
  CHECK(ckdir_parse_pointer("ckpt-000000000120.ddp\n\n", gl + 1, &step, err, sizeof err) != 0 &&
            strstr(err, "unexpected") != NULL,
        "trailing data accepted (%s)", err);
}

static void save(uint64_t step, unsigned keep, char *note, size_t notelen) {
  char err[512] = "";
  char body[64];
  snprintf(body, sizeof body, "checkpoint of step %llu", (unsigned long long)step);
  CHECK(ckdir_save(g_dir, step, body, strlen(body), keep, note, notelen, err, sizeof err) == 0,
        "save %llu: %s", (unsigned long long)step, err);
}

static void save_and_resume_order(void) {
  char note[2048], list[256], err[512];
  CHECK(ckdir_prepare(g_dir, err, sizeof err) == 0, "prepare: %s", err);
  candidates(list, sizeof list, note, sizeof note);
  CHECK(strcmp(list, "") == 0 && note[0] == '\0', "empty folder: '%s' (%s)", list, note);
  save(5, 2, note, sizeof note);
  save(10, 2, note, sizeof note);
  save(15, 2, note, sizeof note);
  CHECK(!exists("ckpt-000000000005.ddp") && exists("ckpt-000000000010.ddp") &&
            exists("ckpt-000000000015.ddp"),
        "keep 2 after 5, 10, 15: wrong files");
  candidates(list, sizeof list, note, sizeof note);
  CHECK(strcmp(list, "15,10") == 0, "order '%s'", list);
  /* A save cut short between its file and LATEST: the newer file is not offered. */
  put_file("ckpt-000000000020.ddp", "half done");
  candidates(list, sizeof list, note, sizeof note);
  CHECK(strcmp(list, "15,10") == 0 && strstr(note, "newer than LATEST"), "'%s' (%s)", list, note);
  /* LATEST damaged or missing: every checkpoint, newest first, and a note. */
  put_file("LATEST", "garbage");
  candidates(list, sizeof list, note, sizeof note);
  CHECK(strcmp(list, "20,15,10") == 0 && strstr(note, "unusable"), "'%s' (%s)", list, note);
  char p[4200];
  snprintf(p, sizeof p, "%s/LATEST", g_dir);
  unlink(p);
  candidates(list, sizeof list, note, sizeof note);
  CHECK(strcmp(list, "20,15,10") == 0 && strstr(note, "missing"), "'%s' (%s)", list, note);
  /* LATEST names a file that is gone. */
  put_file("LATEST", "ckpt-000000000012.ddp\n");
  candidates(list, sizeof list, note, sizeof note);
  CHECK(strcmp(list, "10") == 0 && strstr(note, "missing"), "'%s' (%s)", list, note);
  /* Resumed from 10 and saving 12: 20 and 15 belong to an abandoned timeline; a stale
   * temporary file of a dead writer (pid 1 is alive; a huge pid is not) goes too. */
  put_file("ckpt-000000000013.ddp.tmp.999999999", "x");
  put_file("LATEST.tmp.1", "x");
  put_file("unrelated.txt", "x");
  save(12, 2, note, sizeof note);
  CHECK(exists("ckpt-000000000012.ddp") && exists("ckpt-000000000010.ddp") &&
            !exists("ckpt-000000000015.ddp") && !exists("ckpt-000000000020.ddp"),
        "after the save of 12: wrong files");
  CHECK(strstr(note, "abandoned") && strstr(note, "stale temporary file ckpt-000000000013.ddp.tmp.999999999"),
        "note: %s", note);
  CHECK(!exists("ckpt-000000000013.ddp.tmp.999999999") && exists("LATEST.tmp.1") &&
            exists("unrelated.txt"),
        "temporary files: the dead writer's must go, a live one's and others' stay");
  candidates(list, sizeof list, note, sizeof note);
  CHECK(strcmp(list, "12,10") == 0 && note[0] == '\0', "'%s' (%s)", list, note);
  CHECK(ckdir_save(g_dir, 13, "x", 1, 0, note, sizeof note, err, sizeof err) != 0 &&
            strstr(err, "keep 0"),
        "keep 0 accepted (%s)", err);
}

/* Bad folders: a path under a regular file cannot be created; a save there fails and a
 * failed save leaves the good folder's files and LATEST as they were. */
static void bad_folders(void) {
  char err[512] = "", bad[4200], note[512];
  snprintf(bad, sizeof bad, "%s/unrelated.txt/ck", g_dir);
  CHECK(ckdir_prepare(bad, err, sizeof err) != 0 && strstr(err, "cannot create checkpoint directory"),
        "under a file: %s", err);
  snprintf(bad, sizeof bad, "%s/unrelated.txt", g_dir);
  CHECK(ckdir_prepare(bad, err, sizeof err) != 0 && strstr(err, "not a directory"), "a file: %s", err);
  snprintf(bad, sizeof bad, "%s/unrelated.txt/ck", g_dir);
  CHECK(ckdir_save(bad, 30, "x", 1, 2, note, sizeof note, err, sizeof err) != 0, "save under a file");
  char list[256];
  candidates(list, sizeof list, note, sizeof note);
  CHECK(strcmp(list, "12,10") == 0, "good folder changed: '%s'", list);
}

int main(int argc, char **argv) {
  const char *base = argc > 1 ? argv[1] : "/tmp";
  mkdir(base, 0755);
  snprintf(g_dir, sizeof g_dir, "%s/restart_dir.%ld", base, (long)getpid());
  names_and_pointer();
  save_and_resume_order();
  bad_folders();
  char cmd[4300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  if (system(cmd) != 0) fprintf(stderr, "restart_dir: could not remove %s\n", g_dir);
  return ddp_test_finish("restart_dir");
}
