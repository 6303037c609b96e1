/* Compares every index list of tests/fixtures/sampler_torch.txt (made by PyTorch's
 * DistributedSampler, see tests/gen_sampler_fixtures.py) with ours, and our normalisation of
 * IDX pixels with torchvision's. Usage: sampler_fixtures <fixture file> <temp dir>. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ddp_test.h"

static uint64_t fnv1a64(const int64_t *idx, size_t count) {
  uint64_t h = UINT64_C(0xcbf29ce484222325);
  for (size_t i = 0; i < count; i++) {
    uint64_t v = (uint64_t)idx[i];
    for (int b = 0; b < 8; b++) {
      h ^= (v >> (8 * b)) & 0xffu;
      h *= UINT64_C(0x100000001b3);
    }
  }
  return h;
}

/* One "S" record: every index (full lines) and the hash (all lines). */
static int check_list(char *line, int64_t *buf, size_t cap, int *full_count) {
  char *p = line + 2, *end;
  uint64_t f[8];
  for (int i = 0; i < 8; i++) {
    f[i] = strtoull(p, &end, 10);
    if (end == p) return -1;
    p = end;
  }
  uint64_t hash = strtoull(p, &end, 16);
  p = end;
  while (*p == ' ') p++;
  int full = strncmp(p, "full", 4) == 0;
  p += 4;
  ddp_sampler_opts_t o;
  ddp_sampler_opts_default(&o);
  o.dataset_size = f[0];
  o.num_replicas = (int)f[1];
  o.rank = (int)f[2];
  o.shuffle = (int)f[3];
  o.drop_last = (int)f[4];
  o.seed = f[5];
  ddp_sampler_t *s = NULL;
  CHECK_OK(ddp_sampler_create(&o, &s));
  if (s == NULL) return 1;
  CHECK_OK(ddp_sampler_set_epoch(s, f[6]));
  size_t len = 0, n = 0;
  CHECK_OK(ddp_sampler_length(s, &len));
  CHECK(len == f[7], "size %" PRIu64 " R %" PRIu64 " rank %" PRIu64 ": length %zu, torch %" PRIu64,
        f[0], f[1], f[2], len, f[7]);
  int bad = 0;
  if (len <= cap) {
    CHECK_OK(ddp_sampler_indices(s, buf, cap, &n));
    uint64_t h = fnv1a64(buf, n);
    if (h != hash) bad = 1;
    if (full) {
      (*full_count)++;
      for (size_t k = 0; k < n; k++) {
        long long want = strtoll(p, &end, 10);
        if (end == p || want != buf[k]) {
          fprintf(stderr, "  index %zu: ours %lld, torch %lld\n", k, (long long)buf[k], want);
          bad = 1;
          break;
        }
        p = end;
      }
    }
  } else {
    bad = 1;
  }
  CHECK(!bad,
        "size %" PRIu64 " replicas %" PRIu64 " rank %" PRIu64 " shuffle %" PRIu64 " drop_last %" PRIu64
        " seed %" PRIu64 " epoch %" PRIu64 " differs from torch",
        f[0], f[1], f[2], f[3], f[4], f[5], f[6]);
  ddp_sampler_destroy(&s);
  return bad;
}

static void check_refused(char *line) {
  unsigned long long seed = 0, epoch = 0;
  CHECK(sscanf(line + 2, "%llu %llu", &seed, &epoch) == 2, "bad E line: %s", line);
  ddp_sampler_opts_t o;
  ddp_sampler_opts_default(&o);
  o.dataset_size = 10;
  o.seed = seed;
  ddp_sampler_t *s = NULL;
  CHECK_OK(ddp_sampler_create(&o, &s));
  CHECK_ST(ddp_sampler_set_epoch(s, epoch), DDP_EINVAL);
  CHECK_MSG("exceeds 2^64-1");
  uint64_t e = 99;
  CHECK_OK(ddp_sampler_epoch(s, &e));
  CHECK(e == 0, "a refused set_epoch changed the epoch to %llu", (unsigned long long)e);
  ddp_sampler_destroy(&s);
}

static void write_file(const char *path, const void *data, size_t bytes) {
  FILE *fp = fopen(path, "wb");
  CHECK(fp != NULL, "cannot create %s", path);
  if (!fp) return;
  fwrite(data, 1, bytes, fp);
  fclose(fp);
}

/* Pixels 0..255 as one 16x16 image; our f32 values must be torchvision's, bit for bit. */
static void check_norm(char *line, const char *tmpdir) {
  char *p = line + 2, *end;
  float mean = strtof(p, &end);
  p = end;
  float std = strtof(p, &end);
  p = end;
  char img[4096], lab[4096];
  snprintf(img, sizeof(img), "%s/norm-images", tmpdir);
  snprintf(lab, sizeof(lab), "%s/norm-labels", tmpdir);
  uint8_t ibuf[16 + 256] = {0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 16, 0, 0, 0, 16};
  for (int v = 0; v < 256; v++) ibuf[16 + v] = (uint8_t)v;
  uint8_t lbuf[9] = {0, 0, 8, 1, 0, 0, 0, 1, 3};
  write_file(img, ibuf, sizeof(ibuf));
  write_file(lab, lbuf, sizeof(lbuf));
  ddp_dataset_t *ds = NULL;
  CHECK_OK(ddp_dataset_open_idx(img, lab, mean, std, &ds));
  if (!ds) return;
  float x[256];
  int32_t y = -1;
  CHECK_OK(ddp_dataset_get(ds, 0, x, 256, &y));
  CHECK(y == 3, "label %d, expected 3", (int)y);
  int wrong = 0;
  for (int v = 0; v < 256; v++) {
    float want = (float)strtod(p, &end);
    CHECK(end != p, "short N line");
    p = end;
    if (memcmp(&want, &x[v], sizeof(float)) != 0 && wrong++ < 5)
      fprintf(stderr, "  mean %g std %g pixel %d: ours %a, torchvision %a\n", (double)mean,
              (double)std, v, (double)x[v], (double)want);
  }
  CHECK(wrong == 0, "%d of 256 normalised values differ from torchvision (mean %g std %g)", wrong,
        (double)mean, (double)std);
  ddp_dataset_destroy(&ds);
  unlink(img);
  unlink(lab);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  if (argc < 3) {
    fprintf(stderr, "usage: %s <sampler_torch.txt> <temp dir>\n", argv[0]);
    MPI_Finalize();
    return 2;
  }
  FILE *fp = fopen(argv[1], "r");
  CHECK(fp != NULL, "cannot open %s", argv[1]);
  int lists = 0, bad = 0, full = 0, refused = 0, norms = 0;
  if (fp) {
    size_t cap = 60000;
    int64_t *buf = malloc(cap * sizeof(int64_t));
    char *line = NULL;
    size_t lcap = 0;
    while (getline(&line, &lcap, fp) > 0) {
      if (line[0] == 'S') {
        int r = check_list(line, buf, cap, &full);
        CHECK(r >= 0, "bad fixture line %.60s", line);
        bad += r > 0;
        lists++;
      } else if (line[0] == 'E') {
        check_refused(line);
        refused++;
      } else if (line[0] == 'N') {
        check_norm(line, argv[2]);
        norms++;
      }
    }
    free(line);
    free(buf);
    fclose(fp);
  }
  printf("sampler_fixtures: %d index lists (%d compared index by index, all by hash), %d differ; "
         "%d refused seeds; %d normalisation tables\n", lists, full, bad, refused, norms);
  CHECK(lists > 10000 && full > 1000 && refused >= 3 && norms >= 3,
        "fixture file incomplete: %d lists, %d full, %d refused, %d norms", lists, full, refused,
        norms);
  int rc = ddp_test_finish("sampler_fixtures");
  MPI_Finalize();
  return rc;
}
