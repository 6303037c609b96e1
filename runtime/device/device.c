/* Device layer front end: picks the implementation at communicator creation (host emulation
 * with DDP_DEVICE_EMULATE=1, CUDA when a GPU is bound, none otherwise), checks every public
 * call's arguments and forwards it to the implementation's table. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "device_internal.h"

ddp_status_t ddp__device_comm_init(ddp__comm_t *c) {
  c->dev = NULL;
  const ddp__devimpl_t *impl = NULL;
  ddp_device_kind_t kind = DDP_DEVICE_NONE;
  if (c->cfg.device_emulate) {
    impl = &ddp__devimpl_emu;
    kind = DDP_DEVICE_EMULATED;
  }
#if DDP_HAVE_CUDA
  else if (c->device >= 0) {
    impl = &ddp__devimpl_cuda;
    kind = DDP_DEVICE_CUDA;
  }
#endif
  if (!impl) return DDP_OK;
  ddp__device_t *d = calloc(1, sizeof *d);
  if (!d) return ddp__error(DDP_ENOMEM, "device state: out of memory");
  d->c = c;
  d->kind = kind;
  d->impl = impl;
  ddp_status_t st = impl->init(d);
  if (st == DDP_OK) st = impl->bind(d);
  if (st != DDP_OK) {
    if (d->state) impl->fini(d);
    free(d);
    return st;
  }
  pthread_mutex_init(&d->pool_mu, NULL);
  c->dev = d;
  DDP_LOG(c, DDP_LOG_INFO, "device layer: %s", d->desc);
  return DDP_OK;
}

void ddp__device_comm_fini(ddp__comm_t *c) {
  ddp__device_t *d = c->dev;
  if (!d) return;
  d->impl->bind(d);
  for (int i = 0; i < d->npool; i++) d->impl->event_destroy(d, d->pool[i]);
  pthread_mutex_destroy(&d->pool_mu);
  d->impl->fini(d);
  free(d);
  c->dev = NULL;
}

ddp_status_t ddp__device_bind_thread(ddp__comm_t *c) {
  return c->dev ? c->dev->impl->bind(c->dev) : DDP_OK;
}

/* The pool is used from the posting threads and the progress engine at once: its own lock. */
ddp_status_t ddp__device_event_get(ddp__device_t *d, ddp_event_t **ev) {
  pthread_mutex_lock(&d->pool_mu);
  ddp_event_t *e = d->npool > 0 ? d->pool[--d->npool] : NULL;
  pthread_mutex_unlock(&d->pool_mu);
  if (e) {
    *ev = e;
    return DDP_OK;
  }
  return d->impl->event_create(d, ev);
}

void ddp__device_event_put(ddp__device_t *d, ddp_event_t *ev) {
  if (!ev) return;
  pthread_mutex_lock(&d->pool_mu);
  int kept = d->npool < (int)(sizeof d->pool / sizeof d->pool[0]);
  if (kept) d->pool[d->npool++] = ev;
  pthread_mutex_unlock(&d->pool_mu);
  if (!kept) d->impl->event_destroy(d, ev);
}

/* The communicator's device, or DDP_ENOTSUP saying why there is none. */
static ddp_status_t get_dev(const ddp_comm_t *comm, ddp__device_t **out) {
  ddp__comm_t *c = NULL;
  DDP_TRY(ddp__comm_get(comm, "comm", &c));
  if (!c->dev)
    return ddp__error(DDP_ENOTSUP,
                      "comm has no device (%d CUDA device(s) visible%s): set DDP_DEVICE_EMULATE=1 "
                      "for the host emulation",
                      c->gpu_count, DDP_HAVE_CUDA ? "" : ", library built without CUDA");
  /* The calling thread works on this communicator's device from here on. */
  DDP_TRY(c->dev->impl->bind(c->dev));
  *out = c->dev;
  return DDP_OK;
}

#define GET_DEV(comm, d) \
  ddp__device_t *d = NULL; \
  DDP_TRY(get_dev((comm), &d))

static int dtype_ok(ddp_dtype_t t) { return (int)t >= 0 && t < DDP_DTYPE_COUNT; }
static int is_float(ddp_dtype_t t) {
  return t == DDP_F32 || t == DDP_F64 || t == DDP_F16 || t == DDP_BF16;
}

/* A device buffer of count elements of dtype: non-NULL (unless count 0) and in device memory. */
static ddp_status_t check_dev_buf(ddp__device_t *d, const void *p, size_t bytes, const char *arg) {
  if (bytes == 0) return DDP_OK;
  DDP_CHECK_ARG(p != NULL, "%s is NULL", arg);
  DDP_CHECK_ARG(d->impl->is_dev(d, p, bytes), "%s (%p, %zu bytes) is not %sdevice memory of this communicator",
                arg, p, bytes, d->impl->is_dev(d, p, 0) ? "entirely inside " : "");
  return DDP_OK;
}

static ddp_status_t check_count(size_t count, ddp_dtype_t dtype, size_t *bytes) {
  DDP_CHECK_ARG(dtype_ok(dtype), "dtype %d is invalid", (int)dtype);
  size_t es = ddp_dtype_size(dtype);
  DDP_CHECK_ARG(count <= SIZE_MAX / es, "count %zu overflows the byte size for %s", count,
                ddp_dtype_name(dtype));
  *bytes = count * es;
  return DDP_OK;
}

ddp_device_kind_t ddp_device_kind(const ddp_comm_t *comm) {
  if (!comm || comm->magic != DDP__COMM_MAGIC) return DDP_DEVICE_NONE;
  const ddp__comm_t *c = comm;
  return c->dev ? c->dev->kind : DDP_DEVICE_NONE;
}

int ddp_device_available(const ddp_comm_t *comm) { return ddp_device_kind(comm) != DDP_DEVICE_NONE; }
int ddp_device_emulated(const ddp_comm_t *comm) {
  return ddp_device_kind(comm) == DDP_DEVICE_EMULATED;
}

ddp_status_t ddp_device_describe(const ddp_comm_t *comm, char *buf, size_t bytes) {
  ddp__comm_t *c = NULL;
  DDP_TRY(ddp__comm_get(comm, "comm", &c));
  DDP_CHECK_ARG(buf != NULL, "buf is NULL");
  DDP_CHECK_ARG(bytes > 0, "bytes is 0");
  if (c->dev) snprintf(buf, bytes, "%s", c->dev->desc);
  else if (!DDP_HAVE_CUDA) snprintf(buf, bytes, "none (built without CUDA)");
  else if (c->gpu_count == 0) snprintf(buf, bytes, "none (no CUDA device visible)");
  else snprintf(buf, bytes, "none (DDP_DEVICE=none)");
  return DDP_OK;
}

ddp_status_t ddp_device_malloc(ddp_comm_t *comm, size_t bytes, void **ptr) {
  DDP_CHECK_ARG(ptr != NULL, "ptr is NULL");
  GET_DEV(comm, d);
  DDP_CHECK_ARG(bytes > 0, "bytes is 0");
  return d->impl->dev_alloc(d, bytes, ptr);
}

ddp_status_t ddp_device_free(ddp_comm_t *comm, void *ptr) {
  GET_DEV(comm, d);
  if (!ptr) return DDP_OK;
  return d->impl->dev_free(d, ptr);
}

ddp_status_t ddp_host_alloc_pinned(ddp_comm_t *comm, size_t bytes, void **ptr) {
  DDP_CHECK_ARG(ptr != NULL, "ptr is NULL");
  GET_DEV(comm, d);
  DDP_CHECK_ARG(bytes > 0, "bytes is 0");
  return d->impl->host_alloc(d, bytes, ptr);
}

ddp_status_t ddp_host_free_pinned(ddp_comm_t *comm, void *ptr) {
  GET_DEV(comm, d);
  if (!ptr) return DDP_OK;
  return d->impl->host_free(d, ptr);
}

int ddp_device_is_device_ptr(const ddp_comm_t *comm, const void *ptr) {
  if (!comm || comm->magic != DDP__COMM_MAGIC || !ptr) return 0;
  ddp__device_t *d = comm->dev;
  return d ? d->impl->is_dev(d, ptr, 0) : 0;
}

ddp_status_t ddp_stream_create(ddp_comm_t *comm, ddp_stream_t **stream) {
  DDP_CHECK_ARG(stream != NULL, "stream is NULL");
  GET_DEV(comm, d);
  return d->impl->stream_create(d, stream);
}

ddp_status_t ddp_stream_destroy(ddp_comm_t *comm, ddp_stream_t **stream) {
  GET_DEV(comm, d);
  if (stream == NULL || *stream == NULL) return DDP_OK; /* the default stream is never destroyed */
  DDP_TRY(d->impl->check_stream(d, *stream, "*stream"));
  ddp_status_t st = d->impl->stream_destroy(d, *stream);
  if (st == DDP_OK) *stream = NULL;
  return st;
}

ddp_status_t ddp_stream_synchronize(ddp_comm_t *comm, ddp_stream_t *stream) {
  GET_DEV(comm, d);
  DDP_TRY(d->impl->check_stream(d, stream, "stream"));
  return d->impl->stream_sync(d, stream);
}

ddp_status_t ddp_event_create(ddp_comm_t *comm, ddp_event_t **event) {
  DDP_CHECK_ARG(event != NULL, "event is NULL");
  GET_DEV(comm, d);
  return d->impl->event_create(d, event);
}

ddp_status_t ddp_event_destroy(ddp_comm_t *comm, ddp_event_t **event) {
  GET_DEV(comm, d);
  if (event == NULL || *event == NULL) return DDP_OK;
  DDP_TRY(d->impl->check_event(d, *event, "*event"));
  ddp_status_t st = d->impl->event_destroy(d, *event);
  if (st == DDP_OK) *event = NULL;
  return st;
}

ddp_status_t ddp_event_record(ddp_comm_t *comm, ddp_event_t *event, ddp_stream_t *stream) {
  GET_DEV(comm, d);
  DDP_CHECK_ARG(event != NULL, "event is NULL");
  DDP_TRY(d->impl->check_event(d, event, "event"));
  DDP_TRY(d->impl->check_stream(d, stream, "stream"));
  return d->impl->event_record(d, event, stream);
}

ddp_status_t ddp_stream_wait_event(ddp_comm_t *comm, ddp_stream_t *stream, ddp_event_t *event) {
  GET_DEV(comm, d);
  DDP_CHECK_ARG(event != NULL, "event is NULL");
  DDP_TRY(d->impl->check_event(d, event, "event"));
  DDP_TRY(d->impl->check_stream(d, stream, "stream"));
  return d->impl->stream_wait(d, stream, event);
}

ddp_status_t ddp_event_synchronize(ddp_comm_t *comm, ddp_event_t *event) {
  GET_DEV(comm, d);
  DDP_CHECK_ARG(event != NULL, "event is NULL");
  DDP_TRY(d->impl->check_event(d, event, "event"));
  return d->impl->event_sync(d, event);
}

ddp_status_t ddp_event_query(ddp_comm_t *comm, ddp_event_t *event, int *done) {
  DDP_CHECK_ARG(done != NULL, "done is NULL");
  GET_DEV(comm, d);
  DDP_CHECK_ARG(event != NULL, "event is NULL");
  DDP_TRY(d->impl->check_event(d, event, "event"));
  return d->impl->event_query(d, event, done);
}

ddp_status_t ddp_memcpy_async(ddp_comm_t *comm, void *dst, const void *src, size_t bytes,
                              ddp_stream_t *stream) {
  GET_DEV(comm, d);
  if (bytes > 0) {
    DDP_CHECK_ARG(dst != NULL, "dst is NULL");
    DDP_CHECK_ARG(src != NULL, "src is NULL");
  }
  DDP_TRY(d->impl->check_stream(d, stream, "stream"));
  if (bytes == 0) return DDP_OK;
  return d->impl->memcpy_async(d, dst, src, bytes, stream);
}

ddp_status_t ddp_memset_async(ddp_comm_t *comm, void *dst, int value, size_t bytes,
                              ddp_stream_t *stream) {
  GET_DEV(comm, d);
  DDP_TRY(check_dev_buf(d, dst, bytes, "dst"));
  DDP_TRY(d->impl->check_stream(d, stream, "stream"));
  if (bytes == 0) return DDP_OK;
  return d->impl->memset_async(d, dst, value, bytes, stream);
}

ddp_status_t ddp_launch_host_func(ddp_comm_t *comm, ddp_stream_t *stream, void (*fn)(void *arg),
                                  void *arg) {
  DDP_CHECK_ARG(fn != NULL, "fn is NULL");
  GET_DEV(comm, d);
  DDP_TRY(d->impl->check_stream(d, stream, "stream"));
  return d->impl->host_func(d, stream, fn, arg);
}

ddp_status_t ddp_device_reduce_async(ddp_comm_t *comm, void *dst, const void *src, size_t count,
                                     ddp_dtype_t dtype, ddp_op_t op, ddp_stream_t *stream) {
  GET_DEV(comm, d);
  size_t bytes = 0;
  DDP_TRY(check_count(count, dtype, &bytes));
  DDP_CHECK_ARG(op == DDP_SUM || op == DDP_MIN || op == DDP_MAX || op == DDP_PROD,
                "op %d (%s) is not sum, min, max or prod", (int)op, ddp_op_name(op));
  DDP_TRY(check_dev_buf(d, dst, bytes, "dst"));
  DDP_TRY(check_dev_buf(d, src, bytes, "src"));
  DDP_TRY(d->impl->check_stream(d, stream, "stream"));
  if (count == 0) return DDP_OK;
  return d->impl->reduce(d, dst, src, count, dtype, op, stream);
}

ddp_status_t ddp_device_scale_async(ddp_comm_t *comm, void *buf, size_t count, ddp_dtype_t dtype,
                                    double factor, ddp_stream_t *stream) {
  GET_DEV(comm, d);
  size_t bytes = 0;
  DDP_TRY(check_count(count, dtype, &bytes));
  DDP_CHECK_ARG(is_float(dtype), "dtype %s is not a floating type (f32, f64, f16, bf16)",
                ddp_dtype_name(dtype));
  DDP_TRY(check_dev_buf(d, buf, bytes, "buf"));
  DDP_TRY(d->impl->check_stream(d, stream, "stream"));
  if (count == 0) return DDP_OK;
  return d->impl->scale(d, buf, count, dtype, factor, 0, stream);
}

ddp_status_t ddp_device_convert_async(ddp_comm_t *comm, void *dst, ddp_dtype_t dst_dtype,
                                      const void *src, ddp_dtype_t src_dtype, size_t count,
                                      ddp_stream_t *stream) {
  GET_DEV(comm, d);
  size_t sb = 0, db = 0;
  DDP_TRY(check_count(count, src_dtype, &sb));
  DDP_TRY(check_count(count, dst_dtype, &db));
  int f32_in = src_dtype == DDP_F32, f32_out = dst_dtype == DDP_F32;
  int half_in = src_dtype == DDP_F16 || src_dtype == DDP_BF16;
  int half_out = dst_dtype == DDP_F16 || dst_dtype == DDP_BF16;
  DDP_CHECK_ARG((f32_in && (half_out || f32_out)) || (half_in && f32_out),
                "conversion %s -> %s is not supported (f32 <-> f16/bf16 only)",
                ddp_dtype_name(src_dtype), ddp_dtype_name(dst_dtype));
  DDP_TRY(check_dev_buf(d, dst, db, "dst"));
  DDP_TRY(check_dev_buf(d, src, sb, "src"));
  DDP_TRY(d->impl->check_stream(d, stream, "stream"));
  if (count == 0) return DDP_OK;
  return d->impl->convert(d, dst, dst_dtype, src, src_dtype, count, stream);
}

ddp_status_t ddp_device_nonfinite_async(ddp_comm_t *comm, const void *buf, size_t count,
                                        ddp_dtype_t dtype, int *flag, ddp_stream_t *stream) {
  GET_DEV(comm, d);
  size_t bytes = 0;
  DDP_TRY(check_count(count, dtype, &bytes));
  DDP_TRY(check_dev_buf(d, buf, bytes, "buf"));
  DDP_CHECK_ARG(flag != NULL, "flag is NULL");
  DDP_TRY(check_dev_buf(d, flag, sizeof(int), "flag"));
  DDP_TRY(d->impl->check_stream(d, stream, "stream"));
  if (count == 0 || !is_float(dtype)) return DDP_OK; /* integers are always finite */
  return d->impl->nonfinite(d, buf, count, dtype, flag, stream);
}

const char *ddp__transport_name(ddp__transport_t t) {
  switch (t) {
    case DDP__TRANSPORT_AUTO: return "auto";
    case DDP__TRANSPORT_MPI: return "mpi";
    case DDP__TRANSPORT_STAGED: return "staged";
    case DDP__TRANSPORT_NCCL: return "nccl";
  }
  return "?";
}

ddp_status_t ddp__device_pick_transport(ddp__comm_t *c, const char *requested,
                                        ddp__transport_t *out) {
  ddp__transport_t t = c->dev && c->dev->transport_set ? c->dev->transport : c->cfg.transport;
  if (requested) {
    if (!strcmp(requested, "auto")) t = DDP__TRANSPORT_AUTO;
    else if (!strcmp(requested, "mpi")) t = DDP__TRANSPORT_MPI;
    else if (!strcmp(requested, "staged")) t = DDP__TRANSPORT_STAGED;
    else if (!strcmp(requested, "nccl")) t = DDP__TRANSPORT_NCCL;
    else
      return ddp__error(DDP_EINVAL, "transport '%s' is unknown (allowed: auto, mpi, staged, nccl)",
                        requested);
  }
  ddp__device_t *d = c->dev;
  if (!d)
    return ddp__error(DDP_ENOTSUP, "no device on this communicator: device transports need a "
                                   "GPU or DDP_DEVICE_EMULATE=1");
  /* The emulation's "device memory" is host memory, so MPI can always take it. */
  int aware = c->cuda_aware || d->kind == DDP_DEVICE_EMULATED;
  switch (t) {
    case DDP__TRANSPORT_AUTO:
      t = c->cuda_aware ? DDP__TRANSPORT_MPI : DDP__TRANSPORT_STAGED;
      break;
    case DDP__TRANSPORT_MPI:
      if (!aware)
        return ddp__error(DDP_ENOTSUP, "transport 'mpi' needs CUDA-aware MPI, but %s (set "
                                       "DDP_CUDA_AWARE=1 to force it, or use 'staged')",
                          c->cuda_aware_reason);
      break;
    case DDP__TRANSPORT_STAGED: break;
    case DDP__TRANSPORT_NCCL:
      if (c->gpu_shared)
        return ddp__error(DDP_ENOTSUP, "transport 'nccl': %s", c->gpu_shared_reason);
      if (d->nccl_status != DDP_OK)
        return ddp__error(DDP_ENOTSUP, "transport 'nccl' failed on this communicator before "
                                       "and is not tried again: %s", d->nccl_reason);
      if (!DDP_HAVE_NCCL)
        return ddp__error(DDP_ENOTSUP, "transport 'nccl': this library was built without NCCL");
      if (d->kind != DDP_DEVICE_CUDA)
        return ddp__error(DDP_ENOTSUP, "transport 'nccl' needs a real CUDA device (the device "
                                       "is %s)", d->desc);
      break;
  }
  *out = t;
  return DDP_OK;
}

ddp_status_t ddp_device_transport(ddp_comm_t *comm, const char *requested, const char **name) {
  ddp__comm_t *c = NULL;
  DDP_TRY(ddp__comm_get(comm, "comm", &c));
  DDP_CHECK_ARG(name != NULL, "name is NULL");
  ddp__transport_t t = DDP__TRANSPORT_AUTO;
  DDP_TRY(ddp__device_pick_transport(c, requested, &t));
  *name = ddp__transport_name(t);
  return DDP_OK;
}

ddp_status_t ddp_device_set_transport(ddp_comm_t *comm, const char *name) {
  ddp__comm_t *c = NULL;
  DDP_TRY(ddp__comm_get(comm, "comm", &c));
  DDP_CHECK_ARG(name != NULL, "name is NULL");
  ddp__transport_t t = DDP__TRANSPORT_AUTO;
  DDP_TRY(ddp__device_pick_transport(c, name, &t));
  c->dev->transport = t;
  c->dev->transport_set = 1;
  return DDP_OK;
}
