/* The communicator layer: MPI start-up, world/node/cross-node communicators, GPU binding,
 * capability probe, configuration from DDP_* variables, logging and the timeline trace. */
#ifndef DDP_COMM_H
#define DDP_COMM_H

#include <mpi.h>

#include "ddp_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A communicator is an opaque handle, like every handle of the library: created by
 * `ddp_init(..., &comm)` or `ddp_comm_create(..., &comm)` into a `ddp_comm_t *comm`, destroyed by
 * `ddp_finalize(&comm)` / `ddp_comm_destroy(&comm)`, which set the caller's pointer to NULL (a
 * later call with it is DDP_EINVAL "comm is NULL", never a use of freed memory). */
typedef struct ddp_comm ddp_comm_t;

/* Initialises MPI if needed (MPI_Init_thread asking for MPI_THREAD_MULTIPLE) and creates a
 * communicator over a duplicate of `base` (MPI_COMM_NULL means MPI_COMM_WORLD). When MPI was
 * already initialised by the caller, it is adopted and never finalised by the library.
 * argc/argv may be NULL. Collective over `base`.
 * Declared here with the communicator it makes, but defined in collectives/coll_comm.c (as is
 * ddp_comm_create): a communicator carries the state of every layer up to the collectives,
 * and only the highest of them can hand the core the hooks of the layers above it
 * (ddp__comm_layer_t) without an upward call. */
DDP_API ddp_status_t ddp_init(int *argc, char ***argv, MPI_Comm base, ddp_comm_t **out);
/* Destroys the communicator, finalises MPI if ddp_init initialised it, and sets *comm = NULL
 * (comm == NULL or *comm == NULL: nothing to do, DDP_OK). DDP_EBUSY while a reducer, loader
 * or request still uses it (nothing is destroyed, *comm is kept). Collective. */
DDP_API ddp_status_t ddp_finalize(ddp_comm_t **comm);

/* Creates a communicator over a duplicate of `base`; MPI must be initialised. Collective.
 * Defined in collectives/coll_comm.c, like ddp_init (see there). */
DDP_API ddp_status_t ddp_comm_create(MPI_Comm base, ddp_comm_t **out);
/* Destroys it and sets *comm = NULL (NULL or *comm == NULL: DDP_OK). DDP_EBUSY while another
 * handle uses it (nothing is destroyed then, *comm is kept). Collective. */
DDP_API ddp_status_t ddp_comm_destroy(ddp_comm_t **comm);

typedef struct ddp_comm_info {
  int rank, size;             /* in the world communicator */
  int local_rank, local_size; /* in this rank's (possibly virtual) node */
  int node, nodes;            /* this rank's node index, node count */
  int virtual_nodes;          /* 1 when DDP_RANKS_PER_NODE grouped ranks */
  int thread_level;           /* MPI_THREAD_* obtained */
  int mpi_owned;              /* 1 when the library initialised MPI */
  int gpu_count;              /* CUDA devices visible (0 without CUDA or driver) */
  int device;                 /* bound CUDA device, -1 in host mode */
  int cuda_aware;             /* CUDA-aware MPI usable */
  int nccl;                   /* NCCL built in */
  int shm;                    /* node-shared memory windows work */
  char host[64];
  char cuda_aware_reason[128];
} ddp_comm_info_t;

DDP_API ddp_status_t ddp_comm_info(const ddp_comm_t *comm, ddp_comm_info_t *info);
DDP_API ddp_status_t ddp_comm_rank(const ddp_comm_t *comm, int *rank);
DDP_API ddp_status_t ddp_comm_size(const ddp_comm_t *comm, int *size);

/* The MPI communicators the library uses (duplicates owned by it; do not free). */
typedef enum ddp_comm_kind { DDP_COMM_WORLD = 0, DDP_COMM_NODE, DDP_COMM_CROSS } ddp_comm_kind_t;
DDP_API ddp_status_t ddp_comm_mpi(const ddp_comm_t *comm, ddp_comm_kind_t kind, MPI_Comm *out);

/* MPI library version string (MPI_Get_library_version). */
DDP_API ddp_status_t ddp_mpi_library_version(char *buf, size_t bytes);

/* Ends the whole job (MPI_Abort on the world communicator) after printing `reason` once.
 * Returns only if MPI_Abort itself fails. */
DDP_API ddp_status_t ddp_abort(ddp_comm_t *comm, const char *reason);

/* ---- logging ---------------------------------------------------------------------------- */
typedef enum ddp_log_level {
  DDP_LOG_NONE = 0,
  DDP_LOG_WARN,
  DDP_LOG_INFO,
  DDP_LOG_TRACE
} ddp_log_level_t;

/* Logs through the communicator's logger (prefix host:pid:rank LEVEL). */
DDP_API ddp_status_t ddp_log(const ddp_comm_t *comm, ddp_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- timeline (Chrome trace JSON, DDP_TIMELINE=file.json) ------------------------------- */
/* Events go to the communicator's timeline when it is enabled; otherwise these are no-ops.
 * `args_json` is NULL or a JSON object text such as "{\"bytes\":4096}". */
DDP_API ddp_status_t ddp_timeline_begin(ddp_comm_t *comm, const char *name, const char *cat,
                                        const char *args_json);
DDP_API ddp_status_t ddp_timeline_end(ddp_comm_t *comm, const char *name, const char *cat,
                                      const char *args_json);
DDP_API ddp_status_t ddp_timeline_instant(ddp_comm_t *comm, const char *name, const char *cat,
                                          const char *args_json);
/* Writes what was recorded so far (also done at destroy). Collective when merging on rank 0. */
DDP_API ddp_status_t ddp_timeline_flush(ddp_comm_t *comm);

#ifdef __cplusplus
}
#endif
#endif /* DDP_COMM_H */
