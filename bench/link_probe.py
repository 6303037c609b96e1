"""What a shaped link of the emulated cluster really carries (bench/cluster_bench.sh): TCP
between hosts, measured the way an allreduce loads the links.

    link_probe.py sink ADDR PORT          accept one stream, read until it ends, print MB/s
    link_probe.py source ADDR PORT SEC    send to ADDR:PORT for SEC seconds
    link_probe.py echo ADDR PORT          accept one connection, echo 1-byte messages
    link_probe.py ping ADDR PORT N        N 1-byte round trips; print the median one-way time (us)

cluster_bench.sh starts one sink and one source per host (a ring h1 -> h2 -> ... -> h1, every
host sending and receiving at once, as in a ring or a halving step) and takes the slowest sink
as the link bandwidth B; `ping` between h1 and h2 gives the latency alpha (half the median
round trip, TCP_NODELAY)."""
import socket
import statistics
import sys
import time


def listen(addr, port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(1)
    c, _ = s.accept()
    s.close()
    return c


def connect(addr, port):
    for _ in range(200):  # the far end may not be listening yet
        try:
            return socket.create_connection((addr, port))
        except OSError:
            time.sleep(0.05)
    sys.exit("link_probe: cannot connect to %s:%d" % (addr, port))


def main():
    mode, addr, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if mode == "sink":
        c = listen(addr, port)
        got, t0, t1 = 0, None, None
        buf = bytearray(1 << 20)
        while True:
            n = c.recv_into(buf)
            if not n:
                break
            t1 = time.monotonic()
            if t0 is None:
                t0 = t1
            got += n
        print("%.1f" % (got / (t1 - t0) / 1e6 if t0 and t1 > t0 else 0.0))
    elif mode == "source":
        c = connect(addr, port)
        end = time.monotonic() + float(sys.argv[4])
        buf = b"\0" * (1 << 20)
        while time.monotonic() < end:
            c.sendall(buf)
        c.close()
    elif mode == "echo":
        c = listen(addr, port)
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            b = c.recv(1)
            if not b:
                break
            c.sendall(b)
    elif mode == "ping":
        c = connect(addr, port)
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        rtts = []
        for _ in range(int(sys.argv[4])):
            t0 = time.perf_counter()
            c.sendall(b"x")
            c.recv(1)
            rtts.append(time.perf_counter() - t0)
        c.close()
        print("%.1f" % (statistics.median(rtts) / 2 * 1e6))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
