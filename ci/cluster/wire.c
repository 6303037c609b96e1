/* A cable with a length for the emulated cluster: forwards Ethernet frames between two
 * interfaces of a network namespace that has nothing else (ci/cluster/cluster.sh shape),
 * delaying every frame by a fixed time and dropping a share of them at random, in both
 * directions. Stands in for tc netem where the kernel has none (CONFIG_NET_SCH_NETEM off).
 * Frames keep their offload header (PACKET_VNET_HDR), so TCP segmentation and checksum offload
 * pass through untouched; a frame may then carry up to 64 KB of one TCP stream, and dropping
 * it loses all of that.
 *
 *     wire IF_A IF_B DELAY_MS LOSS_PERCENT SEED      (DELAY_MS may be fractional: 0.025)
 *
 * Runs until SIGTERM, then prints per direction: frames forwarded, frames dropped.
 * Written in C (it replaced a Python wire) because a link of 50 us must be timed to a few
 * microseconds and carry 10 Gbit/s on a machine whose cores are busy with the ranks: it asks
 * for SCHED_FIFO and a 1 ns timer slack, sleeps in ppoll until the next frame is due, and
 * costs two system calls per frame. Built by cluster.sh on first use (cc -O2). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef PACKET_VNET_HDR
#define PACKET_VNET_HDR 15
#endif
#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif

enum { MAX_FRAME = 70000, BATCH = 64 };

typedef struct frame {
  struct frame *next;
  int64_t due_ns;
  size_t len;
  unsigned char data[];
} frame_t;

typedef struct { /* frames waiting to leave one port, in time order (constant delay) */
  frame_t *head, *tail;
} queue_t;

static volatile sig_atomic_t stop_flag;
static void on_term(int sig) { (void)sig; stop_flag = 1; }

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t rng_state;
static double rng_uniform(void) { /* xorshift64*: reproducible by SEED */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (double)((rng_state * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

static int open_port(const char *ifname) {
  int s = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK, htons(ETH_P_ALL));
  if (s < 0) { perror("wire: socket"); exit(1); }
  int one = 1, buf = 32 << 20;
  if (setsockopt(s, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one) ||
      setsockopt(s, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one)) { /* not our sends back */
    perror("wire: setsockopt");
    exit(1);
  }
  /* root: past rmem_max/wmem_max, so a burst at 10 Gbit/s waits in the socket, not dropped */
  if (setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf))
    setsockopt(s, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  if (setsockopt(s, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf))
    setsockopt(s, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  struct sockaddr_ll a = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL),
                          .sll_ifindex = (int)if_nametoindex(ifname)};
  if (a.sll_ifindex == 0 || bind(s, (struct sockaddr *)&a, sizeof a)) {
    fprintf(stderr, "wire: cannot bind to %s: %s\n", ifname, strerror(errno));
    exit(1);
  }
  return s;
}

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: wire IF_A IF_B DELAY_MS LOSS_PERCENT SEED\n");
    return 2;
  }
  const char *names[2] = {argv[1], argv[2]};
  double delay_ms = strtod(argv[3], NULL), loss = strtod(argv[4], NULL) / 100.0;
  if (!(delay_ms >= 0) || !(loss >= 0 && loss <= 1)) {
    fprintf(stderr, "wire: DELAY_MS '%s' or LOSS_PERCENT '%s' out of range\n", argv[3], argv[4]);
    return 2;
  }
  int64_t delay = (int64_t)(delay_ms * 1e6);
  rng_state = 0x9E3779B97F4A7C15ULL ^ (uint64_t)strtoull(argv[5], NULL, 10);
  if (rng_state == 0) rng_state = 1;

  struct sched_param sp = {.sched_priority = 10};
  if (sched_setscheduler(0, SCHED_FIFO, &sp)) /* not fatal: the delays are then less exact */
    fprintf(stderr, "wire: SCHED_FIFO refused (%s); running at normal priority\n", strerror(errno));
  prctl(PR_SET_TIMERSLACK, 1UL);
  signal(SIGTERM, on_term);
  signal(SIGINT, on_term);

  int port[2] = {open_port(names[0]), open_port(names[1])};
  queue_t q[2] = {{0}}; /* q[i]: frames to send out of port i */
  unsigned long fwd[2] = {0, 0}, drop[2] = {0, 0};
  static unsigned char scratch[MAX_FRAME];

  while (!stop_flag) {
    int blocked[2] = {0, 0};
    int64_t now = now_ns();
    for (int i = 0; i < 2; i++) { /* send what is due */
      while (q[i].head && q[i].head->due_ns <= now) {
        frame_t *f = q[i].head;
        if (send(port[i], f->data, f->len, 0) < 0) {
          if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) { blocked[i] = 1; break; }
          /* link down on the far side: the frame is lost, as on a cable */
        }
        q[i].head = f->next;
        if (!q[i].head) q[i].tail = NULL;
        free(f);
      }
    }
    struct pollfd pfd[2];
    int64_t next = -1;
    for (int i = 0; i < 2; i++) {
      pfd[i].fd = port[i];
      pfd[i].events = POLLIN | (blocked[i] ? POLLOUT : 0);
      if (q[i].head && !blocked[i] && (next < 0 || q[i].head->due_ns < next)) next = q[i].head->due_ns;
    }
    struct timespec ts, *tsp = NULL;
    int64_t wait = next < 0 ? 200000000 : next - now_ns();
    if (wait < 0) wait = 0;
    ts.tv_sec = wait / 1000000000;
    ts.tv_nsec = wait % 1000000000;
    tsp = &ts;
    int n = ppoll(pfd, 2, tsp, NULL);
    if (n < 0) {
      if (errno == EINTR) continue;
      perror("wire: ppoll");
      return 1;
    }
    for (int src = 0; src < 2; src++) {
      if (!(pfd[src].revents & POLLIN)) continue;
      for (int k = 0; k < BATCH; k++) {
        ssize_t len = recv(port[src], scratch, sizeof scratch, 0);
        if (len < 0) break; /* EAGAIN: drained */
        if (loss > 0 && rng_uniform() < loss) { drop[src]++; continue; }
        frame_t *f = malloc(sizeof *f + (size_t)len);
        if (!f) { drop[src]++; continue; }
        f->next = NULL;
        f->due_ns = now_ns() + delay;
        f->len = (size_t)len;
        memcpy(f->data, scratch, (size_t)len);
        queue_t *d = &q[1 - src];
        if (d->tail) d->tail->next = f; else d->head = f;
        d->tail = f;
        fwd[src]++;
      }
    }
  }
  for (int i = 0; i < 2; i++)
    fprintf(stderr, "wire: from %s: %lu frames forwarded, %lu dropped\n", names[i], fwd[i], drop[i]);
  return 0;
}
