/* Internal runtime interfaces shared by the library's layers (not installed).
 * Naming: ddp__ prefix for internal symbols, hidden visibility. */
#ifndef DDP_INTERNAL_H
#define DDP_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

#include "ddp_comm.h"

#define DDP_HIDDEN __attribute__((visibility("hidden")))

/* ---- errors --------------------------------------------------------------------------- */
/* Records `st` with a printf-style detail as this thread's last error and returns st. */
DDP_HIDDEN ddp_status_t ddp__error(ddp_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Turns an MPI return code into DDP_EMPI with "what: <MPI error string>". DDP_OK for
 * MPI_SUCCESS. */
DDP_HIDDEN ddp_status_t ddp__mpi_error(int rc, const char *what);

/* Argument checks inside public functions: record and return DDP_EINVAL. */
#define DDP_CHECK_ARG(cond, ...)                      \
  do {                                                \
    if (!(cond)) return ddp__error(DDP_EINVAL, __VA_ARGS__); \
  } while (0)
/* Propagate a status up. */
#define DDP_TRY(expr)                       \
  do {                                      \
    ddp_status_t ddp__st_ = (expr);         \
    if (ddp__st_ != DDP_OK) return ddp__st_; \
  } while (0)
/* MPI call that returns DDP_EMPI with MPI's message on failure. */
#define DDP_MPI(call)                                   \
  do {                                                  \
    int ddp__rc_ = (call);                              \
    if (ddp__rc_ != MPI_SUCCESS) return ddp__mpi_error(ddp__rc_, #call); \
  } while (0)

/* ---- configuration (every DDP_* variable, read and validated in one place) ------------- */
typedef struct ddp__config {
  ddp_log_level_t debug;       /* DDP_DEBUG=NONE|WARN|INFO|TRACE (default WARN) */
  char debug_file[256];        /* DDP_DEBUG_FILE, "" = stderr; %r rank, %h host, %p pid */
  char timeline[256];          /* DDP_TIMELINE, "" = off; %r in the name = one file per rank */
  int ranks_per_node;          /* DDP_RANKS_PER_NODE, 0 = real nodes */
  int device;                  /* DDP_DEVICE, -1 = local_rank % ndev, -2 = "none" (host) */
  int cuda_aware;              /* DDP_CUDA_AWARE, -1 = probe, 0, 1 */
  ddp_algo_t allreduce_algo;   /* DDP_ALLREDUCE_ALGO, auto default */
  int device_emulate;          /* DDP_DEVICE_EMULATE 0|1 */
  int require_gpu;             /* DDP_REQUIRE_GPU 0|1: no CUDA device is an error, not host mode */
  size_t staging_chunk;        /* DDP_STAGING_CHUNK bytes (K/M/G), default 4 MiB */
  int staging_depth;           /* DDP_STAGING_DEPTH 2..4, default 3 */
  ddp_transport_t transport;   /* DDP_TRANSPORT=auto|mpi|staged|nccl */
  double timeout_s;            /* DDP_TIMEOUT_S > 0, default 600 */
  int on_timeout_return;       /* DDP_ON_TIMEOUT=abort|return */
  int check;                   /* DDP_CHECK 0|1 */
  int world_size;              /* DDP_WORLD_SIZE: the launcher's rank count, 0 = unchecked */
  int shm;                     /* DDP_SHM 0|1 (default 1): 0 = never node-shared memory */
  size_t hier_pipeline;        /* DDP_HIER_PIPELINE bytes per pipelined hier chunk, 0 = off */
} ddp__config_t;

/* Looks up a variable; returns NULL when unset. */
typedef const char *(*ddp__getenv_fn)(const char *name, void *ctx);

DDP_HIDDEN void ddp__config_defaults(ddp__config_t *cfg);
/* Reads every DDP_* variable through `get`; the first bad value is DDP_ECONFIG with a message
 * naming the variable, its value and what is allowed. */
DDP_HIDDEN ddp_status_t ddp__config_load(ddp__config_t *cfg, ddp__getenv_fn get, void *ctx);
/* Same, from text of "NAME=VALUE" lines (used by the fuzzer and tests). */
DDP_HIDDEN ddp_status_t ddp__config_parse_text(ddp__config_t *cfg, const char *text, size_t len);
/* Writes the effective configuration, one "NAME=value" per line, into buf. */
DDP_HIDDEN void ddp__config_format(const ddp__config_t *cfg, char *buf, size_t bytes);
/* Parses "4M", "512k", "1G", "4096" (powers of 1024) into bytes. */
DDP_HIDDEN ddp_status_t ddp__parse_size(const char *text, size_t *out);
/* Names of unknown DDP_* variables in environ, comma-separated, for a warning. */
DDP_HIDDEN void ddp__config_unknown(char *buf, size_t bytes);

/* ---- logging --------------------------------------------------------------------------- */
typedef struct ddp__logger {
  ddp_log_level_t level;
  FILE *fp;      /* stderr or the per-rank DDP_DEBUG_FILE */
  int owns_fp;
  char prefix[96]; /* "host:pid:rank" */
  pthread_mutex_t mu;
} ddp__logger_t;

DDP_HIDDEN ddp_status_t ddp__logger_open(ddp__logger_t *lg, const ddp__config_t *cfg, int rank,
                                         const char *host);
DDP_HIDDEN void ddp__logger_close(ddp__logger_t *lg);
DDP_HIDDEN void ddp__logv(ddp__logger_t *lg, ddp_log_level_t level, const char *fmt, va_list ap);
DDP_HIDDEN void ddp__log(ddp__logger_t *lg, ddp_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- timeline -------------------------------------------------------------------------- */
typedef struct ddp__timeline ddp__timeline_t;
/* NULL *out when DDP_TIMELINE is unset. */
DDP_HIDDEN ddp_status_t ddp__timeline_open(ddp__timeline_t **out, const ddp__config_t *cfg,
                                           int rank);
/* phase: 'B', 'E', 'i' (instant) or 'X' (complete, with dur_us). Thread-safe; t = now. */
DDP_HIDDEN void ddp__timeline_event(ddp__timeline_t *tl, char phase, const char *name,
                                    const char *cat, const char *args_json);
/* Writes events: merged on rank 0 (collective over world) or this rank's own file. */
DDP_HIDDEN ddp_status_t ddp__timeline_write(ddp__timeline_t *tl, MPI_Comm world, int collective);
DDP_HIDDEN void ddp__timeline_close(ddp__timeline_t *tl);

/* ---- simulation (SimGrid SMPI) ----------------------------------------------------------
 * Built with smpicc, the library runs on a simulated platform (scale/, docs/scale.md): every
 * rank is a simulated process of one real process, time is simulated, and each MPI call costs
 * simulated time. Then waits block in MPI_Waitall instead of polling (each failed MPI_Test
 * would advance the simulated clock), and node-shared memory is off (SMPI's
 * MPI_Win_shared_query answers local rank 0's segment to everyone, and getpid() is the
 * simulated rank, so cross-memory attach would address real processes). */
#if defined(SMPI_HELPERS_H)
#define DDP_SIMULATED 1
#else
#define DDP_SIMULATED 0
#endif

/* ---- the communicator ------------------------------------------------------------------ */
#define DDP__COMM_MAGIC 0x6464705f636f6d6dULL /* "ddp_comm" */

/* Extension state of the layers that keep some on the communicator; each allocates its own in
 * its init hook and frees it in its fini hook. The core never looks inside the upper layers'. */
struct ddp__coll;    /* collectives/: progress engine, shared pool, algorithm state */
struct ddp__device;  /* runtime/device/: device layer, streams, staging buffers, NCCL */
struct ddp__guard;   /* runtime/core/guard.c: watchdog and collective fingerprints */

/* The public opaque ddp_comm_t is this structure. */
typedef struct ddp_comm ddp__comm_t;
/* The hooks of a layer above the core that keeps state on the communicator. Comm create runs,
 * after the MPI communicators, logger and timeline exist: every `probe` (may be NULL), each
 * agreed across the world on its own under the name `probe_phase`; then every `init` in table
 * order and the guard's last, agreed as one step; destroy runs the guard's fini, then every
 * `fini` in reverse order. The table is a constant of the layer that passes it (the public
 * constructors, collectives/coll_comm.c), so the core never names a layer above it. */
typedef struct ddp__comm_layer {
  ddp_status_t (*probe)(ddp__comm_t *c);
  const char *probe_phase;
  ddp_status_t (*init)(ddp__comm_t *c);
  void (*fini)(ddp__comm_t *c);
} ddp__comm_layer_t;

struct ddp_comm {
  uint64_t magic;  /* DDP__COMM_MAGIC while alive: catches pointers that are not communicators */
  MPI_Comm world; /* dup of the caller's base communicator */
  MPI_Comm node;  /* ranks of this (possibly virtual) node */
  MPI_Comm cross; /* ranks with the same local rank, one per node */
  int rank, size, local_rank, local_size, node_id, nodes;
  int virtual_nodes;
  int thread_level;
  int mpi_owned;      /* ddp_init initialised MPI: ddp_finalize finalises it */
  int mpi_serialized; /* thread level < MULTIPLE: all MPI on one thread */
  int gpu_count, device, cuda_aware, shm_ok;
  int host_rank;      /* rank among the ranks of this real host (virtual nodes or not) */
  int gpu_shared;     /* ranks of the world whose GPU another rank of their host also uses */
  char gpu_busid[32]; /* PCI bus id of the bound GPU ("" without one) */
  char gpu_shared_reason[224]; /* why a shared GPU rules NCCL out, the same text on every rank */
  char cuda_aware_reason[128];
  char host[64];
  ddp__config_t cfg;
  ddp__logger_t log;
  ddp__timeline_t *timeline;
  atomic_int users;   /* reducers, loaders, live requests: destroy is DDP_EBUSY while > 0 */
  struct ddp__coll *coll;
  struct ddp__device *dev;
  struct ddp__guard *guard;
  const ddp__comm_layer_t *layers; /* the hooks this communicator was created with */
  int nlayers;
};

/* Checks the handle and returns it as the implementation type; DDP_EINVAL for NULL or a
 * pointer that is not a live communicator. `argname` names the argument in the message. */
DDP_HIDDEN ddp_status_t ddp__comm_get(const ddp_comm_t *comm, const char *argname,
                                      ddp__comm_t **impl);
/* Other handles register while they use the communicator. */
DDP_HIDDEN void ddp__comm_retain(ddp__comm_t *c);
DDP_HIDDEN void ddp__comm_release(ddp__comm_t *c);

/* ddp_comm_create and ddp_init with the hooks of the layers above (ddp__comm_layer_t). */
DDP_HIDDEN ddp_status_t ddp__comm_create(MPI_Comm base, ddp_comm_t **out,
                                         const ddp__comm_layer_t *layers, int nlayers);
DDP_HIDDEN ddp_status_t ddp__init(int *argc, char ***argv, MPI_Comm base, ddp_comm_t **out,
                                  const ddp__comm_layer_t *layers, int nlayers);
/* The guard's own pair (core), run after the upper layers' inits and before their finis. */
DDP_HIDDEN ddp_status_t ddp__guard_comm_init(ddp__comm_t *c);
DDP_HIDDEN void ddp__guard_comm_fini(ddp__comm_t *c);

/* ---- guard: watchdog deadlines and collective fingerprints (runtime/core/guard.c) ------- */
/* What a wait is for, so a timeout can name it: sequence number, collective, algorithm,
 * bytes, caller's tag (bucket index) and the peer of each request (-1 unknown). */
typedef struct ddp__wait_desc {
  uint64_t seq;
  const char *coll; /* "allreduce", ... */
  const char *algo; /* "ring", ... */
  size_t bytes;
  int tag;          /* bucket index or -1 */
  const int *peers; /* n entries (world ranks) or NULL */
} ddp__wait_desc_t;

/* Every blocking wait on MPI requests inside the library goes through here: waits for all n
 * requests with the DDP_TIMEOUT_S deadline. On expiry it reports what it waited for and which
 * peers had not answered, flushes the timeline, and either ends the job (MPI_Abort) or, with
 * DDP_ON_TIMEOUT=return, returns DDP_ETIMEDOUT. */
DDP_HIDDEN ddp_status_t ddp__wait_all(ddp__comm_t *c, int n, MPI_Request *reqs,
                                      const ddp__wait_desc_t *desc);
/* For spin-waits that are not MPI requests (shared-memory flags): call with the time the wait
 * began; returns DDP_OK while within the deadline, else reports/aborts like ddp__wait_all. */
DDP_HIDDEN ddp_status_t ddp__deadline_check(ddp__comm_t *c, double t_start,
                                            const ddp__wait_desc_t *desc);

/* Collective fingerprint compared across ranks before each collective when DDP_CHECK=1. */
typedef struct ddp__coll_fp {
  uint64_t seq;   /* per-communicator collective sequence number */
  int coll;       /* collective id (0 allreduce, 1 broadcast, 2 allgather, 3 reduce_scatter, 4 barrier) */
  int dtype, op;  /* -1 where not applicable */
  uint64_t count;
  int root;       /* -1 where not applicable */
} ddp__coll_fp_t;
/* DDP_OK when DDP_CHECK is off or every rank has the same fingerprint; DDP_EMISMATCH naming
 * the ranks and the differing fields otherwise (reported on every rank). Collective. */
DDP_HIDDEN ddp_status_t ddp__guard_check(ddp__comm_t *c, const ddp__coll_fp_t *fp);

/* Monotonic clock in seconds. */
DDP_HIDDEN double ddp__now(void);

#define DDP_LOG(c, lvl, ...)                                      \
  do {                                                            \
    if ((c)->log.level >= (lvl)) ddp__log(&(c)->log, (lvl), __VA_ARGS__); \
  } while (0)

#endif /* DDP_INTERNAL_H */
