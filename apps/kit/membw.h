/* The physical limit of an allreduce on one machine: its memory copy bandwidth (measured with
 * memcpy over buffers much larger than the last-level cache), and the memory traffic each
 * allreduce algorithm moves per rank (a model, docs/collectives.md "The memory bound"), so a
 * benchmark can print what fraction of the bound a measured time reaches. Definitions in
 * membw.c. */
#ifndef MEMBW_H
#define MEMBW_H

#include <stddef.h>

#include "ddp.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct membw {
  size_t bytes;      /* bytes copied per memcpy (source and destination each this large) */
  double single_gbs; /* memcpy GB/s (1e9 bytes copied per second), one rank alone */
  double all_gbs;    /* memcpy GB/s of each rank while every rank copies at once */
  int ranks;         /* ranks that copied at once (the communicator's size) */
  int local;         /* of them on this node */
} membw_t;

/* Collective over comm: rank 0 times memcpy of `bytes` alone (the others wait in a barrier,
 * which sleeps), then every rank at once after a barrier; best of `reps` rounds each (a whole
 * memcpy and one in 256 KB pieces per round), the slowest rank's time for the concurrent one. bytes 0: 128 MB (four times a 32 MB L3). Every rank gets
 * the same figures. DDP_ENOMEM (on every rank) when a buffer cannot be had. */
ddp_status_t membw_measure(ddp_comm_t *comm, size_t bytes, int reps, membw_t *out);

/* Bytes of memory traffic (read + written) per rank of one allreduce of `bytes` by algorithm
 * `algo` ("shm", "ring", "rhd", "hier", "mpi", or "raw" for the MPI library's own call) over
 * `np` ranks, `local` of them per node, in place or not; `pooled`: buffers from ddp_alloc
 * (only hier's node phases stage private buffers; shm reads them by cross-memory attach).
 * Data a segment keeps in cache is not counted. -1 for an unknown name. */
double membw_allreduce_traffic(const char *algo, size_t bytes, int np, int local, int inplace,
                               int pooled);

/* The fastest time (us) that `traffic` bytes of read + write traffic allow at the concurrent
 * copy bandwidth (a memcpy of m bytes is 2m of traffic). */
double membw_bound_us(const membw_t *m, double traffic);

/* 100 * bound / time_us for an allreduce over m's ranks (-1 when the model has no figure):
 * the share of the memory bound that a measured time reaches. */
double membw_percent(const membw_t *m, const char *algo, size_t bytes, int inplace, int pooled,
                     double time_us);

#ifdef __cplusplus
}
#endif
#endif /* MEMBW_H */
