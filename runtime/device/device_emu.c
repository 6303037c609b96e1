/* Host emulation of the device (DDP_DEVICE_EMULATE=1): "device memory" is tracked host memory,
 * every stream is a worker thread that runs its queue in order, later than the call that
 * queued it, and an event is a (stream, count of queued operations) pair. It lets the
 * stream/event ordering, the staging pipeline and the reducer's device path run in CI on
 * machines without a GPU: a missing event wait shows up as a wrong result here too. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "device_internal.h"

#define STREAM_MAGIC 0x656d757374726d00ULL /* "emustrm" */
#define EVENT_MAGIC 0x656d756576656e74ULL    /* "emuevent" */

enum { OP_COPY, OP_SET, OP_FUNC, OP_WAIT, OP_REDUCE, OP_SCALE, OP_CONVERT, OP_NONFINITE };

/* The emulation's streams and events are the public opaque types. */
typedef struct ddp_stream emu_stream_t;

typedef struct emu_op {
  int kind;
  void *dst;
  const void *src;
  size_t n; /* bytes (copy, set) or elements */
  int value;
  ddp_dtype_t dtype, dtype2;
  ddp_op_t op;
  double factor;
  int divide;
  int *flag;
  void (*fn)(void *);
  void *arg;
  emu_stream_t *wait_stream; /* OP_WAIT: until wait_stream->done >= wait_target */
  uint64_t wait_target;
  struct emu_op *next;
} emu_op_t;

struct ddp_stream {
  uint64_t magic;
  struct emu *e;
  pthread_t thread;
  emu_op_t *head, *tail;
  uint64_t queued, done;
  int stop, live, started;
  struct ddp_stream *next;
};

typedef struct ddp_event {
  uint64_t magic;
  emu_stream_t *s; /* NULL until recorded */
  uint64_t target;
  struct ddp_event *next;
} emu_event_t;

typedef struct emu_alloc {
  char *p;
  size_t bytes;
  struct emu_alloc *next;
} emu_alloc_t;

typedef struct emu {
  pthread_mutex_t mu;
  pthread_cond_t cv; /* any progress: queue grew, an operation finished, stop */
  emu_alloc_t *dev, *pinned;
  emu_stream_t *streams; /* live and destroyed (freed at fini: events may point at them) */
  emu_stream_t *deflt;
  emu_event_t *events;
} emu_t;

static emu_t *E(ddp__device_t *d) { return d->state; }

/* The device current on each thread, as the CUDA runtime keeps one. CUDA runs a call made on a
 * thread that never bound this device on device 0, silently; the emulation refuses it, so a
 * code path that forgets to bind (the progress engine, a collective on the caller's thread)
 * fails in CI instead of on a machine with several GPUs. */
static _Thread_local const ddp__device_t *emu_current;

static ddp_status_t emu_bind(ddp__device_t *d) {
  emu_current = d;
  return DDP_OK;
}

static ddp_status_t unbound(const char *fn) {
  return ddp__error(DDP_EINTERNAL, "emulated device: %s called on a thread that has not bound "
                                   "this communicator's device (CUDA would use another device)",
                    fn);
}
#define BOUND(d)                                       \
  do {                                                 \
    if (emu_current != (d)) return unbound(__func__); \
  } while (0)

/* ---- kernels (run on the stream's thread) ------------------------------------------------ */
static void k_scale_mul(void *buf, size_t n, ddp_dtype_t t, double factor) {
  size_t i;
  float f = (float)factor;
  switch (t) {
    case DDP_F32: {
      float *p = buf;
      for (i = 0; i < n; i++) p[i] *= f;
      break;
    }
    case DDP_F64: {
      double *p = buf;
      for (i = 0; i < n; i++) p[i] *= factor;
      break;
    }
    case DDP_F16: {
      uint16_t *p = buf;
      for (i = 0; i < n; i++) p[i] = ddp__f32_to_f16(ddp__f16_to_f32(p[i]) * f);
      break;
    }
    case DDP_BF16: {
      uint16_t *p = buf;
      for (i = 0; i < n; i++) p[i] = ddp__f32_to_bf16(ddp__bf16_to_f32(p[i]) * f);
      break;
    }
    default: break;
  }
}

static void k_convert(void *dst, ddp_dtype_t dt, const void *src, ddp_dtype_t st, size_t n) {
  if (st == DDP_F32 && dt == DDP_F16) ddp__f32_to_f16_n(dst, src, n);
  else if (st == DDP_F32 && dt == DDP_BF16) ddp__f32_to_bf16_n(dst, src, n);
  else if (st == DDP_F16 && dt == DDP_F32) ddp__f16_to_f32_n(dst, src, n);
  else if (st == DDP_BF16 && dt == DDP_F32) ddp__bf16_to_f32_n(dst, src, n);
  else memmove(dst, src, n * ddp_dtype_size(st));
}

static void k_nonfinite(const void *buf, size_t n, ddp_dtype_t t, int *flag) {
  int bad = 0;
  size_t i;
  switch (t) {
    case DDP_F32: {
      const float *p = buf;
      for (i = 0; i < n; i++) bad |= !isfinite(p[i]);
      break;
    }
    case DDP_F64: {
      const double *p = buf;
      for (i = 0; i < n; i++) bad |= !isfinite(p[i]);
      break;
    }
    case DDP_F16: {
      const uint16_t *p = buf;
      for (i = 0; i < n; i++) bad |= (p[i] & 0x7c00) == 0x7c00;
      break;
    }
    case DDP_BF16: {
      const uint16_t *p = buf;
      for (i = 0; i < n; i++) bad |= (p[i] & 0x7f80) == 0x7f80;
      break;
    }
    default: break;
  }
  if (bad) *flag = 1;
}

static void run_op(emu_op_t *o) {
  switch (o->kind) {
    case OP_COPY: memmove(o->dst, o->src, o->n); break;
    case OP_SET: memset(o->dst, o->value, o->n); break;
    case OP_FUNC: o->fn(o->arg); break;
    case OP_REDUCE: ddp__reduce_host(o->dst, o->src, o->n, o->dtype, o->op); break;
    case OP_SCALE:
      if (o->divide) ddp__scale_host(o->dst, o->n, o->dtype, o->factor);
      else k_scale_mul(o->dst, o->n, o->dtype, o->factor);
      break;
    case OP_CONVERT: k_convert(o->dst, o->dtype2, o->src, o->dtype, o->n); break;
    case OP_NONFINITE: k_nonfinite(o->src, o->n, o->dtype, o->flag); break;
    default: break;
  }
}

static void *worker(void *arg) {
  emu_stream_t *s = arg;
  emu_t *e = s->e;
  pthread_mutex_lock(&e->mu);
  for (;;) {
    while (!s->head && !s->stop) pthread_cond_wait(&e->cv, &e->mu);
    if (!s->head) break;
    emu_op_t *o = s->head;
    if (o->kind == OP_WAIT) {
      while (o->wait_stream->done < o->wait_target) pthread_cond_wait(&e->cv, &e->mu);
    } else {
      pthread_mutex_unlock(&e->mu);
      run_op(o);
      pthread_mutex_lock(&e->mu);
    }
    s->head = o->next;
    if (!s->head) s->tail = NULL;
    s->done++;
    free(o);
    pthread_cond_broadcast(&e->cv);
  }
  pthread_mutex_unlock(&e->mu);
  return NULL;
}

/* ---- streams ----------------------------------------------------------------------------- */
static ddp_status_t stream_new(emu_t *e, emu_stream_t **out) {
  emu_stream_t *s = calloc(1, sizeof *s);
  if (!s) return ddp__error(DDP_ENOMEM, "emulated stream: out of memory");
  s->magic = STREAM_MAGIC;
  s->e = e;
  s->live = 1;
  if (pthread_create(&s->thread, NULL, worker, s) != 0) {
    free(s);
    return ddp__error(DDP_ENOMEM, "emulated stream: cannot start its worker thread");
  }
  s->started = 1;
  s->next = e->streams; /* caller holds e->mu */
  e->streams = s;
  *out = s;
  return DDP_OK;
}

/* The stream a handle names; NULL = the default stream (started on first use). Holds e->mu. */
static ddp_status_t resolve(emu_t *e, ddp_stream_t *h, emu_stream_t **out) {
  if (h) {
    *out = h;
    return DDP_OK;
  }
  if (!e->deflt) DDP_TRY(stream_new(e, &e->deflt));
  *out = e->deflt;
  return DDP_OK;
}

static ddp_status_t enqueue(ddp__device_t *d, ddp_stream_t *h, const emu_op_t *tmpl) {
  BOUND(d);
  emu_t *e = E(d);
  emu_op_t *o = malloc(sizeof *o);
  if (!o) return ddp__error(DDP_ENOMEM, "emulated stream operation: out of memory");
  *o = *tmpl;
  o->next = NULL;
  pthread_mutex_lock(&e->mu);
  emu_stream_t *s = NULL;
  ddp_status_t st = resolve(e, h, &s);
  if (st != DDP_OK) {
    pthread_mutex_unlock(&e->mu);
    free(o);
    return st;
  }
  if (s->tail) s->tail->next = o;
  else s->head = o;
  s->tail = o;
  s->queued++;
  pthread_cond_broadcast(&e->cv);
  pthread_mutex_unlock(&e->mu);
  return DDP_OK;
}

static void drain_locked(emu_t *e, emu_stream_t *s) {
  while (s->done < s->queued) pthread_cond_wait(&e->cv, &e->mu);
}

static void drain_all_locked(emu_t *e) {
  for (emu_stream_t *s = e->streams; s; s = s->next)
    if (s->live) drain_locked(e, s);
}

static ddp_status_t emu_check_stream(ddp__device_t *d, ddp_stream_t *h, const char *arg) {
  if (!h) return DDP_OK;
  emu_t *e = E(d);
  pthread_mutex_lock(&e->mu);
  int ok = 0;
  for (emu_stream_t *s = e->streams; s; s = s->next)
    if ((void *)s == h && s->live) ok = 1;
  pthread_mutex_unlock(&e->mu);
  if (!ok) return ddp__error(DDP_EINVAL, "%s %p is not a live stream of this communicator", arg, h);
  return DDP_OK;
}

static ddp_status_t emu_check_event(ddp__device_t *d, ddp_event_t *h, const char *arg) {
  emu_t *e = E(d);
  pthread_mutex_lock(&e->mu);
  int ok = 0;
  for (emu_event_t *v = e->events; v; v = v->next)
    if ((void *)v == h) ok = 1;
  pthread_mutex_unlock(&e->mu);
  if (!ok) return ddp__error(DDP_EINVAL, "%s %p is not a live event of this communicator", arg, h);
  return DDP_OK;
}

static ddp_status_t emu_stream_create(ddp__device_t *d, ddp_stream_t **out) {
  BOUND(d);
  emu_t *e = E(d);
  emu_stream_t *s = NULL;
  pthread_mutex_lock(&e->mu);
  ddp_status_t st = stream_new(e, &s);
  pthread_mutex_unlock(&e->mu);
  if (st == DDP_OK) *out = s;
  return st;
}

static void stream_stop_locked(emu_t *e, emu_stream_t *s) {
  drain_locked(e, s);
  s->stop = 1;
  s->live = 0;
  pthread_cond_broadcast(&e->cv);
  pthread_mutex_unlock(&e->mu);
  pthread_join(s->thread, NULL);
  pthread_mutex_lock(&e->mu);
  s->started = 0;
}

static ddp_status_t emu_stream_destroy(ddp__device_t *d, ddp_stream_t *h) {
  BOUND(d);
  emu_t *e = E(d);
  pthread_mutex_lock(&e->mu);
  stream_stop_locked(e, h);
  pthread_mutex_unlock(&e->mu);
  return DDP_OK;
}

static ddp_status_t emu_stream_sync(ddp__device_t *d, ddp_stream_t *h) {
  BOUND(d);
  emu_t *e = E(d);
  pthread_mutex_lock(&e->mu);
  emu_stream_t *s = NULL;
  ddp_status_t st = resolve(e, h, &s);
  if (st == DDP_OK) drain_locked(e, s);
  pthread_mutex_unlock(&e->mu);
  return st;
}

/* ---- events ------------------------------------------------------------------------------ */
static ddp_status_t emu_event_create(ddp__device_t *d, ddp_event_t **out) {
  BOUND(d);
  emu_t *e = E(d);
  emu_event_t *v = calloc(1, sizeof *v);
  if (!v) return ddp__error(DDP_ENOMEM, "emulated event: out of memory");
  v->magic = EVENT_MAGIC;
  pthread_mutex_lock(&e->mu);
  v->next = e->events;
  e->events = v;
  pthread_mutex_unlock(&e->mu);
  *out = v;
  return DDP_OK;
}

static ddp_status_t emu_event_destroy(ddp__device_t *d, ddp_event_t *h) {
  BOUND(d);
  emu_t *e = E(d);
  pthread_mutex_lock(&e->mu);
  for (emu_event_t **pp = &e->events; *pp; pp = &(*pp)->next) {
    if ((void *)*pp == h) {
      emu_event_t *v = *pp;
      *pp = v->next;
      v->magic = 0;
      free(v);
      break;
    }
  }
  pthread_mutex_unlock(&e->mu);
  return DDP_OK;
}

static ddp_status_t emu_event_record(ddp__device_t *d, ddp_event_t *h, ddp_stream_t *sh) {
  BOUND(d);
  emu_t *e = E(d);
  emu_event_t *v = h;
  pthread_mutex_lock(&e->mu);
  emu_stream_t *s = NULL;
  ddp_status_t st = resolve(e, sh, &s);
  if (st == DDP_OK) {
    v->s = s;
    v->target = s->queued;
  }
  pthread_mutex_unlock(&e->mu);
  return st;
}

static ddp_status_t emu_stream_wait(ddp__device_t *d, ddp_stream_t *sh, ddp_event_t *h) {
  BOUND(d);
  emu_t *e = E(d);
  emu_event_t *v = h;
  emu_op_t o = {.kind = OP_WAIT};
  pthread_mutex_lock(&e->mu);
  o.wait_stream = v->s;
  o.wait_target = v->target;
  pthread_mutex_unlock(&e->mu);
  if (!o.wait_stream) return DDP_OK; /* never recorded: nothing to wait for (as in CUDA) */
  return enqueue(d, sh, &o);
}

static ddp_status_t emu_event_sync(ddp__device_t *d, ddp_event_t *h) {
  BOUND(d);
  emu_t *e = E(d);
  emu_event_t *v = h;
  pthread_mutex_lock(&e->mu);
  if (v->s)
    while (v->s->done < v->target) pthread_cond_wait(&e->cv, &e->mu);
  pthread_mutex_unlock(&e->mu);
  return DDP_OK;
}

static ddp_status_t emu_event_query(ddp__device_t *d, ddp_event_t *h, int *done) {
  BOUND(d);
  emu_t *e = E(d);
  emu_event_t *v = h;
  pthread_mutex_lock(&e->mu);
  *done = !v->s || v->s->done >= v->target;
  pthread_mutex_unlock(&e->mu);
  return DDP_OK;
}

/* ---- memory ------------------------------------------------------------------------------ */
static ddp_status_t alloc_tracked(emu_t *e, emu_alloc_t **list, size_t bytes, void **ptr,
                                  const char *what) {
  emu_alloc_t *a = calloc(1, sizeof *a);
  void *p = NULL;
  /* cudaMalloc aligns to 256 bytes; so does the emulation, so alignment bugs show up alike. */
  size_t rounded = (bytes + 255) & ~(size_t)255;
  if (!a || rounded < bytes || posix_memalign(&p, 256, rounded) != 0) {
    free(a);
    return ddp__error(DDP_ENOMEM, "%s of %zu bytes: out of memory", what, bytes);
  }
  a->p = p;
  a->bytes = bytes;
  pthread_mutex_lock(&e->mu);
  a->next = *list;
  *list = a;
  pthread_mutex_unlock(&e->mu);
  *ptr = p;
  return DDP_OK;
}

static ddp_status_t free_tracked(emu_t *e, emu_alloc_t **list, void *ptr, const char *what) {
  pthread_mutex_lock(&e->mu);
  for (emu_alloc_t **pp = list; *pp; pp = &(*pp)->next) {
    if ((*pp)->p == ptr) {
      emu_alloc_t *a = *pp;
      *pp = a->next;
      /* cudaFree waits for the device to finish using the memory; so do we. */
      drain_all_locked(e);
      pthread_mutex_unlock(&e->mu);
      free(a->p);
      free(a);
      return DDP_OK;
    }
  }
  pthread_mutex_unlock(&e->mu);
  return ddp__error(DDP_EINVAL, "ptr %p is not a live %s of this communicator", ptr, what);
}

static ddp_status_t emu_dev_alloc(ddp__device_t *d, size_t bytes, void **ptr) {
  BOUND(d);
  return alloc_tracked(E(d), &E(d)->dev, bytes, ptr, "device allocation");
}
static ddp_status_t emu_dev_free(ddp__device_t *d, void *ptr) {
  BOUND(d);
  return free_tracked(E(d), &E(d)->dev, ptr, "device allocation");
}
static ddp_status_t emu_host_alloc(ddp__device_t *d, size_t bytes, void **ptr) {
  BOUND(d);
  return alloc_tracked(E(d), &E(d)->pinned, bytes, ptr, "pinned host allocation");
}
static ddp_status_t emu_host_free(ddp__device_t *d, void *ptr) {
  BOUND(d);
  return free_tracked(E(d), &E(d)->pinned, ptr, "pinned host allocation");
}

static int emu_is_dev(ddp__device_t *d, const void *ptr, size_t bytes) {
  emu_t *e = E(d);
  const char *p = ptr;
  int found = 0;
  pthread_mutex_lock(&e->mu);
  for (emu_alloc_t *a = e->dev; a && !found; a = a->next) {
    if (p < a->p || p >= a->p + a->bytes) continue;
    found = bytes <= (size_t)(a->p + a->bytes - p);
  }
  pthread_mutex_unlock(&e->mu);
  return found;
}

/* ---- asynchronous work --------------------------------------------------------------------- */
static ddp_status_t emu_memcpy(ddp__device_t *d, void *dst, const void *src, size_t bytes,
                               ddp_stream_t *s) {
  emu_op_t o = {.kind = OP_COPY, .dst = dst, .src = src, .n = bytes};
  return enqueue(d, s, &o);
}
static ddp_status_t emu_memset(ddp__device_t *d, void *dst, int value, size_t bytes,
                               ddp_stream_t *s) {
  emu_op_t o = {.kind = OP_SET, .dst = dst, .value = value, .n = bytes};
  return enqueue(d, s, &o);
}
static ddp_status_t emu_host_func(ddp__device_t *d, ddp_stream_t *s, void (*fn)(void *), void *arg) {
  emu_op_t o = {.kind = OP_FUNC, .fn = fn, .arg = arg};
  return enqueue(d, s, &o);
}
static ddp_status_t emu_reduce(ddp__device_t *d, void *dst, const void *src, size_t count,
                               ddp_dtype_t dtype, ddp_op_t op, ddp_stream_t *s) {
  emu_op_t o = {.kind = OP_REDUCE, .dst = dst, .src = src, .n = count, .dtype = dtype, .op = op};
  return enqueue(d, s, &o);
}
static ddp_status_t emu_scale(ddp__device_t *d, void *buf, size_t count, ddp_dtype_t dtype,
                              double factor, int divide, ddp_stream_t *s) {
  emu_op_t o = {.kind = OP_SCALE, .dst = buf, .n = count, .dtype = dtype, .factor = factor,
                .divide = divide};
  return enqueue(d, s, &o);
}
static ddp_status_t emu_convert(ddp__device_t *d, void *dst, ddp_dtype_t dst_dtype, const void *src,
                                ddp_dtype_t src_dtype, size_t count, ddp_stream_t *s) {
  emu_op_t o = {.kind = OP_CONVERT, .dst = dst, .src = src, .n = count, .dtype = src_dtype,
                .dtype2 = dst_dtype};
  return enqueue(d, s, &o);
}
static ddp_status_t emu_nonfinite(ddp__device_t *d, const void *buf, size_t count,
                                  ddp_dtype_t dtype, int *flag, ddp_stream_t *s) {
  emu_op_t o = {.kind = OP_NONFINITE, .src = buf, .n = count, .dtype = dtype, .flag = flag};
  return enqueue(d, s, &o);
}

/* ---- life cycle ---------------------------------------------------------------------------- */
static ddp_status_t emu_init(ddp__device_t *d) {
  emu_t *e = calloc(1, sizeof *e);
  if (!e) return ddp__error(DDP_ENOMEM, "emulated device: out of memory");
  pthread_mutex_init(&e->mu, NULL);
  pthread_cond_init(&e->cv, NULL);
  d->state = e;
  snprintf(d->desc, sizeof d->desc, "emulated (host memory, a worker thread per stream)");
  return DDP_OK;
}

static void free_list(emu_alloc_t *a) {
  while (a) {
    emu_alloc_t *n = a->next;
    free(a->p);
    free(a);
    a = n;
  }
}

static void emu_fini(ddp__device_t *d) {
  emu_t *e = E(d);
  if (!e) return;
  pthread_mutex_lock(&e->mu);
  for (emu_stream_t *s = e->streams; s; s = s->next)
    if (s->started) stream_stop_locked(e, s);
  pthread_mutex_unlock(&e->mu);
  while (e->streams) {
    emu_stream_t *n = e->streams->next;
    free(e->streams);
    e->streams = n;
  }
  while (e->events) {
    emu_event_t *n = e->events->next;
    free(e->events);
    e->events = n;
  }
  free_list(e->dev);
  free_list(e->pinned);
  pthread_cond_destroy(&e->cv);
  pthread_mutex_destroy(&e->mu);
  free(e);
  d->state = NULL;
}

const ddp__devimpl_t ddp__devimpl_emu = {
    .name = "emulated",
    .init = emu_init,
    .fini = emu_fini,
    .bind = emu_bind,
    .dev_alloc = emu_dev_alloc,
    .dev_free = emu_dev_free,
    .host_alloc = emu_host_alloc,
    .host_free = emu_host_free,
    .is_dev = emu_is_dev,
    .check_stream = emu_check_stream,
    .check_event = emu_check_event,
    .stream_create = emu_stream_create,
    .stream_destroy = emu_stream_destroy,
    .stream_sync = emu_stream_sync,
    .event_create = emu_event_create,
    .event_destroy = emu_event_destroy,
    .event_record = emu_event_record,
    .stream_wait = emu_stream_wait,
    .event_sync = emu_event_sync,
    .event_query = emu_event_query,
    .memcpy_async = emu_memcpy,
    .memset_async = emu_memset,
    .host_func = emu_host_func,
    .reduce = emu_reduce,
    .scale = emu_scale,
    .convert = emu_convert,
    .nonfinite = emu_nonfinite,
};
