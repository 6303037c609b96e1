/* Reducer creation and destruction: argument checks agreed by every rank, the cross-rank
 * fingerprint of the registered parameters and options (a mismatch names the first differing
 * parameter on every rank, never a hang), the parameter broadcast from rank 0, first buckets. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reducer_internal.h"

ddp_status_t ddp_reducer_opts_default(ddp_reducer_opts_t *opts) {
  DDP_CHECK_ARG(opts != NULL, "opts is NULL");
  memset(opts, 0, sizeof *opts);
  /* 10 MB, not PyTorch's 25: docs/scale.md "The reducer at scale" (simulated W-DDP at 64-1024
   * ranks: 98% against 93% efficiency; measured at np 2: not worse). */
  opts->bucket_cap_mb = 10.0;
  opts->first_bucket_mb = 1.0;
  opts->grad_as_bucket_view = 1;
  opts->find_unused = 0;
  opts->static_graph = 0;
  opts->hook = DDP_HOOK_NONE;
  opts->broadcast_params = 1;
  opts->algo = DDP_ALGO_AUTO;
  opts->stream = NULL;
  opts->predivided = 0;
  opts->shard = 0;
  return DDP_OK;
}

/* Local checks; the first problem is recorded as this thread's error. */
static ddp_status_t check_local(ddp_comm_t *comm, const ddp_param_t *params, size_t nparams,
                                const ddp_reducer_opts_t *o, ddp_reducer_t **out) {
  DDP_CHECK_ARG(out != NULL, "out is NULL");
  DDP_CHECK_ARG(params != NULL || nparams == 0, "params is NULL (nparams %zu)", nparams);
  DDP_CHECK_ARG(nparams > 0, "nparams is 0: register at least one parameter");
  DDP_CHECK_ARG(isfinite(o->bucket_cap_mb) && o->bucket_cap_mb > 0.0 && o->bucket_cap_mb <= 1048576.0,
                "opts.bucket_cap_mb %g must be in (0, 1048576]", o->bucket_cap_mb);
  DDP_CHECK_ARG(isfinite(o->first_bucket_mb) && o->first_bucket_mb > 0.0 && o->first_bucket_mb <= 1048576.0,
                "opts.first_bucket_mb %g must be in (0, 1048576]", o->first_bucket_mb);
  DDP_CHECK_ARG(o->grad_as_bucket_view == 0 || o->grad_as_bucket_view == 1,
                "opts.grad_as_bucket_view %d must be 0 or 1", o->grad_as_bucket_view);
  DDP_CHECK_ARG(o->find_unused == 0 || o->find_unused == 1, "opts.find_unused %d must be 0 or 1", o->find_unused);
  DDP_CHECK_ARG(o->static_graph == 0 || o->static_graph == 1, "opts.static_graph %d must be 0 or 1", o->static_graph);
  DDP_CHECK_ARG(o->predivided == 0 || o->predivided == 1, "opts.predivided %d must be 0 or 1", o->predivided);
  DDP_CHECK_ARG(o->broadcast_params == 0 || o->broadcast_params == 1,
                "opts.broadcast_params %d must be 0 or 1", o->broadcast_params);
  DDP_CHECK_ARG((unsigned)o->hook < (unsigned)DDP_HOOK_COUNT,
                "opts.hook %d is not a ddp_hook_t (NONE=0, FP16=1, BF16=2)", (int)o->hook);
  DDP_CHECK_ARG((unsigned)o->algo < DDP_ALGO_COUNT,
                "opts.algo %d is not a ddp_algo_t (valid: 0..%d, auto mpi ring rhd shm hier)",
                (int)o->algo, DDP_ALGO_COUNT - 1);
  DDP_CHECK_ARG(o->shard >= 0 && o->shard <= 2,
                "opts.shard %d must be 0 (allreduce), 1 (ZeRO-1) or 2 (ZeRO-2)", o->shard);
  if (o->shard && o->hook != DDP_HOOK_NONE)
    return ddp__error(DDP_ENOTSUP, "opts.shard %d with opts.hook %d: the fp16/bf16 hooks compress "
                      "allreduced buckets only", o->shard, (int)o->hook);
  if (o->shard && !o->grad_as_bucket_view)
    return ddp__error(DDP_ENOTSUP, "opts.shard %d needs grad_as_bucket_view = 1 (the shard is a "
                      "range of the bucket)", o->shard);
  for (size_t i = 0; i < nparams; i++) {
    const ddp_param_t *p = &params[i];
    const char *nm = p->name ? p->name : "unnamed";
    DDP_CHECK_ARG((unsigned)p->dtype < DDP_DTYPE_COUNT, "params[%zu] ('%s'): dtype %d is not a ddp_dtype_t",
                  i, nm, (int)p->dtype);
    DDP_CHECK_ARG((unsigned)p->mem < DDP_MEM_COUNT, "params[%zu] ('%s'): mem %d is not a ddp_mem_t", i, nm,
                  (int)p->mem);
    DDP_CHECK_ARG(p->count > 0, "params[%zu] ('%s'): count is 0", i, nm);
    DDP_CHECK_ARG(p->count <= ((size_t)1 << 40), "params[%zu] ('%s'): count %zu is too large", i, nm, p->count);
    DDP_CHECK_ARG(p->data != NULL, "params[%zu] ('%s'): data is NULL", i, nm);
    if (o->shard && p->mem != DDP_MEM_HOST)
      return ddp__error(DDP_ENOTSUP, "params[%zu] ('%s'): opts.shard %d supports host parameters only",
                        i, nm, o->shard);
    DDP_CHECK_ARG(o->grad_as_bucket_view || p->grad != NULL,
                  "params[%zu] ('%s'): grad is NULL, but grad_as_bucket_view is off so the "
                  "application must provide the gradient buffer", i, nm);
    const char *why = ddp__rbuf_unsupported(comm, p->mem);
    if (why) return ddp__error(DDP_ENOTSUP, "params[%zu] ('%s'): %s", i, nm, why);
  }
  return DDP_OK;
}

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
  return h * 0xBF58476D1CE4E5B9ULL;
}

static uint64_t opts_hash(const ddp_reducer_opts_t *o) {
  uint64_t h = 1469598103934665603ULL;
  uint64_t cap, first;
  memcpy(&cap, &o->bucket_cap_mb, sizeof cap);
  memcpy(&first, &o->first_bucket_mb, sizeof first);
  h = mix(h, cap);
  h = mix(h, first);
  h = mix(h, (uint64_t)o->grad_as_bucket_view);
  h = mix(h, (uint64_t)o->find_unused);
  h = mix(h, (uint64_t)o->static_graph);
  h = mix(h, (uint64_t)o->hook);
  h = mix(h, (uint64_t)o->broadcast_params);
  h = mix(h, (uint64_t)o->predivided);
  h = mix(h, (uint64_t)o->shard);
  for (const char *s = ddp_algo_name(o->algo); *s; s++) h = mix(h, (uint64_t)(unsigned char)*s);
  return h >> 2; /* non-negative as int64, and its negation fits */
}

static void describe(char *buf, size_t bytes, int64_t count, int64_t dtype, int64_t mem) {
  snprintf(buf, bytes, "count %lld %s %s", (long long)count, ddp_dtype_name((ddp_dtype_t)dtype),
           ddp_mem_name((ddp_mem_t)mem));
}

/* Every rank agrees on the parameter list; else DDP_EMISMATCH with the same message on every
 * rank naming the first differing parameter. All ranks take the same collectives. */
static ddp_status_t check_fingerprints(ddp_comm_t *comm, ddp__comm_t *c, const ddp_param_t *params,
                                       size_t np) {
  int64_t np0 = (int64_t)np;
  DDP_TRY(ddp_broadcast(comm, &np0, 1, DDP_I64, 0, NULL));
  size_t n0 = (size_t)np0;
  int64_t *d0 = malloc((n0 ? n0 : 1) * 3 * sizeof *d0);
  int64_t bad[2] = {0, 0};
  ddp_status_t st = d0 ? DDP_OK : ddp__error(DDP_ENOMEM, "reducer: out of memory (fingerprints)");
  /* Even without memory every rank must take part: agree on that first. */
  int64_t fail = st != DDP_OK;
  ddp_status_t ast = ddp_allreduce(comm, DDP_IN_PLACE, &fail, 1, DDP_I64, DDP_MAX, NULL);
  if (ast != DDP_OK || fail) {
    free(d0);
    return st != DDP_OK ? st : ast != DDP_OK ? ast
                                  : ddp__error(DDP_ENOMEM, "reducer: out of memory on another rank (fingerprints)");
  }
  if (c->rank == 0)
    for (size_t i = 0; i < n0; i++) {
      d0[3 * i] = (int64_t)params[i].count;
      d0[3 * i + 1] = params[i].dtype;
      d0[3 * i + 2] = params[i].mem;
    }
  st = ddp_broadcast(comm, d0, n0 * 3, DDP_I64, 0, NULL);
  if (st != DDP_OK) {
    free(d0);
    return st;
  }
  size_t k = (n0 < np) ? n0 : np;
  for (size_t i = 0; i < k; i++)
    if (d0[3 * i] != (int64_t)params[i].count || d0[3 * i + 1] != params[i].dtype ||
        d0[3 * i + 2] != params[i].mem) {
      k = i;
      break;
    }
  int64_t first = (k == np && k == n0) ? INT64_MAX : (int64_t)k;
  /* (first differing index, lowest rank with it) as one MIN of index * size + rank. */
  bad[0] = first == INT64_MAX ? INT64_MAX : first * c->size + c->rank;
  st = ddp_allreduce(comm, DDP_IN_PLACE, bad, 1, DDP_I64, DDP_MIN, NULL);
  if (st != DDP_OK || bad[0] == INT64_MAX) {
    free(d0);
    return st;
  }
  size_t idx = (size_t)(bad[0] / c->size);
  int who = (int)(bad[0] % c->size);
  /* The differing rank's entry and both names, so every rank prints the same message. */
  int64_t theirs[4] = {0, 0, 0, 0};
  char name0[64] = "", name1[64] = "";
  if (c->rank == who) {
    theirs[0] = idx < np;
    theirs[1] = idx < np ? (int64_t)params[idx].count : 0;
    theirs[2] = idx < np ? params[idx].dtype : 0;
    theirs[3] = idx < np ? params[idx].mem : 0;
    if (idx < np && params[idx].name) snprintf(name1, sizeof name1, "%s", params[idx].name);
    if (idx >= np) theirs[1] = (int64_t)np;
  }
  if (c->rank == 0 && idx < np && params[idx].name) snprintf(name0, sizeof name0, "%s", params[idx].name);
  st = ddp_broadcast(comm, theirs, 4, DDP_I64, who, NULL);
  if (st == DDP_OK) st = ddp_broadcast(comm, name1, sizeof name1, DDP_U8, who, NULL);
  if (st == DDP_OK) st = ddp_broadcast(comm, name0, sizeof name0, DDP_U8, 0, NULL);
  if (st != DDP_OK) {
    free(d0);
    return st;
  }
  name0[63] = name1[63] = '\0';
  char a[96], b[96];
  if (idx >= n0) {
    describe(b, sizeof b, theirs[1], theirs[2], theirs[3]);
    st = ddp__error(DDP_EMISMATCH,
                    "reducer: ranks registered different parameters: parameter %zu ('%s'): rank 0 "
                    "registered only %zu parameter(s), rank %d has it with %s",
                    idx, name1[0] ? name1 : "unnamed", n0, who, b);
  } else if (!theirs[0]) {
    describe(a, sizeof a, d0[3 * idx], d0[3 * idx + 1], d0[3 * idx + 2]);
    st = ddp__error(DDP_EMISMATCH,
                    "reducer: ranks registered different parameters: parameter %zu ('%s'): rank 0 "
                    "has it with %s, rank %d registered only %lld parameter(s)",
                    idx, name0[0] ? name0 : "unnamed", a, who, (long long)theirs[1]);
  } else {
    describe(a, sizeof a, d0[3 * idx], d0[3 * idx + 1], d0[3 * idx + 2]);
    describe(b, sizeof b, theirs[1], theirs[2], theirs[3]);
    st = ddp__error(DDP_EMISMATCH,
                    "reducer: ranks registered different parameters: parameter %zu ('%s'): rank 0 "
                    "has %s, rank %d has %s%s%s%s",
                    idx, name0[0] ? name0 : "unnamed", a, who, b, name1[0] ? " ('" : "",
                    name1, name1[0] ? "')" : "");
  }
  free(d0);
  DDP_LOG(c, DDP_LOG_WARN, "%s", ddp_last_error());
  return st;
}

static void reducer_free(ddp_reducer_t *r) {
  if (!r) return;
  if (r->p)
    for (size_t i = 0; i < r->np; i++) free(r->p[i].name);
  free(r->p);
  free(r->order);
  free(r->used);
  free(r);
}

ddp_status_t ddp_reducer_create(ddp_comm_t *comm, const ddp_param_t *params, size_t nparams,
                                const ddp_reducer_opts_t *opts, ddp_reducer_t **out) {
  ddp__comm_t *c = NULL;
  DDP_TRY(ddp__comm_get(comm, "comm", &c));
  ddp_reducer_opts_t o;
  ddp_reducer_opts_default(&o);
  if (opts) o = *opts;
  ddp_status_t st = check_local(comm, params, nparams, &o, out);
  /* Agreement round: a bad argument on any rank, a different parameter count or different
   * options end creation on every rank before any rank waits in a collective alone. */
  char mymsg[512];
  snprintf(mymsg, sizeof mymsg, "%s", st != DDP_OK ? ddp_last_error() : "");
  uint64_t oh = st == DDP_OK ? opts_hash(&o) : 0;
  int64_t v[5] = {st != DDP_OK ? c->rank + 1 : 0, (int64_t)nparams, -(int64_t)nparams,
                  (int64_t)oh, -(int64_t)oh};
  ddp_status_t ast = ddp_allreduce(comm, DDP_IN_PLACE, v, 5, DDP_I64, DDP_MAX, NULL);
  if (ast != DDP_OK) return ast;
  if (st != DDP_OK) return ddp__error(st, "%s", mymsg);
  if (v[0])
    return ddp__error(DDP_EINVAL, "reducer: ddp_reducer_create got a bad argument on rank %lld "
                      "(see its message); no reducer was created", (long long)(v[0] - 1));
  if (v[3] != -v[4])
    return ddp__error(DDP_EMISMATCH, "reducer: ranks passed different options (bucket_cap_mb, "
                      "first_bucket_mb, grad_as_bucket_view, find_unused, static_graph, hook, "
                      "broadcast_params, predivided, shard or algo); this rank: bucket_cap_mb %g, first_bucket_mb %g, "
                      "views %d, find_unused %d, static_graph %d, hook %d, broadcast %d, predivided %d, shard %d, algo %s",
                      o.bucket_cap_mb, o.first_bucket_mb, o.grad_as_bucket_view, o.find_unused,
                      o.static_graph, (int)o.hook, o.broadcast_params, o.predivided, o.shard,
                      ddp_algo_name(o.algo));
  /* Parameter fingerprints (also catches a different count, naming the first extra one). */
  DDP_TRY(check_fingerprints(comm, c, params, nparams));

  ddp_reducer_t *r = calloc(1, sizeof *r);
  st = r ? DDP_OK : ddp__error(DDP_ENOMEM, "reducer: out of memory");
  if (st == DDP_OK) {
    r->comm = comm;
    r->c = c;
    r->np = nparams;
    r->p = calloc(nparams, sizeof *r->p);
    r->order = malloc(nparams * sizeof *r->order);
    r->used = calloc(nparams, 1);
    r->algo = o.algo;
    if (!r->p || !r->order || !r->used)
      st = ddp__error(DDP_ENOMEM, "reducer: out of memory for %zu parameters", nparams);
  }
  for (size_t i = 0; st == DDP_OK && i < nparams; i++) {
    ddp__rparam_t *p = &r->p[i];
    p->data = params[i].data;
    p->count = params[i].count;
    p->dtype = params[i].dtype;
    p->mem = params[i].mem;
    p->grad = params[i].grad;
    if (p->mem == DDP_MEM_CUDA) r->has_device = 1;
    if (params[i].name && !(p->name = strdup(params[i].name)))
      st = ddp__error(DDP_ENOMEM, "reducer: out of memory for parameter names");
  }
  if (st == DDP_OK) {
    r->first_bytes = (size_t)(o.first_bucket_mb * 1048576.0);
    r->cap_bytes = (size_t)(o.bucket_cap_mb * 1048576.0);
    if (r->first_bytes == 0) r->first_bytes = 1;
    if (r->cap_bytes == 0) r->cap_bytes = 1;
    r->views = o.grad_as_bucket_view;
    r->find_unused = o.find_unused;
    r->static_graph = o.static_graph;
    r->hook = o.hook;
    r->predivided = o.predivided;
    r->shard = o.shard;
    r->stream = o.stream;
    r->sync = 1;
    r->recording = 1;
    for (size_t i = 0; i < nparams; i++) r->used[i] = 1;
    /* Initial buckets: reverse registration order (gradients arrive from the last layer). */
    for (size_t k = 0; k < nparams; k++) r->order[k] = nparams - 1 - k;
    ddp__rlayout_t l;
    st = ddp__reducer_assign(r->p, nparams, r->order, r->first_bytes, r->cap_bytes, &l);
    if (st == DDP_OK) {
      st = ddp__reducer_install_layout(r, &l);
      ddp__reducer_layout_free(&l);
    }
  }
  /* A forced algorithm that cannot run these buckets fails here, not at the first finish. */
  for (size_t j = 0; st == DDP_OK && r->algo != DDP_ALGO_AUTO && j < r->lay.nb; j++) {
    ddp_coll_opts_t co;
    ddp_coll_opts_default(&co);
    co.algo = r->algo;
    co.mem = r->b[j].mem;
    const char *name = NULL;
    if (ddp_allreduce_choice(comm, ddp__rbucket_wire_buf(&r->b[j]), r->b[j].count,
                             ddp__rbucket_wire_dtype(r, &r->b[j]), &co, &name) != DDP_OK)
      st = ddp__error(DDP_EINVAL, "reducer: opts.algo '%s' cannot reduce bucket %zu: %s", ddp_algo_name(r->algo), j,
                      ddp_last_error());
  }
  /* Memory trouble on one rank must not strand the others in the broadcasts below. */
  int64_t fail = st != DDP_OK;
  ast = ddp_allreduce(comm, DDP_IN_PLACE, &fail, 1, DDP_I64, DDP_MAX, NULL);
  if (st == DDP_OK && ast != DDP_OK) st = ast;
  else if (st == DDP_OK && fail)
    st = ddp__error(DDP_ENOMEM, "reducer: creation failed on another rank (see its message)");
  if (st == DDP_OK && o.broadcast_params && c->size > 1) {
    ddp_coll_opts_t co;
    ddp_coll_opts_default(&co);
    co.stream = o.stream;
    for (size_t i = 0; st == DDP_OK && i < nparams; i++) {
      co.mem = r->p[i].mem;
      st = ddp_broadcast(comm, r->p[i].data, r->p[i].count, r->p[i].dtype, 0, &co);
    }
  }
  if (st != DDP_OK) {
    if (r) ddp__reducer_free_buckets(r);
    reducer_free(r);
    return st;
  }
  ddp__comm_retain(c);
  ddp__reducer_log_layout(r, "created");
  *out = r;
  return DDP_OK;
}

ddp_status_t ddp_reducer_destroy(ddp_reducer_t **rp) {
  if (rp == NULL || *rp == NULL) return DDP_OK;
  ddp_reducer_t *r = *rp;
  *rp = NULL;
  /* Buckets still in flight (an iteration without finish) must land before their memory goes. */
  ddp_status_t st = DDP_OK;
  for (size_t j = 0; j < r->lay.nb; j++) {
    if (r->b[j].req) {
      ddp_status_t wst = ddp_wait(&r->b[j].req);
      if (st == DDP_OK) st = wst;
    }
    if (r->b[j].agreq) { /* a parameter allgather nobody waited for */
      ddp_status_t wst = ddp_wait(&r->b[j].agreq);
      if (st == DDP_OK) st = wst;
    }
  }
  if (r->iterations && r->c->rank == 0 && r->c->log.level >= DDP_LOG_INFO) {
    ddp_reducer_stats_t s;
    ddp_reducer_stats(r, &s);
    DDP_LOG(r->c, DDP_LOG_INFO,
            "reducer: %llu iterations, %zu buckets (%.2f..%.2f MB), %.2f MB on the wire per "
            "iteration, communication %.3f ms/iteration of which %.3f ms exposed (%.0f%% hidden)",
            (unsigned long long)s.iterations, s.nbuckets, (double)s.bucket_bytes_min / 1048576.0,
            (double)s.bucket_bytes_max / 1048576.0, (double)s.wire_bytes / 1048576.0,
            s.comm_ms_avg, s.exposed_ms_avg, s.hidden_fraction * 100.0);
  }
  ddp__comm_t *c = r->c;
  ddp__reducer_free_buckets(r);
  reducer_free(r);
  ddp__comm_release(c);
  return st;
}
