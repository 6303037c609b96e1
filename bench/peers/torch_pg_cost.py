"""What the Python layer of the "mpiddp" torch.distributed backend costs per call: blocking
dist.all_reduce of float32 tensors through gloo, through the backend (a ProcessGroup written in
Python: checks, ddp_iallreduce, a Work completed by the waiter thread), straight through the
binding's non-blocking Comm.iallreduce(x).wait() (ctypes into ddp_iallreduce + ddp_wait on the
calling thread: about what a C++ extension would cost, which would still pass through torch's
dispatch) and its blocking Comm.allreduce, in one job, median of the calls; backend - binding
(non-blocking) is what the Python process group adds.

    tools/mpilaunch -n 2 -e PYTHONPATH -e MPIDDP_LIBRARY /usr/bin/python3 bench/peers/torch_pg_cost.py

Needs the mpiddp package and library: PYTHONPATH=python MPIDDP_LIBRARY=build/libmpiddp.so."""
import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import mpiddp.torch  # noqa: E402

SIZES = (8, 4096, 1 << 20, 25 << 20)  # bytes; 25 MB: DDP's default bucket


def timed(fn, calls):
    for _ in range(max(3, calls // 10)):
        fn()
    dist.barrier()
    ts = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    med = torch.tensor([statistics.median(ts)], dtype=torch.float64)
    dist.all_reduce(med, op=dist.ReduceOp.MAX)
    return med.item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=200, help="calls per size (fewer for 25 MB)")
    ap.add_argument("-J", "--json")
    args = ap.parse_args()
    torch.set_num_threads(1)
    comm = mpiddp.torch.init_process_group()  # gloo default group
    pg = dist.new_group(backend="mpiddp")
    rows = []
    for nbytes in SIZES:
        x = torch.ones(nbytes // 4)
        calls = args.calls if nbytes < (1 << 20) else max(10, args.calls // 10)
        g = timed(lambda: dist.all_reduce(x), calls)
        b = timed(lambda: dist.all_reduce(x, group=pg), calls)
        i = timed(lambda: comm.iallreduce(x).wait(), calls)
        c = timed(lambda: comm.allreduce(x), calls)
        rows.append({"bytes": nbytes, "gloo_us": g * 1e6, "backend_us": b * 1e6,
                     "binding_nb_us": i * 1e6, "binding_us": c * 1e6,
                     "python_layer_us": (b - i) * 1e6})
    if comm.rank == 0:
        print("# torch %s, np=%d, blocking all_reduce of float32, median of the slowest rank"
              % (torch.__version__, comm.size))
        print("#%11s %10s %12s %15s %12s %16s" % ("bytes", "gloo_us", "backend_us",
                                                  "binding_nb_us", "binding_us",
                                                  "backend-nb_us"))
        for r in rows:
            print(" %11d %10.1f %12.1f %15.1f %12.1f %16.1f"
                  % (r["bytes"], r["gloo_us"], r["backend_us"], r["binding_nb_us"],
                     r["binding_us"], r["python_layer_us"]))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"torch": torch.__version__, "np": comm.size, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
