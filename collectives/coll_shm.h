/* The node-shared segment transport (transports/coll_xport_shm.c): what the shm algorithms
 * (algorithms/allreduce_shm*.c, shm_pieces.c) run on. One segment per communicator over the
 * node group, made on first use with the host transport's seg_alloc, gives each local rank a
 * control block (flags, buffer descriptors, its pid for cross-memory attach) and a staging area
 * of two halves; flags are posted by their owner and waited for with a short spin, then a
 * shared futex, under the DDP_TIMEOUT_S watchdog. Buffers in a ddp_alloc pool window are named
 * to peers by (window id, offset) and mapped by every rank (transports/coll_pool.c). */
#ifndef DDP_COLL_SHM_H
#define DDP_COLL_SHM_H

#include <stdatomic.h>
#include <stdint.h>

#include "coll_internal.h"

#define DDP__SHM_CTRL_BYTES ((size_t)4096) /* a rank's control block */
#define DDP__SHM_HALF_BYTES ((size_t)8 << 20)  /* one staging half (two per rank) */
#define DDP__SHM_LOC_STAGE UINT64_MAX /* a location: in the owner's staging area */
#define DDP__SHM_TINY_BYTES 48 /* at or below: the data travels in the flag's own cache line */

typedef struct {
  uint64_t id, off; /* pool window id and offset, or DDP__SHM_LOC_STAGE */
} ddp__shm_loc_t;

typedef struct {
  _Atomic uint64_t tag; /* sequence number of the call whose data this holds */
  uint64_t pad;
  char data[DDP__SHM_TINY_BYTES];
} ddp__shm_tiny_t;

/* The flags a rank waits on (arrive, tiny[].tag) are written by their owner only. A waiter
 * that goes to sleep counts itself in the owner's `sleepers` first, so the owner makes the
 * wake-up system call only when somebody sleeps. Futexes are 32-bit: a waiter sleeps on the
 * low half of the 64-bit counter, which changes with every increment. */
typedef struct {
  _Atomic uint64_t arrive;
  _Atomic uint32_t sleepers; /* peers blocked in the kernel on one of this block's flags */
  char pad[52];
  ddp__shm_tiny_t tiny[2] __attribute__((aligned(64))); /* alternating calls */
  ddp__shm_loc_t desc[2][2]; /* [slot][0 = input, 1 = result] */
  int64_t pid;      /* for cross-memory attach (process_vm_readv) */
  uint64_t va_send, va_recv; /* this rank's buffers in its own address space */
} ddp__shm_ctrl_t;

struct ddp__shm {
  const ddp__xport_t *xp; /* owner of `seg` */
  ddp__xhandle_t seg;     /* the node-shared segment */
  int n, me;        /* local size, local rank */
  ddp__shm_ctrl_t **ctrl;    /* n entries */
  char **stage;     /* n entries: staging area (2 halves) */
  uint64_t epoch;
  uint64_t tiny_seq;
  unsigned flip;    /* which half the next staged use takes */
  double spin_s;    /* busy-wait this long before sleeping on the flag */
  double spin_idle_s; /* ... while a caller waits for the collective with nothing else to do */
  int cma_ok;       /* every rank may process_vm_readv every other (same answer everywhere) */
  const char **src; /* n entries, per-call scratch */
  char **res;
  const char **in;  /* reduce inputs in rank order */
};

/* The communicator's segment (x: any group of the node's ranks; the node group is used), made
 * on first use: collective over the node. */
DDP_HIDDEN ddp_status_t ddp__shm_get(ddp__ctx_t *x, ddp__shm_t **out);
/* A barrier of the node's ranks over the control blocks. */
DDP_HIDDEN ddp_status_t ddp__shm_barrier(ddp__ctx_t *x, ddp__shm_t *s);
/* *flag = v in this rank's block `mine`, waking peers asleep on it; waiting until the flag of
 * `owner`'s block reaches `target`. */
DDP_HIDDEN void ddp__shm_flag_post(ddp__shm_ctrl_t *mine, _Atomic uint64_t *flag, uint64_t v);
DDP_HIDDEN ddp_status_t ddp__shm_wait_flag(ddp__ctx_t *x, ddp__shm_ctrl_t *owner,
                                           _Atomic uint64_t *flag, uint64_t target);
/* Cross-memory attach (s->cma_ok): local rank q's memory at its address `remote`. */
DDP_HIDDEN ddp_status_t ddp__shm_cma_read(ddp__shm_t *s, int q, uint64_t remote, void *local,
                                          size_t bytes);
DDP_HIDDEN ddp_status_t ddp__shm_cma_write(ddp__shm_t *s, int q, uint64_t remote,
                                           const void *local, size_t bytes);
/* Where `p` lives (a pool window or staging), and rank q's published location in this
 * process's address space (*out NULL: q's staging area). */
DDP_HIDDEN ddp__shm_loc_t ddp__shm_locate(const ddp__ctx_t *x, const void *p, size_t bytes);
DDP_HIDDEN ddp_status_t ddp__shm_resolve(const ddp__ctx_t *x, int q, ddp__shm_loc_t l,
                                         char **out);

#endif /* DDP_COLL_SHM_H */
