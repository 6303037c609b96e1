"""PyTorch peer of allreduce_bench: torch.distributed (gloo, CPU) allreduce, in place, f32 sum.

Same sizes as `allreduce_bench -b B -e E -f F` (from E down by F, plus B), best of R timed
loops, JSON records in allreduce_bench's format (algo "gloo", inplace true) so one script can
put both side by side (bench/peers/compare.py).

    /usr/bin/python3 bench/peers/torch_allreduce.py --np 2 -b 8 -e 64M -f 4 -R 3 -J gloo.json

Written for Debian's python3-torch (1.13, CPU). One thread per process, processes spawned by
torch.multiprocessing, rendezvous on 127.0.0.1 (loopback only)."""
import argparse
import json
import sys
import time

import torch
import torch.distributed as dist

from peerlib import init_gloo, spawn


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip().upper().rstrip("B")
    if s and s[-1] in mult:
        return int(float(s[:-1]) * mult[s[-1]])
    return int(s)


def sizes(b, e, f):
    out, s = [], float(e)
    while s >= b * 0.9999999:
        out.append(int(s + 0.5))
        s /= f
    if not out or out[-1] != b:
        out.append(b)
    return sorted(set(out))



def value(i, rank):
    """Input of `rank` at indices i: distinct across ranks and without a short period."""
    return (i * 37 + rank * 101 + (i >> 10) * 13) % 1021


def worker(rank, world, port, args, q):
    torch.set_num_threads(1)
    init_gloo(rank, world, port)
    recs = []
    wrong = 0
    for nbytes in sizes(args.b, args.e, args.f):
        n = max(nbytes // 4, 1)
        x = torch.zeros(n)
        for _ in range(args.w):
            dist.all_reduce(x)
        # iterations: -n, fewer when one call takes a large part of the -t budget
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(x)
        one = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
        dist.all_reduce(one, op=dist.ReduceOp.MAX)
        iters = args.n
        if one.item() * iters > args.t:
            iters = int(args.t / max(one.item(), 1e-9)) + 1
        best = None
        for _ in range(args.R):
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(x)
            dt = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64)
            dist.all_reduce(dt, op=dist.ReduceOp.MAX)
            best = dt.item() if best is None else min(best, dt.item())
        # check: integer values per (rank, index) below 1024, so every partial sum is exact
        x = value(torch.arange(n), rank).to(torch.float32)
        dist.all_reduce(x)
        want = sum(value(torch.arange(n), r) for r in range(world)).to(torch.float32)
        bad = int((x != want).sum().item())
        wrong += bad
        algbw = nbytes / best / 1e9
        recs.append({"coll": "allreduce", "algo": "gloo", "dtype": "f32", "op": "sum",
                     "bytes": n * 4, "count": n, "inplace": True, "time_us": best * 1e6,
                     "algbw": algbw, "busbw": algbw * 2 * (world - 1) / world, "wrong": bad,
                     "np": world, "mem": "host"})
    if rank == 0:
        q.put((recs, wrong))
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--np", type=int, default=2, help="processes (default 2)")
    ap.add_argument("-b", type=parse_size, default=8)
    ap.add_argument("-e", type=parse_size, default=64 << 20)
    ap.add_argument("-f", type=float, default=4)
    ap.add_argument("-n", type=int, default=20, help="timed iterations (default 20)")
    ap.add_argument("-w", type=int, default=5, help="warm-up iterations (default 5)")
    ap.add_argument("-t", type=float, default=2.0, help="time budget per size, s (default 2)")
    ap.add_argument("-R", type=int, default=1, help="keep the best of R timed loops (default 1)")
    ap.add_argument("-J", "--json", help="JSON records (allreduce_bench's format)")
    args = ap.parse_args()
    res, ok = spawn(worker, args.np, args)
    if not ok:
        print("torch_allreduce: a process failed", file=sys.stderr)
        return 1
    recs, wrong = res
    print(f"# torch {torch.__version__} gloo allreduce, {args.np} processes, f32 sum, in place, "
          f"best of {args.R}")
    print(f"#{'size':>12} {'count':>12} {'time(us)':>10} {'algbw':>8} {'busbw':>8} {'#wrong':>6}")
    for r in recs:
        print(f" {r['bytes']:>12} {r['count']:>12} {r['time_us']:>10.2f} {r['algbw']:>8.2f} "
              f"{r['busbw']:>8.2f} {r['wrong']:>6}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(recs, f, indent=1)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
