/* The training kit's checkpoint file (see checkpoint.h). */
#include "checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static void ckpt__put_u32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void ckpt__put_u64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t ckpt__get_u32(const unsigned char *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

static uint64_t ckpt__get_u64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

static uint64_t ckpt__f64_bits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

static double ckpt__bits_f64(uint64_t u) {
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

/* strerror text, cut short so messages with a path always fit. */
static const char *ckpt__errstr(void) { return strerror(errno); }

uint64_t ckpt_u64_at(const void *buf, size_t off) {
  return ckpt__get_u64((const unsigned char *)buf + off);
}

uint32_t ckpt_crc32(const void *buf, size_t bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const unsigned char *p = (const unsigned char *)buf;
  while (bytes > 0) {
    uInt n = bytes > (1u << 30) ? (1u << 30) : (uInt)bytes;
    crc = crc32(crc, p, n);
    p += n;
    bytes -= n;
  }
  return (uint32_t)crc;
}

/* Bytes of a file with header h, nparams tensors, total elements and nstate state buffers. */
static size_t ckpt__bytes(uint32_t h, uint32_t nparams, uint64_t total, uint32_t nstate) {
  return (size_t)h + 8u * (size_t)nparams + 4u * (1u + (size_t)nstate) * (size_t)total + 4u;
}

size_t ckpt_file_bytes_state(uint32_t nparams, uint64_t total, uint32_t nstate) {
  return ckpt__bytes(CKPT_HEADER_BYTES, nparams, total, nstate);
}

size_t ckpt_file_bytes(uint32_t nparams, uint64_t total) {
  return ckpt_file_bytes_state(nparams, total, 1);
}

/* The header's fields (version 1: SGD momentum, one state buffer). */
static void parse_fields(const unsigned char *p, uint32_t version, ckpt_state_t *out) {
  ckpt_state_t st;
  memset(&st, 0, sizeof st);
  memcpy(st.model, p + 16, 16);
  st.model[15] = '\0';
  st.nparams = ckpt__get_u32(p + 32);
  st.world = (int32_t)ckpt__get_u32(p + 36);
  st.batch = ckpt__get_u64(p + 40);
  st.seed = ckpt__get_u64(p + 48);
  st.epoch = ckpt__get_u64(p + 56);
  st.step_in_epoch = ckpt__get_u64(p + 64);
  st.global_step = ckpt__get_u64(p + 72);
  st.total = ckpt__get_u64(p + 80);
  st.rng = ckpt__get_u64(p + 88);
  st.loss_sum = ckpt__bits_f64(ckpt__get_u64(p + 96));
  st.loss_steps = ckpt__get_u64(p + 104);
  st.epochs = ckpt__get_u64(p + 112);
  uint32_t scale_bits = ckpt__get_u32(p + 120);
  memcpy(&st.loss_scale, &scale_bits, 4);
  st.scale_clean = ckpt__get_u32(p + 124);
  if (version == 1u) { /* SGD momentum, one buffer */
    st.optim = 0;
    st.nstate = 1;
    st.optim_steps = st.global_step;
  } else {
    st.optim = ckpt__get_u32(p + 128);
    st.nstate = ckpt__get_u32(p + 132);
    st.optim_steps = ckpt__get_u64(p + 136);
  }
  *out = st;
}

/* The header's counts in range; 0, or -1 with the message in err. */
static int check_fields(const ckpt_state_t *s, char *err, size_t errlen) {
  if (s->nstate < 1 || s->nstate > CKPT_MAX_STATE) {
    snprintf(err, errlen, "checkpoint header: %u optimizer state buffers, out of range 1..%u",
             s->nstate, CKPT_MAX_STATE);
    return -1;
  }
  if (s->nparams == 0 || s->nparams > CKPT_MAX_PARAMS) {
    snprintf(err, errlen, "checkpoint header: nparams %u out of range 1..%u", s->nparams,
             CKPT_MAX_PARAMS);
    return -1;
  }
  if (s->total == 0 || s->total > CKPT_MAX_TOTAL) {
    snprintf(err, errlen, "checkpoint header: %llu parameter elements out of range",
             (unsigned long long)s->total);
    return -1;
  }
  if (s->world < 1 || s->batch < 1) {
    snprintf(err, errlen, "checkpoint header: world %d, batch %llu", (int)s->world,
             (unsigned long long)s->batch);
    return -1;
  }
  return 0;
}

/* The per-tensor element counts after the header: each non-zero, together the total. */
static int check_counts(const unsigned char *p, uint32_t want_h, const ckpt_state_t *s, char *err,
                        size_t errlen) {
  uint64_t sum = 0;
  for (uint32_t i = 0; i < s->nparams; i++) {
    uint64_t c = ckpt__get_u64(p + want_h + 8u * i);
    if (c == 0 || c > s->total - sum) {
      snprintf(err, errlen, "checkpoint: tensor %u has %llu elements, inconsistent with the total",
               i, (unsigned long long)c);
      return -1;
    }
    sum += c;
  }
  if (sum != s->total) {
    snprintf(err, errlen, "checkpoint: tensor sizes add up to %llu, header says %llu",
             (unsigned long long)sum, (unsigned long long)s->total);
    return -1;
  }
  return 0;
}

int ckpt_parse(const void *buf, size_t bytes, ckpt_view_t *v, char *err,
               size_t errlen) {
  const unsigned char *p = (const unsigned char *)buf;
  if (!buf && bytes) {
    snprintf(err, errlen, "checkpoint buffer is NULL");
    return -1;
  }
  if (bytes < 8 || memcmp(p, CKPT_MAGIC, 8) != 0) {
    snprintf(err, errlen, "not a ddp_train checkpoint (bad magic)");
    return -1;
  }
  if (bytes < 16) {
    snprintf(err, errlen, "checkpoint truncated: %zu bytes, the header alone is %u", bytes,
             CKPT_V1_HEADER_BYTES + 4u);
    return -1;
  }
  uint32_t version = ckpt__get_u32(p + 8), hbytes = ckpt__get_u32(p + 12);
  if (version != CKPT_VERSION && version != 1u) {
    snprintf(err, errlen, "checkpoint version %u not supported (this build reads versions 1 and %u)",
             version, CKPT_VERSION);
    return -1;
  }
  uint32_t want_h = version == 1u ? CKPT_V1_HEADER_BYTES : CKPT_HEADER_BYTES;
  if (bytes < want_h + 4u) {
    snprintf(err, errlen, "checkpoint truncated: %zu bytes, the header alone is %u", bytes,
             want_h + 4u);
    return -1;
  }
  if (hbytes != want_h) {
    snprintf(err, errlen, "checkpoint header size %u, expected %u for version %u", hbytes, want_h,
             version);
    return -1;
  }
  ckpt_state_t st;
  parse_fields(p, version, &st);
  if (check_fields(&st, err, errlen)) return -1;
  size_t want = ckpt__bytes(want_h, st.nparams, st.total, st.nstate);
  if (bytes != want) {
    snprintf(err, errlen, "checkpoint %.200s: %zu bytes, the header describes %zu",
             bytes < want ? "truncated" : "has trailing data", bytes, want);
    return -1;
  }
  uint32_t stored = ckpt__get_u32(p + bytes - 4), actual = ckpt_crc32(p, bytes - 4);
  if (stored != actual) {
    snprintf(err, errlen, "checkpoint corrupt: CRC32 0x%08x, stored 0x%08x", actual, stored);
    return -1;
  }
  if (check_counts(p, want_h, &st, err, errlen)) return -1;
  v->st = st;
  v->version = version;
  v->counts_off = want_h;
  v->params_off = v->counts_off + 8u * st.nparams;
  v->momentum_off = v->params_off + 4u * (size_t)st.total;
  v->state_off = v->momentum_off;
  v->bytes = bytes;
  return 0;
}

void ckpt_copy_floats(const void *buf, size_t off, float *dst, size_t count) {
  const unsigned char *p = (const unsigned char *)buf + off;
  for (size_t k = 0; k < count; k++) {
    uint32_t u = ckpt__get_u32(p + 4 * k);
    memcpy(&dst[k], &u, 4);
  }
}

int ckpt_check_compatible(const void *buf, const ckpt_view_t *v, const char *model,
                          const size_t *counts, uint32_t nparams, int world,
                          uint64_t batch, uint64_t seed, char *err, size_t errlen) {
  if (strncmp(v->st.model, model, sizeof v->st.model) != 0) {
    snprintf(err, errlen, "checkpoint is for model '%.200s', this run trains '%.200s'", v->st.model, model);
    return -1;
  }
  if (v->st.nparams != nparams) {
    snprintf(err, errlen, "checkpoint has %u parameter tensors, the model has %u", v->st.nparams,
             nparams);
    return -1;
  }
  for (uint32_t i = 0; i < nparams; i++) {
    uint64_t c = ckpt_u64_at(buf, v->counts_off + 8u * i);
    if (c != (uint64_t)counts[i]) {
      snprintf(err, errlen, "checkpoint tensor %u has %llu elements, the model's has %zu", i,
               (unsigned long long)c, counts[i]);
      return -1;
    }
  }
  if (v->st.world != world || v->st.batch != batch) {
    snprintf(err, errlen,
             "checkpoint was written by %d ranks with batch %llu; this run has %d ranks with "
             "batch %llu (resume with the same -np and --batch)",
             (int)v->st.world, (unsigned long long)v->st.batch, world, (unsigned long long)batch);
    return -1;
  }
  if (v->st.seed != seed) {
    snprintf(err, errlen, "checkpoint was written with --seed %llu, this run has --seed %llu",
             (unsigned long long)v->st.seed, (unsigned long long)seed);
    return -1;
  }
  return 0;
}

int ckpt_check_optim(const ckpt_view_t *v, uint32_t kind, const char *name, uint32_t nstate,
                     char *err, size_t errlen) {
  if (v->st.optim != kind || v->st.nstate != nstate) {
    snprintf(err, errlen, "checkpoint holds the state of optimizer %u (%u buffer(s)%s), this run "
             "uses --optim %.40s (%u buffer(s)); resume with the optimizer that wrote it",
             v->st.optim, v->st.nstate, v->version == 1u ? ", a version 1 file: SGD momentum" : "",
             name ? name : "?", nstate);
    return -1;
  }
  return 0;
}

int ckpt_read_file(const char *path, void **out, size_t *bytes, char *err,
                   size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "cannot open checkpoint %.200s: %.200s", path, ckpt__errstr());
    return -1;
  }
  struct stat sb;
  if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
    snprintf(err, errlen, "checkpoint %.200s is not a regular file", path);
    fclose(f);
    return -1;
  }
  size_t n = (size_t)sb.st_size;
  unsigned char *buf = malloc(n ? n : 1);
  if (!buf) {
    snprintf(err, errlen, "out of memory reading checkpoint %.200s (%zu bytes)", path, n);
    fclose(f);
    return -1;
  }
  size_t got = fread(buf, 1, n, f);
  int bad = ferror(f);
  fclose(f);
  if (bad || got != n) {
    snprintf(err, errlen, "error reading checkpoint %.200s: %.200s", path, bad ? ckpt__errstr() : "short read");
    free(buf);
    return -1;
  }
  *out = buf;
  *bytes = n;
  return 0;
}

int ckpt_load_file(const char *path, void **buf, size_t *bytes, ckpt_view_t *v,
                   char *err, size_t errlen) {
  void *b = NULL;
  size_t n = 0;
  if (ckpt_read_file(path, &b, &n, err, errlen) != 0) return -1;
  if (ckpt_parse(b, n, v, err, errlen) != 0) {
    free(b);
    return -1;
  }
  *buf = b;
  *bytes = n;
  return 0;
}

int ckpt_serialize(const ckpt_state_t *st, float *const *params,
                   float *const *state, const size_t *counts, void **out,
                   size_t *bytes, char *err, size_t errlen) {
  uint32_t nstate = st->nstate ? st->nstate : 1;
  if (nstate > CKPT_MAX_STATE) {
    snprintf(err, errlen, "cannot checkpoint %u optimizer state buffers (at most %u)", nstate,
             CKPT_MAX_STATE);
    return -1;
  }
  uint64_t total = 0;
  for (uint32_t i = 0; i < st->nparams; i++) total += counts[i];
  if (st->nparams == 0 || st->nparams > CKPT_MAX_PARAMS || total == 0 || total > CKPT_MAX_TOTAL) {
    snprintf(err, errlen, "cannot checkpoint %u tensors of %llu elements", st->nparams,
             (unsigned long long)total);
    return -1;
  }
  size_t n = ckpt_file_bytes_state(st->nparams, total, nstate);
  unsigned char *b = calloc(1, n);
  if (!b) {
    snprintf(err, errlen, "out of memory for a %zu-byte checkpoint", n);
    return -1;
  }
  memcpy(b, CKPT_MAGIC, 8);
  ckpt__put_u32(b + 8, CKPT_VERSION);
  ckpt__put_u32(b + 12, CKPT_HEADER_BYTES);
  memcpy(b + 16, st->model, strnlen(st->model, 15));
  ckpt__put_u32(b + 32, st->nparams);
  ckpt__put_u32(b + 36, (uint32_t)st->world);
  ckpt__put_u64(b + 40, st->batch);
  ckpt__put_u64(b + 48, st->seed);
  ckpt__put_u64(b + 56, st->epoch);
  ckpt__put_u64(b + 64, st->step_in_epoch);
  ckpt__put_u64(b + 72, st->global_step);
  ckpt__put_u64(b + 80, total);
  ckpt__put_u64(b + 88, st->rng);
  ckpt__put_u64(b + 96, ckpt__f64_bits(st->loss_sum));
  ckpt__put_u64(b + 104, st->loss_steps);
  ckpt__put_u64(b + 112, st->epochs);
  uint32_t scale_bits;
  memcpy(&scale_bits, &st->loss_scale, 4);
  ckpt__put_u32(b + 120, scale_bits);
  ckpt__put_u32(b + 124, st->scale_clean);
  ckpt__put_u32(b + 128, st->optim);
  ckpt__put_u32(b + 132, nstate);
  ckpt__put_u64(b + 136, st->optim_steps);
  size_t off = CKPT_HEADER_BYTES;
  for (uint32_t i = 0; i < st->nparams; i++, off += 8) ckpt__put_u64(b + off, counts[i]);
  for (uint32_t which = 0; which <= nstate; which++) /* parameters, then each state buffer */
    for (uint32_t i = 0; i < st->nparams; i++) {
      const float *src = which ? (state ? state[(which - 1) * st->nparams + i] : NULL) : params[i];
      for (size_t k = 0; k < counts[i]; k++, off += 4) {
        if (!src) continue; /* no optimizer state: the calloc'd zeros stay */
        uint32_t u;
        memcpy(&u, &src[k], 4);
        ckpt__put_u32(b + off, u);
      }
    }
  ckpt__put_u32(b + off, ckpt_crc32(b, off));
  *out = b;
  *bytes = n;
  return 0;
}

int ckpt_write_atomic(const char *path, const void *buf, size_t bytes, char *err,
                      size_t errlen) {
  char tmp[4096];
  int len = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
  if (len < 0 || (size_t)len >= sizeof tmp) {
    snprintf(err, errlen, "checkpoint path too long");
    return -1;
  }
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    snprintf(err, errlen, "cannot create %.200s: %.200s", tmp, ckpt__errstr());
    return -1;
  }
  const unsigned char *p = (const unsigned char *)buf;
  size_t left = bytes;
  while (left > 0) {
    ssize_t w = write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      snprintf(err, errlen, "writing %.200s: %.200s", tmp, w < 0 ? ckpt__errstr() : "no progress");
      close(fd);
      unlink(tmp);
      return -1;
    }
    p += w;
    left -= (size_t)w;
  }
  if (fsync(fd) != 0) {
    snprintf(err, errlen, "fsync %.200s: %.200s", tmp, ckpt__errstr());
    close(fd);
    unlink(tmp);
    return -1;
  }
  if (close(fd) != 0) {
    snprintf(err, errlen, "close %.200s: %.200s", tmp, ckpt__errstr());
    unlink(tmp);
    return -1;
  }
  if (rename(tmp, path) != 0) {
    snprintf(err, errlen, "rename %.200s -> %.200s: %.80s", tmp, path, ckpt__errstr());
    unlink(tmp);
    return -1;
  }
  /* Make the rename itself durable. */
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash == dir) slash[1] = '\0';
  else if (slash) *slash = '\0';
  else snprintf(dir, sizeof dir, ".");
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)fsync(dfd);
    close(dfd);
  }
  return 0;
}
