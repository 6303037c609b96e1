/* ddp_train's checkpoint directory (--checkpoint-dir D --keep K): numbered checkpoint files,
 * each written atomically by ckpt_write_atomic (checkpoint.h), a small pointer file naming the
 * newest complete one, and pruning to the newest K. Apart from ddp_train so that tests and a
 * fuzz target can call it; it knows file names and order, not the checkpoint format.
 *
 *   D/ckpt-<global step, 12 digits>.ddp   one checkpoint per saved step
 *   D/LATEST                              "ckpt-....ddp\n": the newest checkpoint that was
 *                                         durable (fsynced, renamed, folder fsynced) before
 *                                         this pointer was itself replaced atomically
 *
 * A save writes the checkpoint, then LATEST, and only then removes what is beyond the newest
 * K at or below the saved step (and checkpoints above it: a timeline abandoned by resuming
 * from an older one), plus temporary files of writers that no longer run. So the previous
 * checkpoint is never touched before the new one and its pointer are durable; a failed write
 * (disk full, read-only) leaves the folder as it was. Errors never abort: every function
 * returns 0 or -1 with a message in err. */
#ifndef CKPT_DIR_H
#define CKPT_DIR_H

#include <stddef.h>
#include <stdint.h>

#define CKDIR_POINTER "LATEST"
#define CKDIR_NAME_BYTES 32 /* "ckpt-" + 12 digits + ".ddp" + NUL fits */

/* The file name of the checkpoint of global step `step` (< 10^12) into name[CKDIR_NAME_BYTES]. */
int ckdir_name(uint64_t step, char *name, size_t len);

/* 0 and *step when `name` is exactly a checkpoint file name of ckdir_name, else -1. */
int ckdir_parse_name(const char *name, uint64_t *step);

/* Parses the bytes of a LATEST file: one checkpoint file name, optionally ending in "\n",
 * nothing else. 0 and *step, or -1 with the reason in err. */
int ckdir_parse_pointer(const void *buf, size_t bytes, uint64_t *step, char *err, size_t errlen);

/* Creates dir (one level; its parent must exist) when missing and proves it writable by
 * creating, fsyncing and removing a probe file, so a run fails at start, not at its first
 * checkpoint. */
int ckdir_prepare(const char *dir, char *err, size_t errlen);

/* The checkpoint steps found in dir, newest first (malloc'd, caller frees; *n may be 0, a
 * missing folder counts as empty). */
int ckdir_scan(const char *dir, uint64_t **steps, size_t *n, char *err, size_t errlen);

/* Where a resume should look, in order: the checkpoint LATEST names (when that file exists),
 * then every older one, newest first; checkpoints newer than LATEST (a save cut short between
 * its file and its pointer) are not offered. Without a readable LATEST, every checkpoint,
 * newest first. note[] (may be "") says what was unusual (LATEST missing, damaged, naming a
 * missing file, newer files ignored). The list is malloc'd; *n may be 0. */
int ckdir_candidates(const char *dir, uint64_t **steps, size_t *n, char *note, size_t notelen,
                     char *err, size_t errlen);

/* Writes buf as the checkpoint of `step`, then LATEST, then prunes to the newest `keep` (>= 1)
 * at or below `step`. On error nothing of the folder's previous state is lost. note[] (may be
 * "") lists what the pruning removed beyond the usual (abandoned newer checkpoints, stale
 * temporary files) or could not remove. */
int ckdir_save(const char *dir, uint64_t step, const void *buf, size_t bytes, unsigned keep,
               char *note, size_t notelen, char *err, size_t errlen);

#endif /* CKPT_DIR_H */
