/* Token-window datasets (ddp_dataset_tokens): sample i is tokens [i*stride, i*stride + window)
 * as f32 with the last one as label, for u8 and i32 streams; the count is (n - window) / stride
 * + 1; the stream is copied; bad options are refused naming the field, nothing written; through
 * the loader at np ranks, the union of every rank's windows is the whole epoch and each window
 * matches the stream exactly. */
#include <stdlib.h>
#include <string.h>

#include "ddp_test.h"

/* Token t of the test stream: a (seed-free) function of the position, every byte value. */
static uint8_t tok8(uint64_t t) { return (uint8_t)((t * 2654435761u) >> 13); }

static void check_window(const float *x, size_t window, int32_t label, uint64_t first,
                         const char *what) {
  size_t wrong = 0;
  for (size_t j = 0; j < window; j++) wrong += x[j] != (float)tok8(first + j);
  CHECK(wrong == 0, "%s: window at token %llu: %zu of %zu values wrong", what,
        (unsigned long long)first, wrong, window);
  CHECK(label == tok8(first + window - 1), "%s: label %d, want %d", what, label,
        tok8(first + window - 1));
}

static void test_shapes(void) {
  enum { N = 1000 };
  uint8_t *s8 = malloc(N);
  int32_t *s32 = malloc(sizeof(int32_t) * N);
  for (int i = 0; i < N; i++) s8[i] = tok8((uint64_t)i), s32[i] = s8[i];
  const size_t cases[][2] = {{33, 32}, {1, 1}, {1000, 7}, {10, 3}, {999, 1}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    for (int d = 0; d < 2; d++) {
      ddp_tokens_opts_t o;
      CHECK_OK(ddp_tokens_opts_default(&o));
      o.tokens = d ? (const void *)s32 : (const void *)s8;
      o.dtype = d ? DDP_I32 : DDP_U8;
      o.count = N;
      o.window = cases[c][0];
      o.stride = cases[c][1];
      ddp_dataset_t *ds = NULL;
      CHECK_OK(ddp_dataset_tokens(&o, &ds));
      if (!ds) continue;
      ddp_dataset_info_t info;
      CHECK_OK(ddp_dataset_info(ds, &info));
      uint64_t want = (N - o.window) / o.stride + 1;
      CHECK(info.count == want && info.sample_elems == o.window && info.classes == 256 &&
                info.ndim == 1 && info.dims[0] == o.window,
            "window %zu stride %zu: count %llu (want %llu), elems %zu, classes %d", o.window,
            o.stride, (unsigned long long)info.count, (unsigned long long)want, info.sample_elems,
            info.classes);
      /* the stream was copied: the caller's buffer may change */
      if (d) s32[0] = 255 - s32[0];
      else s8[0] = (uint8_t)(255 - s8[0]);
      float *x = malloc(sizeof(float) * o.window);
      for (uint64_t i = 0; i < info.count; i += 1 + info.count / 50) {
        int32_t label = -1;
        CHECK_OK(ddp_dataset_get(ds, i, x, o.window, &label));
        check_window(x, o.window, label, i * o.stride, d ? "i32" : "u8");
      }
      int32_t label = -1;
      CHECK_OK(ddp_dataset_get(ds, info.count - 1, x, o.window, &label));
      check_window(x, o.window, label, (info.count - 1) * o.stride, "last window");
      CHECK_ST(ddp_dataset_get(ds, info.count, x, o.window, &label), DDP_EINVAL);
      if (d) s32[0] = tok8(0);
      else s8[0] = tok8(0);
      free(x);
      CHECK_OK(ddp_dataset_destroy(&ds));
    }
  }
  free(s8);
  free(s32);
}

static void test_errors(void) {
  uint8_t s8[16] = {1, 2, 3, 200, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  int32_t s32[4] = {0, 5, -1, 3};
  ddp_tokens_opts_t o, base;
  CHECK_OK(ddp_tokens_opts_default(&base));
  base.tokens = s8;
  base.count = 16;
  ddp_dataset_t *ds = NULL;
  o = base, o.tokens = NULL;
  CHECK_ST(ddp_dataset_tokens(&o, &ds), DDP_EINVAL);
  CHECK_MSG("tokens is NULL");
  o = base, o.dtype = DDP_F32;
  CHECK_ST(ddp_dataset_tokens(&o, &ds), DDP_EINVAL);
  CHECK_MSG("dtype 0");
  o = base, o.window = 0;
  CHECK_ST(ddp_dataset_tokens(&o, &ds), DDP_EINVAL);
  CHECK_MSG("window 0");
  o = base, o.stride = 0;
  CHECK_ST(ddp_dataset_tokens(&o, &ds), DDP_EINVAL);
  CHECK_MSG("stride 0");
  o = base, o.vocab = 0;
  CHECK_ST(ddp_dataset_tokens(&o, &ds), DDP_EINVAL);
  CHECK_MSG("vocab 0");
  o = base, o.window = 17;
  CHECK_ST(ddp_dataset_tokens(&o, &ds), DDP_EINVAL);
  CHECK_MSG("count 16 tokens");
  o = base, o.vocab = 100; /* token 3 is 200 */
  CHECK_ST(ddp_dataset_tokens(&o, &ds), DDP_EINVAL);
  CHECK_MSG("token 3 is 200");
  o = base, o.tokens = s32, o.dtype = DDP_I32, o.count = 4;
  CHECK_ST(ddp_dataset_tokens(&o, &ds), DDP_EINVAL);
  CHECK_MSG("token 2 is -1");
  CHECK_ST(ddp_dataset_tokens(NULL, &ds), DDP_EINVAL);
  CHECK_ST(ddp_dataset_tokens(&base, NULL), DDP_EINVAL);
  CHECK_ST(ddp_tokens_opts_default(NULL), DDP_EINVAL);
  CHECK(ds == NULL, "output written on error");
}

/* Through the sampler and the loader on every rank: each window of the epoch exactly once
 * (counted over all ranks), each one holding its stream's tokens. */
static void test_loader(ddp_test_t *t) {
  enum { N = 5000, T = 16 };
  uint8_t *s8 = malloc(N);
  for (int i = 0; i < N; i++) s8[i] = tok8((uint64_t)i);
  ddp_tokens_opts_t o;
  CHECK_OK(ddp_tokens_opts_default(&o));
  o.tokens = s8, o.count = N, o.window = T + 1, o.stride = T;
  ddp_dataset_t *ds = NULL;
  CHECK_OK(ddp_dataset_tokens(&o, &ds));
  free(s8);
  if (!ds) return;
  ddp_dataset_info_t info;
  CHECK_OK(ddp_dataset_info(ds, &info));
  ddp_sampler_opts_t so;
  CHECK_OK(ddp_sampler_opts_default(&so));
  so.dataset_size = info.count, so.num_replicas = t->size, so.rank = t->rank, so.seed = 7;
  so.drop_last = 1;
  ddp_sampler_t *s = NULL;
  CHECK_OK(ddp_sampler_create(&so, &s));
  ddp_loader_opts_t lo;
  CHECK_OK(ddp_loader_opts_default(&lo));
  lo.batch_size = 8;
  ddp_loader_t *l = NULL;
  CHECK_OK(ddp_loader_create(s, ds, &lo, &l));
  int64_t *seen = calloc(info.count, sizeof(int64_t));
  CHECK_OK(ddp_loader_start_epoch(l, 1));
  for (;;) {
    ddp_batch_t b;
    CHECK_OK(ddp_loader_next(l, &b));
    if (b.count == 0) break;
    for (size_t j = 0; j < b.count; j++) {
      seen[b.indices[j]]++;
      check_window(b.x + j * b.sample_elems, T + 1, b.y[j], (uint64_t)b.indices[j] * T, "loader");
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, seen, (int)info.count, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  uint64_t usable = info.count / (uint64_t)t->size * (uint64_t)t->size, once = 0, more = 0;
  for (uint64_t i = 0; i < info.count; i++) once += seen[i] == 1, more += seen[i] > 1;
  CHECK(once == usable && more == 0, "%llu windows seen once (want %llu), %llu more than once",
        (unsigned long long)once, (unsigned long long)usable, (unsigned long long)more);
  free(seen);
  CHECK_OK(ddp_loader_destroy(&l));
  CHECK_OK(ddp_sampler_destroy(&s));
  CHECK_OK(ddp_dataset_destroy(&ds));
}

static int run_tokens(ddp_test_t *t) {
  test_shapes();
  test_errors();
  test_loader(t);
  return 0;
}

DDP_TEST_PROGRAM("sampler_tokens", DDP_TEST_CASE("tokens", run_tokens));
