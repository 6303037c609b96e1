/* Datasets: IDX readers (plain or gzip through zlib) with full header validation,
 * Fashion-MNIST from its Debian location, a seeded synthetic dataset computed on demand, and
 * fixed-length windows over a token stream. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "sampler_internal.h"

#define IDX_U8 0x08

typedef enum { DS_IDX = 1, DS_SYNTHETIC, DS_TOKENS } ds_kind_t;

struct ddp_dataset {
  ds_kind_t kind;
  ddp_dataset_info_t info;
  /* IDX: pixels as stored (u8), converted per sample through a 256-entry table so the f32
   * values are exactly those torchvision computes, at a fraction of the memory. */
  uint8_t *images;
  int32_t *labels;
  float lut[256];
  /* synthetic */
  uint64_t seed;
  /* tokens: the stream (u8 or i32, as given), sample i = window tokens from i * stride */
  void *tokens;
  ddp_dtype_t tok_dtype;
  size_t window, stride;
};

/* ---- IDX ------------------------------------------------------------------------------ */

typedef struct idx_file {
  uint8_t *data;   /* the payload after the header */
  size_t bytes;    /* payload bytes (product of the dimensions) */
  int ndim;
  uint32_t dims[8];
} idx_file_t;

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

static const char *idx_type_name(int t) {
  switch (t) {
    case 0x08: return "u8";
    case 0x09: return "i8";
    case 0x0B: return "i16";
    case 0x0C: return "i32";
    case 0x0D: return "f32";
    case 0x0E: return "f64";
    default: return "unknown";
  }
}

/* Reads up to `want` bytes; returns the count read, or -1 with *err set by zlib. */
static long long gz_read_full(gzFile gz, void *buf, size_t want) {
  size_t got = 0;
  while (got < want) {
    size_t chunk = want - got > (1u << 30) ? (1u << 30) : want - got;
    int n = gzread(gz, (char *)buf + got, (unsigned)chunk);
    if (n < 0) return -1;
    if (n == 0) break;
    got += (size_t)n;
  }
  return (long long)got;
}

static ddp_status_t gz_fail(gzFile gz, const char *path, const char *what) {
  int zerr = 0;
  const char *msg = gzerror(gz, &zerr);
  if (zerr == Z_ERRNO)
    return ddp__error(DDP_EIO, "%s: %s: %s", path, what, strerror(errno));
  return ddp__error(DDP_EFORMAT, "%s: %s: corrupt gzip stream (%s)", path, what,
                    msg ? msg : "zlib error");
}

/* Loads and validates an IDX file whose element type must be u8 and magic byte 3 = ndim.
 * `expect_ndim` 0 accepts 1..8 dimensions. */
static ddp_status_t idx_load(const char *path, int expect_ndim, idx_file_t *f) {
  memset(f, 0, sizeof(*f));
  struct stat sb;
  if (stat(path, &sb) != 0)
    return ddp__error(DDP_EIO, "%s: cannot open: %s", path, strerror(errno));
  if (!S_ISREG(sb.st_mode)) return ddp__error(DDP_EIO, "%s: not a regular file", path);
  gzFile gz = gzopen(path, "rb");
  if (gz == NULL) return ddp__error(DDP_EIO, "%s: cannot open: %s", path, strerror(errno));
  gzbuffer(gz, 1u << 18);
  ddp_status_t st = DDP_OK;
  uint8_t hdr[4 + 4 * 8];
  long long n = gz_read_full(gz, hdr, 4);
  /* gzread passes a file that is not gzip through unchanged; a ".gz" name promises gzip. */
  if (n >= 0 && ends_with(path, ".gz") && gzdirect(gz)) {
    st = ddp__error(DDP_EFORMAT, "%s: named .gz but not a gzip file", path);
    goto done;
  }
  if (n < 0) { st = gz_fail(gz, path, "reading the header"); goto done; }
  if (n < 4) {
    st = ddp__error(DDP_EFORMAT, "%s: truncated: %lld bytes, an IDX header needs at least 4",
                    path, n);
    goto done;
  }
  if (hdr[0] != 0 || hdr[1] != 0) {
    st = ddp__error(DDP_EFORMAT,
                    "%s: bad magic 0x%02x%02x%02x%02x: an IDX file starts with two zero bytes",
                    path, hdr[0], hdr[1], hdr[2], hdr[3]);
    goto done;
  }
  if (hdr[2] != IDX_U8) {
    st = ddp__error(DDP_EFORMAT, "%s: element type 0x%02x (%s) is not supported, only 0x08 (u8)",
                    path, hdr[2], idx_type_name(hdr[2]));
    goto done;
  }
  f->ndim = hdr[3];
  if (f->ndim < 1 || f->ndim > 8 || (expect_ndim && f->ndim != expect_ndim)) {
    if (expect_ndim)
      st = ddp__error(DDP_EFORMAT, "%s: %d dimensions in the header, expected %d", path, f->ndim,
                      expect_ndim);
    else
      st = ddp__error(DDP_EFORMAT, "%s: %d dimensions in the header, expected 1..8", path,
                      f->ndim);
    goto done;
  }
  n = gz_read_full(gz, hdr + 4, 4 * (size_t)f->ndim);
  if (n < 0) { st = gz_fail(gz, path, "reading the header"); goto done; }
  if (n < 4 * f->ndim) {
    st = ddp__error(DDP_EFORMAT, "%s: truncated header: %d dimensions need %d bytes, found %lld",
                    path, f->ndim, 4 + 4 * f->ndim, 4 + n);
    goto done;
  }
  uint64_t total = 1;
  for (int d = 0; d < f->ndim; d++) {
    const uint8_t *p = hdr + 4 + 4 * d;
    f->dims[d] = ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
    if (f->dims[d] == 0) {
      st = ddp__error(DDP_EFORMAT, "%s: dimension %d is 0", path, d);
      goto done;
    }
    if (total > (UINT64_C(1) << 40) / f->dims[d]) {
      st = ddp__error(DDP_EFORMAT, "%s: the dimensions describe more than 2^40 bytes", path);
      goto done;
    }
    total *= f->dims[d];
  }
  uint64_t hdr_bytes = 4 + 4 * (uint64_t)f->ndim;
  /* For a plain file the size is known: reject a wrong one before allocating anything. */
  if (gzdirect(gz) && (uint64_t)sb.st_size != hdr_bytes + total) {
    int short_file = (uint64_t)sb.st_size < hdr_bytes + total;
    st = ddp__error(DDP_EFORMAT, "%s: %s: the header describes %llu data bytes, the file has %llu",
                    path, short_file ? "truncated" : "trailing bytes", (unsigned long long)total,
                    (unsigned long long)((uint64_t)sb.st_size - hdr_bytes));
    goto done;
  }
  /* A gzip stream's length is known only after decompressing it: grow the buffer as data
   * arrives so a corrupt header cannot make us allocate what is not there. */
  size_t cap = total < (1u << 20) ? (size_t)total : (1u << 20), got = 0;
  f->data = malloc(cap > 0 ? cap : 1);
  if (f->data == NULL) { st = ddp__error(DDP_ENOMEM, "%s: out of memory", path); goto done; }
  for (;;) {
    n = gz_read_full(gz, f->data + got, cap - got);
    if (n < 0) { st = gz_fail(gz, path, "reading the data"); goto done; }
    got += (size_t)n;
    if (got < cap || cap == total) break;
    size_t ncap = cap * 2 > total ? (size_t)total : cap * 2;
    uint8_t *nd = realloc(f->data, ncap);
    if (nd == NULL) { st = ddp__error(DDP_ENOMEM, "%s: out of memory", path); goto done; }
    f->data = nd;
    cap = ncap;
  }
  if (got < total) {
    st = ddp__error(DDP_EFORMAT, "%s: truncated: the header describes %llu data bytes, found %zu",
                    path, (unsigned long long)total, got);
    goto done;
  }
  uint8_t extra;
  n = gz_read_full(gz, &extra, 1);
  if (n < 0) { st = gz_fail(gz, path, "reading past the data"); goto done; }
  if (n > 0) {
    st = ddp__error(DDP_EFORMAT, "%s: trailing bytes after the %llu data bytes the header describes",
                    path, (unsigned long long)total);
    goto done;
  }
  /* zlib hands out what it could decompress from a cut-off gzip file and only records
   * Z_BUF_ERROR ("unexpected end of file"): a stream missing its CRC/length trailer would
   * otherwise pass unnoticed. */
  if (!gzdirect(gz)) {
    int zerr = Z_OK;
    const char *msg = gzerror(gz, &zerr);
    if (zerr != Z_OK) {
      st = ddp__error(DDP_EFORMAT, "%s: truncated or corrupt gzip stream (%s)", path,
                      msg && *msg ? msg : "zlib error");
      goto done;
    }
  }
  f->bytes = (size_t)total;
done:
  gzclose(gz);
  if (st != DDP_OK) {
    free(f->data);
    f->data = NULL;
  }
  return st;
}

static void make_lut(float *lut, float mean, float std) {
  /* torchvision: ToTensor() divides by 255 in f32, Normalize subtracts then divides in f32;
   * doing the same operations in the same order gives bit-identical values. */
  for (int v = 0; v < 256; v++) {
    float x = (float)v / 255.0f;
    lut[v] = (x - mean) / std;
  }
}

ddp_status_t ddp_dataset_open_idx(const char *images_path, const char *labels_path, float mean,
                                  float std, ddp_dataset_t **out) {
  DDP_CHECK_ARG(images_path != NULL, "images_path is NULL");
  DDP_CHECK_ARG(labels_path != NULL, "labels_path is NULL");
  DDP_CHECK_ARG(out != NULL, "out is NULL");
  DDP_CHECK_ARG(std > 0.0f && std < 1e30f, "std %g must be positive and finite", (double)std);
  DDP_CHECK_ARG(mean > -1e30f && mean < 1e30f, "mean %g must be finite", (double)mean);
  idx_file_t img, lab;
  DDP_TRY(idx_load(images_path, 0, &img));
  ddp_status_t st = idx_load(labels_path, 1, &lab);
  if (st != DDP_OK) {
    free(img.data);
    return st;
  }
  if (img.dims[0] != lab.dims[0] || img.ndim - 1 > DDP_DATASET_MAX_DIMS) {
    if (img.dims[0] != lab.dims[0])
      st = ddp__error(DDP_EFORMAT, "%s has %u images but %s has %u labels", images_path,
                      img.dims[0], labels_path, lab.dims[0]);
    else
      st = ddp__error(DDP_EFORMAT, "%s: %d dimensions per sample, at most %d supported",
                      images_path, img.ndim - 1, DDP_DATASET_MAX_DIMS);
    free(img.data);
    free(lab.data);
    return st;
  }
  ddp_dataset_t *ds = calloc(1, sizeof(*ds));
  int32_t *labels = malloc((size_t)lab.dims[0] * sizeof(int32_t));
  if (ds == NULL || labels == NULL) {
    free(ds);
    free(labels);
    free(img.data);
    free(lab.data);
    return ddp__error(DDP_ENOMEM, "%s: out of memory", labels_path);
  }
  int maxlab = 0;
  for (uint32_t i = 0; i < lab.dims[0]; i++) {
    labels[i] = lab.data[i];
    if (labels[i] > maxlab) maxlab = labels[i];
  }
  free(lab.data);
  ds->kind = DS_IDX;
  ds->images = img.data;
  ds->labels = labels;
  ds->info.count = img.dims[0];
  ds->info.ndim = img.ndim > 1 ? img.ndim - 1 : 1;
  ds->info.sample_elems = 1;
  ds->info.dims[0] = 1;
  for (int d = 1; d < img.ndim; d++) {
    ds->info.dims[d - 1] = img.dims[d];
    ds->info.sample_elems *= img.dims[d];
  }
  ds->info.classes = maxlab + 1;
  make_lut(ds->lut, mean, std);
  *out = ds;
  return DDP_OK;
}

/* ---- synthetic ------------------------------------------------------------------------ */

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

ddp_status_t ddp_synthetic_opts_default(ddp_synthetic_opts_t *opt) {
  DDP_CHECK_ARG(opt != NULL, "opt is NULL");
  memset(opt, 0, sizeof *opt);
  opt->count = 1000;
  opt->ndim = 1;
  opt->dims[0] = 1;
  opt->classes = 10;
  return DDP_OK;
}

ddp_status_t ddp_dataset_synthetic(const ddp_synthetic_opts_t *opt, ddp_dataset_t **out) {
  DDP_CHECK_ARG(opt != NULL, "opt is NULL");
  DDP_CHECK_ARG(out != NULL, "out is NULL");
  DDP_CHECK_ARG(opt->count >= 1, "count %llu must be >= 1", (unsigned long long)opt->count);
  DDP_CHECK_ARG(opt->ndim >= 1 && opt->ndim <= DDP_DATASET_MAX_DIMS, "ndim %d must be in 1..%d",
                opt->ndim, DDP_DATASET_MAX_DIMS);
  DDP_CHECK_ARG(opt->classes >= 1, "classes %d must be >= 1", opt->classes);
  size_t elems = 1;
  for (int d = 0; d < opt->ndim; d++) {
    DDP_CHECK_ARG(opt->dims[d] >= 1, "dims[%d] %zu must be >= 1", d, opt->dims[d]);
    DDP_CHECK_ARG(elems <= ((size_t)1 << 40) / opt->dims[d],
                  "dims[%d] %zu makes a sample larger than 2^40 values", d, opt->dims[d]);
    elems *= opt->dims[d];
  }
  ddp_dataset_t *ds = calloc(1, sizeof(*ds));
  if (ds == NULL) return ddp__error(DDP_ENOMEM, "synthetic dataset: out of memory");
  ds->kind = DS_SYNTHETIC;
  ds->seed = opt->seed;
  ds->info.count = opt->count;
  ds->info.ndim = opt->ndim;
  for (int d = 0; d < opt->ndim; d++) ds->info.dims[d] = opt->dims[d];
  ds->info.sample_elems = elems;
  ds->info.classes = opt->classes;
  *out = ds;
  return DDP_OK;
}

/* ---- token windows -------------------------------------------------------------------- */

ddp_status_t ddp_tokens_opts_default(ddp_tokens_opts_t *opt) {
  DDP_CHECK_ARG(opt != NULL, "opt is NULL");
  memset(opt, 0, sizeof *opt);
  opt->dtype = DDP_U8;
  opt->window = 2;
  opt->stride = 1;
  opt->vocab = 256;
  return DDP_OK;
}

ddp_status_t ddp_dataset_tokens(const ddp_tokens_opts_t *opt, ddp_dataset_t **out) {
  DDP_CHECK_ARG(opt != NULL, "opt is NULL");
  DDP_CHECK_ARG(out != NULL, "out is NULL");
  DDP_CHECK_ARG(opt->tokens != NULL, "tokens is NULL");
  DDP_CHECK_ARG(opt->dtype == DDP_U8 || opt->dtype == DDP_I32,
                "dtype %d: token streams are u8 (%d) or i32 (%d)", (int)opt->dtype, (int)DDP_U8,
                (int)DDP_I32);
  DDP_CHECK_ARG(opt->window >= 1 && opt->window <= ((size_t)1 << 24),
                "window %zu must be in 1 .. 2^24", opt->window);
  DDP_CHECK_ARG(opt->stride >= 1, "stride %zu must be >= 1", opt->stride);
  DDP_CHECK_ARG(opt->vocab >= 1 && opt->vocab <= (1 << 24),
                "vocab %d must be in 1 .. 2^24 (token ids exact in f32)", opt->vocab);
  DDP_CHECK_ARG(opt->count >= opt->window && opt->count <= ((uint64_t)1 << 50),
                "count %llu tokens: need at least one window of %zu (and at most 2^50)",
                (unsigned long long)opt->count, opt->window);
  size_t es = opt->dtype == DDP_U8 ? 1 : 4;
  if (opt->dtype == DDP_I32) {
    const int32_t *t = opt->tokens;
    for (uint64_t i = 0; i < opt->count; i++)
      DDP_CHECK_ARG(t[i] >= 0 && t[i] < opt->vocab, "token %llu is %d, outside 0 .. vocab-1 = %d",
                    (unsigned long long)i, (int)t[i], opt->vocab - 1);
  } else {
    const uint8_t *t = opt->tokens;
    for (uint64_t i = 0; opt->vocab < 256 && i < opt->count; i++)
      DDP_CHECK_ARG(t[i] < opt->vocab, "token %llu is %d, outside 0 .. vocab-1 = %d",
                    (unsigned long long)i, (int)t[i], opt->vocab - 1);
  }
  ddp_dataset_t *ds = calloc(1, sizeof(*ds));
  void *copy = malloc((size_t)opt->count * es);
  if (ds == NULL || copy == NULL) {
    free(ds);
    free(copy);
    return ddp__error(DDP_ENOMEM, "token dataset: out of memory for %llu tokens",
                      (unsigned long long)opt->count);
  }
  memcpy(copy, opt->tokens, (size_t)opt->count * es);
  ds->kind = DS_TOKENS;
  ds->tokens = copy;
  ds->tok_dtype = opt->dtype;
  ds->window = opt->window;
  ds->stride = opt->stride;
  ds->info.count = (opt->count - opt->window) / opt->stride + 1;
  ds->info.ndim = 1;
  ds->info.dims[0] = opt->window;
  ds->info.sample_elems = opt->window;
  ds->info.classes = opt->vocab;
  *out = ds;
  return DDP_OK;
}

/* ---- common --------------------------------------------------------------------------- */

ddp_status_t ddp_dataset_destroy(ddp_dataset_t **ds) {
  if (ds != NULL && *ds != NULL) {
    free((*ds)->images);
    free((*ds)->labels);
    free((*ds)->tokens);
    free(*ds);
    *ds = NULL;
  }
  return DDP_OK;
}

ddp_status_t ddp_dataset_info(const ddp_dataset_t *ds, ddp_dataset_info_t *info) {
  DDP_CHECK_ARG(ds != NULL, "ds is NULL");
  DDP_CHECK_ARG(info != NULL, "info is NULL");
  *info = ds->info;
  return DDP_OK;
}

/* Unchecked read used by the loader: index < count, x has sample_elems values. */
void ddp__dataset_read(const ddp_dataset_t *ds, uint64_t index, float *x, int32_t *label) {
  const size_t elems = ds->info.sample_elems;
  if (ds->kind == DS_IDX) {
    const uint8_t *px = ds->images + (size_t)index * elems;
    for (size_t i = 0; i < elems; i++) x[i] = ds->lut[px[i]];
    if (label) *label = ds->labels[index];
    return;
  }
  if (ds->kind == DS_TOKENS) {
    size_t first = (size_t)index * ds->stride;
    if (ds->tok_dtype == DDP_U8) {
      const uint8_t *t = (const uint8_t *)ds->tokens + first;
      for (size_t i = 0; i < elems; i++) x[i] = (float)t[i];
      if (label) *label = t[elems - 1];
    } else {
      const int32_t *t = (const int32_t *)ds->tokens + first;
      for (size_t i = 0; i < elems; i++) x[i] = (float)t[i];
      if (label) *label = t[elems - 1];
    }
    return;
  }
  /* One splitmix64 stream per sample, started from a hash of (seed, index): any sample can be
   * computed alone, in any order, on any rank. */
  uint64_t st = ds->seed ^ (index * UINT64_C(0xd1342543de82ef95));
  uint64_t h = splitmix64(&st);
  if (label) *label = (int32_t)(h % (uint64_t)ds->info.classes);
  size_t i = 0;
  for (; i + 1 < elems; i += 2) {
    uint64_t r = splitmix64(&st);
    /* two 24-bit fractions per draw, mapped to [-1, 1) */
    x[i] = (float)(r >> 40) * (1.0f / 8388608.0f) - 1.0f;
    x[i + 1] = (float)((r >> 8) & 0xffffffu) * (1.0f / 8388608.0f) - 1.0f;
  }
  if (i < elems) x[i] = (float)(splitmix64(&st) >> 40) * (1.0f / 8388608.0f) - 1.0f;
}

ddp_status_t ddp_dataset_get(const ddp_dataset_t *ds, uint64_t index, float *x, size_t x_count,
                             int32_t *label) {
  DDP_CHECK_ARG(ds != NULL, "ds is NULL");
  DDP_CHECK_ARG(index < ds->info.count, "index %llu is out of range: the dataset has %llu samples",
                (unsigned long long)index, (unsigned long long)ds->info.count);
  DDP_CHECK_ARG(x != NULL, "x is NULL");
  DDP_CHECK_ARG(x_count >= ds->info.sample_elems, "x_count %zu is less than sample_elems %zu",
                x_count, ds->info.sample_elems);
  ddp__dataset_read(ds, index, x, label);
  return DDP_OK;
}
