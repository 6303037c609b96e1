/* IDX readers: valid plain and gzip files read back exactly; truncated, corrupted, wrong-magic
 * and inconsistent files give DDP_EFORMAT/DDP_EIO naming the file (no crash, ASan clean);
 * Fashion-MNIST and synthetic datasets. Usage: sampler_idx <temp dir>. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "ddp_test.h"

static char g_dir[2048];

/* Paths in the test folder; each call gets its own buffer (up to 16 live at once). */
static const char *tpath(const char *name) {
  static char buf[16][4096];
  static int k = 0;
  k = (k + 1) % 16;
  snprintf(buf[k], sizeof(buf[k]), "%s/%s", g_dir, name);
  return buf[k];
}

static void put(const char *path, const void *data, size_t bytes) {
  FILE *fp = fopen(path, "wb");
  CHECK(fp != NULL, "cannot create %s", path);
  if (!fp) return;
  if (bytes) fwrite(data, 1, bytes, fp);
  fclose(fp);
}

static void put_gz(const char *path, const void *data, size_t bytes) {
  gzFile gz = gzopen(path, "wb");
  CHECK(gz != NULL, "cannot create %s", path);
  if (!gz) return;
  gzwrite(gz, data, (unsigned)bytes);
  gzclose(gz);
}

static size_t slurp(const char *path, uint8_t *buf, size_t cap) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return 0;
  size_t n = fread(buf, 1, cap, fp);
  fclose(fp);
  return n;
}

/* An image file of `n` images of 3x4 pixels (pixel = 7*i + j) and a label file. */
enum { NIMG = 5, ROWS = 3, COLS = 4, IMG_BYTES = 16 + NIMG * ROWS * COLS, LAB_BYTES = 8 + NIMG };
static void make_valid(uint8_t *img, uint8_t *lab) {
  const uint8_t ih[16] = {0, 0, 8, 3, 0, 0, 0, NIMG, 0, 0, 0, ROWS, 0, 0, 0, COLS};
  memcpy(img, ih, 16);
  for (int i = 0; i < NIMG * ROWS * COLS; i++) img[16 + i] = (uint8_t)(7 * i + 3);
  const uint8_t lh[8] = {0, 0, 8, 1, 0, 0, 0, NIMG};
  memcpy(lab, lh, 8);
  for (int i = 0; i < NIMG; i++) lab[8 + i] = (uint8_t)((i * 3) % 7);
}

/* Opens img/lab, expecting `want`; on error the message must contain `needle`. */
static void expect_open(const char *img, const char *lab, ddp_status_t want, const char *needle) {
  ddp_dataset_t *ds = (ddp_dataset_t *)&g_dir; /* sentinel: must stay untouched on error */
  ddp_status_t st = ddp_dataset_open_idx(img, lab, 0.0f, 1.0f, &ds);
  CHECK(st == want, "open(%s, %s) = %d (%s), expected %d; %s", img, lab, (int)st,
        ddp_strerror(st), (int)want, ddp_last_error());
  if (st == DDP_OK) {
    ddp_dataset_destroy(&ds);
  } else {
    CHECK(ds == (ddp_dataset_t *)&g_dir, "output written on error");
    if (needle) CHECK_MSG(needle);
  }
}

static void check_valid_content(const char *img, const char *lab) {
  ddp_dataset_t *ds = NULL;
  CHECK_OK(ddp_dataset_open_idx(img, lab, 0.0f, 1.0f, &ds));
  if (!ds) return;
  ddp_dataset_info_t info;
  CHECK_OK(ddp_dataset_info(ds, &info));
  CHECK(info.count == NIMG && info.ndim == 2 && info.dims[0] == ROWS && info.dims[1] == COLS &&
            info.sample_elems == ROWS * COLS && info.classes == 7,
        "info count %llu ndim %d dims %zux%zu elems %zu classes %d", (unsigned long long)info.count,
        info.ndim, info.dims[0], info.dims[1], info.sample_elems, info.classes);
  float x[ROWS * COLS];
  int wrong = 0;
  for (int s = 0; s < NIMG; s++) {
    int32_t y = -1;
    CHECK_OK(ddp_dataset_get(ds, (uint64_t)s, x, ROWS * COLS, &y));
    CHECK(y == (s * 3) % 7, "label %d of sample %d", (int)y, s);
    for (int j = 0; j < ROWS * COLS; j++) {
      uint8_t px = (uint8_t)(7 * (s * ROWS * COLS + j) + 3);
      if (x[j] != (float)px / 255.0f) wrong++;
    }
  }
  CHECK(wrong == 0, "%d pixels differ from pixel/255", wrong);
  /* bad arguments of get: nothing written */
  x[0] = 42.0f;
  CHECK_ST(ddp_dataset_get(ds, NIMG, x, ROWS * COLS, NULL), DDP_EINVAL);
  CHECK_MSG("index 5");
  CHECK_ST(ddp_dataset_get(ds, 0, x, ROWS * COLS - 1, NULL), DDP_EINVAL);
  CHECK_MSG("x_count 11");
  CHECK(x[0] == 42.0f, "get wrote on error");
  CHECK_ST(ddp_dataset_get(ds, 0, NULL, ROWS * COLS, NULL), DDP_EINVAL);
  CHECK_ST(ddp_dataset_info(ds, NULL), DDP_EINVAL);
  CHECK_ST(ddp_dataset_info(NULL, &info), DDP_EINVAL);
  ddp_dataset_destroy(&ds);
}

static void test_errors(void) {
  uint8_t img[IMG_BYTES], lab[LAB_BYTES], tmp[IMG_BYTES + 64];
  make_valid(img, lab);
  const char *I = tpath("img"), *L = tpath("lab");
  put(I, img, sizeof(img));
  put(L, lab, sizeof(lab));
  check_valid_content(I, L);

  /* gzip round trip gives the same data; a plain file may be called anything */
  const char *IG = tpath("img.gz"), *LG = tpath("lab.gz");
  put_gz(IG, img, sizeof(img));
  put_gz(LG, lab, sizeof(lab));
  check_valid_content(IG, LG);
  check_valid_content(IG, L);

  const char *B = tpath("bad");
  const char *BG = tpath("bad.gz");
  expect_open(tpath("does-not-exist"), L, DDP_EIO, "does-not-exist");
  expect_open(g_dir, L, DDP_EIO, "not a regular file");
  put(B, "", 0);
  expect_open(B, L, DDP_EFORMAT, "truncated: 0 bytes");
  memcpy(tmp, img, sizeof(img));
  tmp[0] = 0x12;
  tmp[1] = 0x34;
  put(B, tmp, sizeof(img));
  expect_open(B, L, DDP_EFORMAT, "bad magic 0x12340803");
  memcpy(tmp, img, sizeof(img));
  tmp[2] = 0x0D;
  put(B, tmp, sizeof(img));
  expect_open(B, L, DDP_EFORMAT, "0x0d (f32) is not supported");
  memcpy(tmp, img, sizeof(img));
  tmp[3] = 0;
  put(B, tmp, sizeof(img));
  expect_open(B, L, DDP_EFORMAT, "0 dimensions");
  memcpy(tmp, img, sizeof(img));
  tmp[3] = 9;
  put(B, tmp, sizeof(img));
  expect_open(B, L, DDP_EFORMAT, "9 dimensions");
  put(B, img, 10); /* header cut inside the dimensions */
  expect_open(B, L, DDP_EFORMAT, "truncated header");
  put(B, img, sizeof(img) - 1);
  expect_open(B, L, DDP_EFORMAT, "truncated");
  memcpy(tmp, img, sizeof(img));
  tmp[sizeof(img)] = 1;
  put(B, tmp, sizeof(img) + 1);
  expect_open(B, L, DDP_EFORMAT, "trailing bytes");
  memcpy(tmp, img, sizeof(img));
  tmp[11] = 0; /* rows = 0 */
  put(B, tmp, sizeof(img));
  expect_open(B, L, DDP_EFORMAT, "dimension 1 is 0");
  memcpy(tmp, img, sizeof(img));
  memset(tmp + 4, 0xff, 12); /* 4G x 4G x 4G */
  put(B, tmp, sizeof(img));
  expect_open(B, L, DDP_EFORMAT, "more than 2^40 bytes");
  /* labels: wrong rank, wrong count */
  expect_open(I, I, DDP_EFORMAT, "expected 1");
  memcpy(tmp, lab, sizeof(lab));
  tmp[7] = NIMG - 1;
  put(B, tmp, sizeof(lab) - 1);
  expect_open(I, B, DDP_EFORMAT, "has 5 images but");
  /* gzip: named .gz but plain; truncated stream; corrupted stream; header promising 1 GB of
   * data in a tiny stream (must fail without allocating it) */
  put(BG, img, sizeof(img));
  expect_open(BG, L, DDP_EFORMAT, "not a gzip file");
  size_t gzlen = slurp(IG, tmp, sizeof(tmp));
  CHECK(gzlen > 20, "gzip file of %zu bytes", gzlen);
  put(BG, tmp, gzlen / 2);
  expect_open(BG, L, DDP_EFORMAT, "bad.gz");
  put(BG, tmp, gzlen - 4); /* without the length trailer */
  expect_open(BG, L, DDP_EFORMAT, "bad.gz");
  for (size_t k = 12; k < gzlen - 8; k++) tmp[k] ^= 0x5a;
  put(BG, tmp, gzlen);
  expect_open(BG, L, DDP_EFORMAT, "bad.gz");
  memcpy(tmp, img, sizeof(img));
  tmp[4] = 0x3b; /* 0x3b9aca00 = 1e9 images of 3x4 */
  tmp[5] = 0x9a;
  tmp[6] = 0xca;
  tmp[7] = 0x00;
  put_gz(BG, tmp, sizeof(img));
  expect_open(BG, L, DDP_EFORMAT, "truncated: the header describes 12000000000 data bytes");

  /* random damage (truncation, byte flips) to plain and gzip files: OK or a clean error */
  uint32_t rng = 12345;
  int crashes_avoided = 0;
  for (int it = 0; it < 300; it++) {
    int gz = it & 1;
    size_t len = gz ? slurp(IG, tmp, sizeof(tmp)) : sizeof(img);
    if (!gz) memcpy(tmp, img, sizeof(img));
    rng = rng * 1103515245u + 12345u;
    if (len == 0) break; /* the gzip file is missing: reported above */
    if (rng & 0x10000) {
      len = (rng >> 8) % len;
    } else {
      for (int f = 0; f < 3; f++) {
        rng = rng * 1103515245u + 12345u;
        tmp[(rng >> 8) % len] ^= (uint8_t)(1u << ((rng >> 4) & 7));
      }
    }
    const char *p = gz ? BG : B;
    put(p, tmp, len);
    ddp_dataset_t *ds = NULL;
    ddp_status_t st = ddp_dataset_open_idx(p, L, 0.0f, 1.0f, &ds);
    CHECK(st == DDP_OK || st == DDP_EFORMAT, "damaged file %d: status %d (%s)", it, (int)st,
          ddp_last_error());
    if (st == DDP_OK) {
      ddp_dataset_info_t info;
      CHECK_OK(ddp_dataset_info(ds, &info));
      float x[4096];
      if (info.sample_elems <= 4096)
        for (uint64_t s = 0; s < info.count; s++) ddp_dataset_get(ds, s, x, 4096, NULL);
      ddp_dataset_destroy(&ds);
    } else {
      crashes_avoided++;
      CHECK(strstr(ddp_last_error(), p) != NULL, "message '%s' does not name the file",
            ddp_last_error());
    }
  }
  CHECK(crashes_avoided > 100, "only %d of 300 damaged files were rejected", crashes_avoided);

  /* arguments */
  ddp_dataset_t *ds = NULL;
  CHECK_ST(ddp_dataset_open_idx(NULL, L, 0, 1, &ds), DDP_EINVAL);
  CHECK_MSG("images_path");
  CHECK_ST(ddp_dataset_open_idx(I, NULL, 0, 1, &ds), DDP_EINVAL);
  CHECK_MSG("labels_path");
  CHECK_ST(ddp_dataset_open_idx(I, L, 0, 0, &ds), DDP_EINVAL);
  CHECK_MSG("std 0");
  CHECK_ST(ddp_dataset_open_idx(I, L, 0, 1, NULL), DDP_EINVAL);
  CHECK_ST(ddp_dataset_open_fmnist(NULL, 2, &ds), DDP_EINVAL);
  CHECK_MSG("train 2");
  CHECK_ST(ddp_dataset_open_fmnist(g_dir, 1, &ds), DDP_EIO);
  CHECK_MSG("train-images-idx3-ubyte.gz");
  CHECK(ds == NULL, "output written on error");
  CHECK_OK(ddp_dataset_destroy(NULL));
  unlink(I), unlink(L), unlink(IG), unlink(LG), unlink(B), unlink(BG);
}

static void test_fmnist(void) {
  ddp_dataset_t *ds = NULL;
  ddp_status_t st = ddp_dataset_open_fmnist(NULL, 1, &ds);
  if (st == DDP_EIO) {
    printf("sampler_idx: Fashion-MNIST not installed (%s): its checks skipped\n",
           ddp_last_error());
    return;
  }
  CHECK_OK(st);
  if (!ds) return;
  ddp_dataset_info_t info;
  CHECK_OK(ddp_dataset_info(ds, &info));
  CHECK(info.count == 60000 && info.sample_elems == 784 && info.ndim == 2 && info.dims[0] == 28 &&
            info.classes == 10,
        "train: count %llu elems %zu classes %d", (unsigned long long)info.count, info.sample_elems,
        info.classes);
  /* First training labels of Fashion-MNIST: ankle boot, T-shirt, T-shirt, dress, T-shirt */
  const int32_t first[5] = {9, 0, 0, 3, 0};
  float x[784];
  for (int i = 0; i < 5; i++) {
    int32_t y = -1;
    CHECK_OK(ddp_dataset_get(ds, (uint64_t)i, x, 784, &y));
    CHECK(y == first[i], "train label %d is %d, expected %d", i, (int)y, (int)first[i]);
  }
  /* pixel 0 of image 0 is 0 -> (0 - mean) / std */
  CHECK(x[0] == (0.0f - DDP_FMNIST_MEAN) / DDP_FMNIST_STD, "normalised zero pixel %g", (double)x[0]);
  ddp_dataset_destroy(&ds);
  ds = NULL;
  CHECK_OK(ddp_dataset_open_fmnist(NULL, 0, &ds));
  if (ds) {
    CHECK_OK(ddp_dataset_info(ds, &info));
    CHECK(info.count == 10000 && info.classes == 10, "t10k: count %llu",
          (unsigned long long)info.count);
    ddp_dataset_destroy(&ds);
  }
}

static void test_synthetic(void) {
  ddp_synthetic_opts_t o;
  CHECK_ST(ddp_synthetic_opts_default(NULL), DDP_EINVAL);
  CHECK_MSG("opt");
  CHECK_OK(ddp_synthetic_opts_default(&o));
  CHECK(o.count == 1000 && o.ndim == 1 && o.dims[0] == 1 && o.classes == 10 && o.seed == 0,
        "synthetic defaults");
  o.count = 100;
  o.ndim = 2;
  o.dims[0] = 3;
  o.dims[1] = 5;
  o.seed = 7;
  ddp_dataset_t *a = NULL, *b = NULL, *c = NULL;
  CHECK_OK(ddp_dataset_synthetic(&o, &a));
  CHECK_OK(ddp_dataset_synthetic(&o, &b));
  o.seed = 8;
  CHECK_OK(ddp_dataset_synthetic(&o, &c));
  if (!a || !b || !c) return;
  ddp_dataset_info_t info;
  CHECK_OK(ddp_dataset_info(a, &info));
  CHECK(info.count == 100 && info.sample_elems == 15 && info.classes == 10, "synthetic info");
  float xa[15], xb[15], xc[15];
  int same_as_c = 0, out_of_range = 0, hist[10] = {0};
  for (uint64_t i = 0; i < 100; i++) {
    int32_t ya, yb, yc;
    CHECK_OK(ddp_dataset_get(a, i, xa, 15, &ya));
    CHECK_OK(ddp_dataset_get(b, i, xb, 15, &yb));
    CHECK_OK(ddp_dataset_get(c, i, xc, 15, &yc));
    CHECK(memcmp(xa, xb, sizeof(xa)) == 0 && ya == yb, "same seed, different sample %llu",
          (unsigned long long)i);
    same_as_c += memcmp(xa, xc, sizeof(xa)) == 0;
    for (int j = 0; j < 15; j++) out_of_range += !(xa[j] >= -1.0f && xa[j] < 1.0f);
    if (ya >= 0 && ya < 10) hist[ya]++;
    else out_of_range++;
  }
  CHECK(same_as_c == 0, "%d samples equal across seeds", same_as_c);
  CHECK(out_of_range == 0, "%d values or labels out of range", out_of_range);
  for (int k = 0; k < 10; k++) CHECK(hist[k] > 0, "class %d never drawn", k);
  ddp_dataset_destroy(&a);
  ddp_dataset_destroy(&b);
  ddp_dataset_destroy(&c);
  ddp_dataset_t *d = NULL;
  o.count = 0;
  CHECK_ST(ddp_dataset_synthetic(&o, &d), DDP_EINVAL);
  CHECK_MSG("count 0");
  o.count = 1;
  o.ndim = 5;
  CHECK_ST(ddp_dataset_synthetic(&o, &d), DDP_EINVAL);
  CHECK_MSG("ndim 5");
  o.ndim = 2;
  o.dims[1] = 0;
  CHECK_ST(ddp_dataset_synthetic(&o, &d), DDP_EINVAL);
  CHECK_MSG("dims[1] 0");
  o.dims[1] = 1;
  o.classes = 0;
  CHECK_ST(ddp_dataset_synthetic(&o, &d), DDP_EINVAL);
  CHECK_MSG("classes 0");
  CHECK_ST(ddp_dataset_synthetic(NULL, &d), DDP_EINVAL);
  CHECK(d == NULL, "output written on error");
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  const char *base = argc > 1 ? argv[1] : "/tmp";
  /* several ctest runs may share the folder: one subfolder per process */
  int len = snprintf(g_dir, sizeof(g_dir), "%s/idx-%d", base, (int)getpid());
  if (len < 0 || (size_t)len >= sizeof(g_dir)) {
    fprintf(stderr, "sampler_idx: temp dir path too long\n");
    MPI_Finalize();
    return 2;
  }
  mkdir(g_dir, 0700);
  test_errors();
  test_fmnist();
  test_synthetic();
  rmdir(g_dir);
  int rc = ddp_test_finish("sampler_idx");
  MPI_Finalize();
  return rc;
}
