/* Device layer under the host emulation (DDP_DEVICE_EMULATE=1): memory, streams and events
 * (ordering: work queued behind a slow host function must not be visible early), the
 * kernels for every dtype and op against a scalar reference, and bad inputs.
 * With argument "none" it checks the no-device path instead (DDP_DEVICE_EMULATE unset). */
#include <math.h>
#include <time.h>

#include "ddp_device.h"
#include "ddp_test.h"
#include "device_util.h"

static double ref(double a, double b, ddp_op_t op, ddp_dtype_t t) {
  if (t == DDP_U8) a += 3, b += 3;
  double r = op == DDP_SUM ? a + b : op == DDP_PROD ? a * b : op == DDP_MIN ? fmin(a, b) : fmax(a, b);
  if (t == DDP_U8) r = (double)(uint8_t)(int)r - 3;
  return r;
}

static void test_kernels(ddp_comm_t *comm, int rank) {
  const size_t n = 1000;
  ddp_stream_t *s;
  CHECK_OK(ddp_stream_create(comm, &s));
  for (int t = 0; t < DDP_DTYPE_COUNT; t++) {
    size_t es = ddp_dtype_size((ddp_dtype_t)t);
    char *ha = malloc(n * es), *hb = malloc(n * es), *hr = malloc(n * es);
    void *da = NULL, *db = NULL;
    CHECK_OK(ddp_device_malloc(comm, n * es, &da));
    CHECK_OK(ddp_device_malloc(comm, n * es, &db));
    ddp_op_t ops[] = {DDP_SUM, DDP_MIN, DDP_MAX, DDP_PROD};
    for (int k = 0; k < 4; k++) {
      for (size_t i = 0; i < n; i++) put(ha, (ddp_dtype_t)t, i, val(rank, 0, i)), put(hb, (ddp_dtype_t)t, i, val(rank, 1, i));
      CHECK_OK(ddp_memcpy_async(comm, da, ha, n * es, s));
      CHECK_OK(ddp_memcpy_async(comm, db, hb, n * es, s));
      CHECK_OK(ddp_device_reduce_async(comm, da, db, n, (ddp_dtype_t)t, ops[k], s));
      CHECK_OK(ddp_memcpy_async(comm, hr, da, n * es, s));
      CHECK_OK(ddp_stream_synchronize(comm, s));
      int wrong = 0;
      for (size_t i = 0; i < n; i++)
        if (get(hr, (ddp_dtype_t)t, i) != ref(val(rank, 0, i), val(rank, 1, i), ops[k], (ddp_dtype_t)t)) wrong++;
      CHECK(wrong == 0, "reduce %s %s: %d wrong of %zu", ddp_dtype_name((ddp_dtype_t)t),
            ddp_op_name(ops[k]), wrong, n);
    }
    if (t == DDP_F32 || t == DDP_F64 || t == DDP_F16 || t == DDP_BF16) {
      for (size_t i = 0; i < n; i++) put(ha, (ddp_dtype_t)t, i, val(rank, 0, i));
      CHECK_OK(ddp_memcpy_async(comm, da, ha, n * es, s));
      CHECK_OK(ddp_device_scale_async(comm, da, n, (ddp_dtype_t)t, 0.5, s));
      CHECK_OK(ddp_memcpy_async(comm, hr, da, n * es, s));
      CHECK_OK(ddp_stream_synchronize(comm, s));
      int wrong = 0;
      for (size_t i = 0; i < n; i++)
        if (get(hr, (ddp_dtype_t)t, i) != val(rank, 0, i) * 0.5) wrong++;
      CHECK(wrong == 0, "scale %s: %d wrong", ddp_dtype_name((ddp_dtype_t)t), wrong);
      /* nonfinite: clean buffer leaves the flag, one inf sets it */
      int *dflag = NULL, hflag = 7;
      CHECK_OK(ddp_device_malloc(comm, sizeof(int), (void **)&dflag));
      CHECK_OK(ddp_memset_async(comm, dflag, 0, sizeof(int), s));
      CHECK_OK(ddp_device_nonfinite_async(comm, da, n, (ddp_dtype_t)t, dflag, s));
      CHECK_OK(ddp_memcpy_async(comm, &hflag, dflag, sizeof(int), s));
      CHECK_OK(ddp_stream_synchronize(comm, s));
      CHECK(hflag == 0, "nonfinite %s on finite data: flag %d", ddp_dtype_name((ddp_dtype_t)t), hflag);
      if (t == DDP_F32) ((float *)ha)[n - 1] = INFINITY;
      else if (t == DDP_F64) ((double *)ha)[n - 1] = NAN;
      else if (t == DDP_F16) ((uint16_t *)ha)[n - 1] = 0x7c00;
      else ((uint16_t *)ha)[n - 1] = 0x7fc0;
      CHECK_OK(ddp_memcpy_async(comm, da, ha, n * es, s));
      CHECK_OK(ddp_device_nonfinite_async(comm, da, n, (ddp_dtype_t)t, dflag, s));
      CHECK_OK(ddp_memcpy_async(comm, &hflag, dflag, sizeof(int), s));
      CHECK_OK(ddp_stream_synchronize(comm, s));
      CHECK(hflag == 1, "nonfinite %s with an inf/nan: flag %d", ddp_dtype_name((ddp_dtype_t)t), hflag);
      CHECK_OK(ddp_device_free(comm, dflag));
    }
    CHECK_OK(ddp_device_free(comm, da));
    CHECK_OK(ddp_device_free(comm, db));
    free(ha), free(hb), free(hr);
  }
  /* convert f32 -> f16/bf16 -> f32 round trip on exactly representable values, plus rounding */
  float hf[4] = {1.0f, -2.5f, 1.0f + 1.0f / 4096, 65520.0f}, back[4];
  void *df = NULL, *dh = NULL;
  CHECK_OK(ddp_device_malloc(comm, sizeof hf, &df));
  CHECK_OK(ddp_device_malloc(comm, 8, &dh));
  ddp_dtype_t halves[2] = {DDP_F16, DDP_BF16};
  for (int k = 0; k < 2; k++) {
    CHECK_OK(ddp_memcpy_async(comm, df, hf, sizeof hf, s));
    CHECK_OK(ddp_device_convert_async(comm, dh, halves[k], df, DDP_F32, 4, s));
    CHECK_OK(ddp_device_convert_async(comm, df, DDP_F32, dh, halves[k], 4, s));
    CHECK_OK(ddp_memcpy_async(comm, back, df, sizeof back, s));
    CHECK_OK(ddp_stream_synchronize(comm, s));
    CHECK(back[0] == 1.0f && back[1] == -2.5f, "convert %s: %g %g", ddp_dtype_name(halves[k]), back[0], back[1]);
    CHECK(back[2] == 1.0f, "convert %s: 1+2^-12 rounds to 1 (nearest even), got %.9g",
          ddp_dtype_name(halves[k]), back[2]);
    if (k == 0) CHECK(isinf(back[3]), "f16 65520 overflows to inf, got %g", back[3]);
    else CHECK(back[3] == 65536.0f, "bf16 65520 rounds to 65536, got %g", back[3]);
  }
  CHECK_OK(ddp_device_free(comm, df));
  CHECK_OK(ddp_device_free(comm, dh));
  CHECK_OK(ddp_stream_destroy(comm, &s));
}

static void test_ordering(ddp_comm_t *comm) {
  const size_t bytes = 1 << 20;
  ddp_stream_t *a, *b;
  ddp_event_t *ev;
  CHECK_OK(ddp_stream_create(comm, &a));
  CHECK_OK(ddp_stream_create(comm, &b));
  CHECK_OK(ddp_event_create(comm, &ev));
  int done = -1;
  CHECK_OK(ddp_event_query(comm, ev, &done));
  CHECK(done == 1, "a never-recorded event is complete, got %d", done);
  char *dev = NULL, *host = NULL;
  CHECK_OK(ddp_device_malloc(comm, bytes, (void **)&dev));
  CHECK_OK(ddp_host_alloc_pinned(comm, bytes, (void **)&host));
  CHECK(ddp_device_is_device_ptr(comm, dev + 100), "device ptr not recognised");
  CHECK(!ddp_device_is_device_ptr(comm, host), "pinned host ptr taken for device memory");
  memset(host, 1, bytes);
  CHECK_OK(ddp_memcpy_async(comm, dev, host, bytes, NULL)); /* default stream */
  CHECK_OK(ddp_stream_synchronize(comm, NULL));
  /* stream a: slow host function, then dev <- 2; event; stream b waits, then host <- dev */
  CHECK_OK(ddp_launch_host_func(comm, a, sleep_ms, (void *)(intptr_t)60));
  CHECK_OK(ddp_memset_async(comm, dev, 2, bytes, a));
  CHECK_OK(ddp_event_record(comm, ev, a));
  CHECK_OK(ddp_event_query(comm, ev, &done));
  CHECK(done == 0, "event complete before its stream ran (query %d)", done);
  CHECK_OK(ddp_stream_wait_event(comm, b, ev));
  CHECK_OK(ddp_memcpy_async(comm, host, dev, bytes, b));
  volatile int flag = 0;
  CHECK_OK(ddp_launch_host_func(comm, b, set_flag, (void *)&flag));
  CHECK(flag == 0, "stream b ran before the event it waits for");
  CHECK_OK(ddp_stream_synchronize(comm, b));
  CHECK(flag == 1, "stream b's host function did not run by synchronize");
  CHECK_OK(ddp_event_query(comm, ev, &done));
  CHECK(done == 1, "event not complete after the stream that waited on it finished");
  int wrong = 0;
  for (size_t i = 0; i < bytes; i++) wrong += host[i] != 2;
  CHECK(wrong == 0, "stream b copied before stream a's memset: %d bytes wrong", wrong);
  CHECK_OK(ddp_event_synchronize(comm, ev));
  /* re-recording captures the newer work */
  CHECK_OK(ddp_launch_host_func(comm, a, sleep_ms, (void *)(intptr_t)30));
  CHECK_OK(ddp_event_record(comm, ev, a));
  CHECK_OK(ddp_event_synchronize(comm, ev));
  CHECK_OK(ddp_event_query(comm, ev, &done));
  CHECK(done == 1, "event_synchronize returned before completion");
  CHECK_OK(ddp_host_free_pinned(comm, host));
  CHECK_OK(ddp_device_free(comm, dev));
  CHECK_OK(ddp_event_destroy(comm, &ev));
  CHECK_OK(ddp_stream_destroy(comm, &a));
  CHECK_OK(ddp_stream_destroy(comm, &b));
}

static void test_bad_inputs(ddp_comm_t *comm) {
  /* Handle validation, exact allocation bounds and the nccl refusal are the emulation's; CUDA
   * cannot check a foreign cudaStream_t, and NCCL may be there. */
  int emu = ddp_device_emulated(comm);
  void *p = NULL, *h = NULL;
  char host[64];
  ddp_stream_t *s;
  ddp_event_t *ev;
  CHECK_ST(ddp_device_malloc(comm, 0, &p), DDP_EINVAL);
  CHECK_MSG("bytes");
  CHECK_ST(ddp_device_malloc(comm, 16, NULL), DDP_EINVAL);
  CHECK_MSG("ptr");
  CHECK_ST(ddp_device_malloc(NULL, 16, &p), DDP_EINVAL);
  CHECK_MSG("comm");
  CHECK_ST(ddp_stream_create(comm, NULL), DDP_EINVAL);
  CHECK_ST(ddp_event_create(comm, NULL), DDP_EINVAL);
  CHECK_ST(ddp_event_query(comm, NULL, &(int){0}), DDP_EINVAL);
  CHECK_ST(ddp_device_describe(comm, NULL, 8), DDP_EINVAL);
  CHECK_ST(ddp_device_describe(comm, host, 0), DDP_EINVAL);
  CHECK(ddp_device_kind(NULL) == DDP_DEVICE_NONE, "kind of a NULL comm");
  CHECK(!ddp_device_is_device_ptr(comm, NULL), "NULL taken for a device pointer");
  CHECK_ST(ddp_device_free(comm, host), DDP_EINVAL);
  CHECK_MSG("not a live device allocation");
  CHECK_OK(ddp_device_free(comm, NULL));
  CHECK_OK(ddp_device_malloc(comm, 256, &p));
  CHECK_OK(ddp_host_alloc_pinned(comm, 256, &h));
  CHECK_ST(ddp_host_free_pinned(comm, p), DDP_EINVAL);
  CHECK_ST(ddp_device_reduce_async(comm, p, host, 16, DDP_F32, DDP_SUM, NULL), DDP_EINVAL);
  CHECK_MSG("src");
  if (emu) {
    CHECK_ST(ddp_device_reduce_async(comm, p, p, 65, DDP_F32, DDP_SUM, NULL), DDP_EINVAL);
    CHECK_MSG("entirely inside");
  }
  CHECK_ST(ddp_device_reduce_async(comm, p, p, 16, DDP_F32, DDP_AVG, NULL), DDP_EINVAL);
  CHECK_MSG("avg");
  CHECK_ST(ddp_device_reduce_async(comm, p, p, 16, (ddp_dtype_t)99, DDP_SUM, NULL), DDP_EINVAL);
  CHECK_MSG("99");
  if (emu) {
    CHECK_ST(ddp_device_reduce_async(comm, p, p, 16, DDP_F32, DDP_SUM, (ddp_stream_t *)host), DDP_EINVAL);
    CHECK_MSG("stream");
  }
  CHECK_ST(ddp_device_scale_async(comm, p, 16, DDP_I32, 2.0, NULL), DDP_EINVAL);
  CHECK_MSG("i32");
  CHECK_ST(ddp_device_convert_async(comm, p, DDP_I32, p, DDP_F32, 8, NULL), DDP_EINVAL);
  CHECK_MSG("f32 -> i32");
  CHECK_ST(ddp_device_nonfinite_async(comm, p, 8, DDP_F32, NULL, NULL), DDP_EINVAL);
  CHECK_MSG("flag");
  CHECK_ST(ddp_memset_async(comm, host, 0, 8, NULL), DDP_EINVAL);
  CHECK_MSG("dst");
  CHECK_ST(ddp_memcpy_async(comm, NULL, host, 8, NULL), DDP_EINVAL);
  CHECK_ST(ddp_launch_host_func(comm, NULL, NULL, NULL), DDP_EINVAL);
  CHECK_MSG("fn");
  CHECK_OK(ddp_stream_destroy(comm, NULL)); /* nothing to destroy: no-op, as for every handle */
  ddp_stream_t *none = NULL;
  CHECK_OK(ddp_stream_destroy(comm, &none));
  CHECK_OK(ddp_stream_create(comm, &s));
  CHECK_OK(ddp_event_create(comm, &ev));
  ddp_stream_t *stale_s = s;
  ddp_event_t *stale_ev = ev;
  CHECK_OK(ddp_stream_destroy(comm, &s));
  CHECK_OK(ddp_event_destroy(comm, &ev));
  CHECK(s == NULL && ev == NULL, "destroy left the stream/event handle set");
  if (emu) {
    CHECK_ST(ddp_event_record(comm, (ddp_event_t *)host, NULL), DDP_EINVAL);
    CHECK_MSG("event");
    CHECK_ST(ddp_stream_synchronize(comm, stale_s), DDP_EINVAL); /* destroyed */
    CHECK_ST(ddp_event_query(comm, stale_ev, &(int){0}), DDP_EINVAL);
  }
  const char *name = NULL;
  CHECK_ST(ddp_device_transport(comm, "tcp", &name), DDP_EINVAL);
  CHECK_MSG("tcp");
  if (emu) CHECK_ST(ddp_device_transport(comm, "nccl", &name), DDP_ENOTSUP);
  CHECK_OK(ddp_device_transport(comm, "staged", &name));
  CHECK(name && !strcmp(name, "staged"), "transport %s", name ? name : "(null)");
  ddp_comm_info_t info;
  CHECK_OK(ddp_comm_info(comm, &info));
  CHECK_OK(ddp_device_transport(comm, "auto", &name));
  CHECK(name && !strcmp(name, info.cuda_aware ? "mpi" : "staged"), "auto with cuda_aware=%d gave %s",
        info.cuda_aware, name ? name : "(null)");
  CHECK_OK(ddp_host_free_pinned(comm, h));
  CHECK_OK(ddp_device_free(comm, p));
  CHECK_ST(ddp_device_free(comm, p), DDP_EINVAL); /* double free */
}

int main(int argc, char **argv) {
  ddp_comm_t *comm = NULL;
  if (ddp_init(&argc, &argv, MPI_COMM_NULL, &comm) != DDP_OK) {
    fprintf(stderr, "ddp_init: %s\n", ddp_last_error());
    return 1;
  }
  int rank = 0;
  ddp_comm_rank(comm, &rank);
  char desc[128];
  CHECK_OK(ddp_device_describe(comm, desc, sizeof desc));
  if (argc > 1 && !strcmp(argv[1], "none")) {
    CHECK(!ddp_device_available(comm) || ddp_device_kind(comm) == DDP_DEVICE_CUDA,
          "device available without emulation: %s", desc);
    if (!ddp_device_available(comm)) {
      void *p = NULL;
      CHECK_ST(ddp_device_malloc(comm, 64, &p), DDP_ENOTSUP);
      CHECK_MSG("DDP_DEVICE_EMULATE");
      CHECK(p == NULL, "output written on error");
      const char *name = NULL;
      CHECK_ST(ddp_device_transport(comm, NULL, &name), DDP_ENOTSUP);
      float x[4] = {1, 2, 3, 4};
      ddp_coll_opts_t o;
      ddp_coll_opts_default(&o);
      o.mem = DDP_MEM_CUDA;
      CHECK_ST(ddp_allreduce(comm, DDP_IN_PLACE, x, 4, DDP_F32, DDP_SUM, &o), DDP_ENOTSUP);
      CHECK_MSG("no device");
      CHECK(x[0] == 1 && x[3] == 4, "buffer written on error");
      CHECK(strncmp(desc, "none", 4) == 0, "describe: %s", desc);
    }
  } else {
#ifdef DDP_TEST_GPU
    /* The same checks on a real GPU (label gpu): skipped with the reason where there is none. */
    int verdict = ddp_test_device_verdict(comm, "gpu_device", DDP_TEST_WANT_CUDA);
    if (verdict) {
      ddp_finalize(&comm);
      return verdict;
    }
    if (rank == 0) printf("gpu_device: on %s\n", desc);
#else
    CHECK(ddp_device_emulated(comm), "DDP_DEVICE_EMULATE=1 but the device is: %s", desc);
#endif
    if (ddp_device_available(comm)) {
      test_ordering(comm);
      test_kernels(comm, rank);
      test_bad_inputs(comm);
    }
  }
  /* a destroyed communicator (the handle is NULL then): refused, nothing touched */
  ddp_comm_t *c2 = NULL;
  if (ddp_comm_create(MPI_COMM_WORLD, &c2) == DDP_OK) {
    CHECK_OK(ddp_comm_destroy(&c2));
    void *p = NULL;
    CHECK_ST(ddp_device_malloc(c2, 64, &p), DDP_EINVAL);
    CHECK(p == NULL, "output written on a closed communicator");
    CHECK(ddp_device_kind(c2) == DDP_DEVICE_NONE, "closed communicator has a device");
  }
  int rc = ddp_test_finish(argc > 1 ? "device_emu(none)" : "device_emu");
  ddp_finalize(&comm);
  return rc;
}
