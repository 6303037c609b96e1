/* ddp_train's checkpoint file: model parameters, optimizer state (SGD momentum or AdamW's
 * moments and step count), sampler position and RNG state, written atomically (temporary
 * file, fsync, rename) with a versioned header and a CRC32 (zlib) over everything before it.
 * Definitions in checkpoint.c; the reader works on a byte buffer so a fuzz target can call
 * ckpt_parse() directly.
 *
 * Layout (all integers little-endian, floats IEEE f32 little-endian), version 2:
 *   off  size  field
 *     0     8  magic "DDPCKPT\0"
 *     8     4  version (CKPT_VERSION = 2; version 1 files are read too, see below)
 *    12     4  header_bytes (CKPT_HEADER_BYTES = 144: offset of the parameter-count table)
 *    16    16  model name, NUL-padded
 *    32     4  nparams (1 .. CKPT_MAX_PARAMS)
 *    36     4  world size at save time
 *    40     8  per-rank batch
 *    48     8  seed
 *    56     8  epoch (sampler epoch being trained)
 *    64     8  step_in_epoch (batches of that epoch already done)
 *    72     8  global step (optimizer steps done)
 *    80     8  total parameter elements (sum of the table)
 *    88     8  RNG state (the app's splitmix64 stream)
 *    96     8  f64 running train-loss sum of the current epoch
 *   104     8  steps in that sum
 *   112     8  epochs of the run that wrote it (informational)
 *   120     4  f32 loss scale of --amp fp16 (0 without dynamic scaling)
 *   124     4  clean steps since the scale last changed
 *   128     4  optimizer kind (train_optim_kind_t: 0 SGD, 1 AdamW)
 *   132     4  nstate: state buffers per tensor (1 .. CKPT_MAX_STATE; SGD 1, AdamW 2)
 *   136     8  optimizer step count (AdamW's bias-correction t)
 *   144  8*np  u64 element count of each parameter tensor
 *     .  4*T   parameters (T = total), in registration order
 *     .  4*T   state buffer 0 (SGD: momentum; AdamW: exp_avg), same order
 *     .  4*T   ... up to buffer nstate-1 (AdamW: exp_avg_sq)
 *     .     4  CRC32 of every byte before it
 * The state is always the full tensors' (a run with sharded optimizer state, --zero, gathers
 * the shards to rank 0 before writing and every rank takes its own range back on resume), so a
 * file does not depend on how the state was sharded.
 * Version 1 (header_bytes 128, no fields 128..143, one state buffer: SGD momentum) is still
 * read: it parses as optimizer SGD, nstate 1, step count = global step.
 * Errors never abort: every function returns 0 or -1 with a message in err. */
#ifndef CHECKPOINT_H
#define CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#define CKPT_MAGIC "DDPCKPT"
#define CKPT_VERSION 2u
#define CKPT_HEADER_BYTES 144u
#define CKPT_V1_HEADER_BYTES 128u
#define CKPT_MAX_STATE 4u
#define CKPT_MAX_PARAMS 4096u
/* 16 GiB of parameters is far beyond ddp_train's models; the cap keeps size arithmetic safe. */
#define CKPT_MAX_TOTAL (UINT64_C(1) << 32)

typedef struct ckpt_state {
  char model[16];
  uint32_t nparams;
  int32_t world;
  uint64_t batch, seed;
  uint64_t epoch, step_in_epoch, global_step;
  uint64_t total;
  uint64_t rng;
  double loss_sum;
  uint64_t loss_steps;
  uint64_t epochs;
  float loss_scale;
  uint32_t scale_clean;
  uint32_t optim;      /* train_optim_kind_t of the state buffers */
  uint32_t nstate;     /* state buffers per tensor; 0 in ckpt_serialize: 1 (SGD momentum) */
  uint64_t optim_steps; /* optimizer step count */
} ckpt_state_t;

/* Where the variable-size parts lie inside a parsed buffer (byte offsets; the data may be
 * unaligned, so copy it out with ckpt_copy_floats / ckpt_u64_at). */
typedef struct ckpt_view {
  ckpt_state_t st;
  size_t counts_off, params_off, bytes;
  size_t momentum_off; /* state buffer 0 (SGD momentum, AdamW exp_avg) */
  size_t state_off;    /* = momentum_off; buffer k at state_off + 4 * total * k */
  uint32_t version;
} ckpt_view_t;

/* The u64 stored (little-endian) at byte offset off. */
uint64_t ckpt_u64_at(const void *buf, size_t off);

/* zlib's crc32 takes a uInt length: feed it in chunks. */
uint32_t ckpt_crc32(const void *buf, size_t bytes);

/* Size of a (version 2) checkpoint file for nparams tensors of `total` elements in all, with
 * nstate state buffers; ckpt_file_bytes is the one-buffer (SGD) size. */
size_t ckpt_file_bytes_state(uint32_t nparams, uint64_t total, uint32_t nstate);
size_t ckpt_file_bytes(uint32_t nparams, uint64_t total);

/* Validates a whole checkpoint held in buf[0 .. bytes-1]: magic, version, header size,
 * counts, exact file size, CRC. On success fills *v. Never reads outside the buffer. */
int ckpt_parse(const void *buf, size_t bytes, ckpt_view_t *v, char *err,
               size_t errlen);

/* Copies `count` f32 values stored at byte offset off into dst (host byte order). */
void ckpt_copy_floats(const void *buf, size_t off, float *dst, size_t count);

/* Checks that a parsed checkpoint fits the run: same model, tensor count and sizes, world
 * size and per-rank batch (the sampler position means a different data split otherwise). */
int ckpt_check_compatible(const void *buf, const ckpt_view_t *v, const char *model,
                          const size_t *counts, uint32_t nparams, int world,
                          uint64_t batch, uint64_t seed, char *err, size_t errlen);

/* Checks that the file's optimizer state fits the run's optimizer (kind, named by `name` in
 * the message, and nstate buffers): resuming AdamW from SGD momentum (a version 1 file, say)
 * is refused, never silently started from zero moments. */
int ckpt_check_optim(const ckpt_view_t *v, uint32_t kind, const char *name, uint32_t nstate,
                     char *err, size_t errlen);

/* Reads a whole file into a malloc'd buffer (caller frees). */
int ckpt_read_file(const char *path, void **out, size_t *bytes, char *err,
                   size_t errlen);

/* Parses the file at path (ckpt_read_file + ckpt_parse); for tools and fuzzing. Open/read
 * errors name the file; format errors do not (the caller knows which file it asked for). */
int ckpt_load_file(const char *path, void **buf, size_t *bytes, ckpt_view_t *v,
                   char *err, size_t errlen);

/* Serialises a checkpoint into a malloc'd buffer of ckpt_file_bytes_state(...) bytes. state
 * holds st->nstate * nparams tensors, buffer by buffer (state[k * nparams + i]: buffer k of
 * tensor i); st->nstate 0 means one buffer (SGD momentum); state NULL (an optimizer without
 * state) stores zeros. */
int ckpt_serialize(const ckpt_state_t *st, float *const *params,
                   float *const *state, const size_t *counts, void **out,
                   size_t *bytes, char *err, size_t errlen);

/* Writes buf to path atomically: path.tmp.<pid>, fsync, rename over path, fsync the folder.
 * On any failure the temporary file is removed and an existing path is left untouched. */
int ckpt_write_atomic(const char *path, const void *buf, size_t bytes, char *err,
                      size_t errlen);

#endif /* CHECKPOINT_H */
