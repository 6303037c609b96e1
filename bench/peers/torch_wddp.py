"""PyTorch DDP peer of ddp_bench's W-DDP workload (quote it beside ddp_bench, same session).

MLP 784-2048-2048-2048-10 (10.0 M parameters, 40 MB of f32 gradients), SGD, per-rank batch 64,
synthetic inputs, one thread per rank, gloo over loopback. Prints the median step time of rank 0
over the measured steps and samples/s (64 x world / step).

  OPENBLAS_CORETYPE=Cooperlake /usr/bin/python3 bench/peers/torch_wddp.py WORLD [STEPS] [PORT]

Set OPENBLAS_CORETYPE to the kernel ddp_bench reports, so both use the same GEMMs (Debian's
torch 1.13 calls OpenBLAS)."""
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn


def run(rank, world, steps, port, q):
    torch.set_num_threads(1)
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(784, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(),
                        nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 10))
    if world > 1:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("gloo", rank=rank, world_size=world)
        net = nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    x, y = torch.randn(64, 784), torch.randint(0, 10, (64,))
    loss = nn.CrossEntropyLoss()
    times = []
    for i in range(steps + 5):  # 5 warm-up steps
        if world > 1:
            dist.barrier()
        t = time.perf_counter()
        opt.zero_grad()
        loss(net(x), y).backward()
        opt.step()
        if i >= 5:
            times.append(time.perf_counter() - t)
    if rank == 0:
        q.put(statistics.median(times))
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    world = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    port = int(sys.argv[3]) if len(sys.argv) > 3 else 29561
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=run, args=(r, world, steps, port, q)) for r in range(world)]
    for p in procs:
        p.start()
    step = q.get()
    for p in procs:
        p.join()
    if any(p.exitcode for p in procs):
        sys.exit("torch_wddp: a rank failed")
    print("torch_wddp world %d: step %.1f ms (median of %d), %.0f samples/s, OPENBLAS_CORETYPE=%s"
          % (world, step * 1e3, steps, 64 * world / step, os.environ.get("OPENBLAS_CORETYPE", "(unset)")))
