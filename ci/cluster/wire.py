#!/usr/bin/env python3
"""A bad cable for the emulated cluster: forwards Ethernet frames between two interfaces of a
network namespace that has nothing else (ci/cluster/cluster.sh shape), delaying every frame by
a fixed time and dropping a share of them at random, in both directions. Stands in for tc
netem where the kernel has none (CONFIG_NET_SCH_NETEM off). Frames keep their offload header
(PACKET_VNET_HDR), so TCP segmentation and checksum offload pass through untouched; a frame may
then carry up to 64 KB of one TCP stream, and dropping it loses all of that.

    wire.py IF_A IF_B DELAY_MS LOSS_PERCENT SEED

Runs until SIGTERM, then prints per direction: frames forwarded, frames dropped."""
import collections
import os
import random
import select
import signal
import socket
import sys
import time

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_VNET_HDR = 15
PACKET_IGNORE_OUTGOING = 23


def open_port(ifname):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)
    s.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)  # not our own sends back
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
    s.bind((ifname, 0))
    s.setblocking(False)
    return s


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    ifa, ifb = sys.argv[1], sys.argv[2]
    delay = float(sys.argv[3]) / 1e3
    loss = float(sys.argv[4]) / 100.0
    rng = random.Random(int(sys.argv[5]))
    ports = [open_port(ifa), open_port(ifb)]
    queues = [collections.deque(), collections.deque()]  # frames waiting to leave port i
    fwd, drop = [0, 0], [0, 0]
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    poller = select.poll()
    for p in ports:
        poller.register(p, select.POLLIN)
    fd_port = {p.fileno(): i for i, p in enumerate(ports)}
    while not stop:
        now = time.monotonic()
        for i in (0, 1):  # send what is due (constant delay: each queue is in time order)
            q = queues[i]
            while q and q[0][0] <= now:
                try:
                    ports[i].send(q[0][1])
                except BlockingIOError:
                    break
                except OSError:
                    pass  # link down on the far side: the frame is lost, as on a cable
                q.popleft()
        due = [q[0][0] for q in queues if q]
        wait_ms = max(0, int((min(due) - time.monotonic()) * 1e3)) if due else 200
        try:
            events = poller.poll(wait_ms)
        except InterruptedError:
            continue
        for fd, _ in events:
            src = fd_port[fd]
            for _ in range(64):
                try:
                    frame = ports[src].recv(70000)
                except (BlockingIOError, InterruptedError):
                    break
                if rng.random() < loss:
                    drop[src] += 1
                    continue
                fwd[src] += 1
                queues[1 - src].append((time.monotonic() + delay, frame))
    for i, name in ((0, ifa), (1, ifb)):
        print("wire: from %s: %d frames forwarded, %d dropped" % (name, fwd[i], drop[i]), file=sys.stderr)


if __name__ == "__main__":
    main()
