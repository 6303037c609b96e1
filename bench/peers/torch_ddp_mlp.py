"""PyTorch peer of ddp_bench: the W-DDP workload under torch DDP (gloo, CPU).

MLP 784-2048-2048-2048-10 (10,020,874 parameters, 40 MB of f32 gradients), SGD lr 0.01,
per-rank batch 64, synthetic inputs, one thread per process. Runs world 1 (no DDP wrapper)
and world N (DistributedDataParallel, default 25 MB buckets) and reports, as ddp_bench does,
the median step time of the slowest rank (a barrier before each timed step, not timed), the
scaling efficiency step(np=1) / step(np=N) and samples/s.

    /usr/bin/python3 bench/peers/torch_ddp_mlp.py --np 2 --steps 30 -J torch_ddp.json

Written for Debian's python3-torch (1.13, CPU); rendezvous on 127.0.0.1 (loopback only)."""
import argparse
import json
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn

from peerlib import init_gloo, spawn

LAYERS = [784, 2048, 2048, 2048, 10]


def model():
    mods = []
    for i in range(len(LAYERS) - 1):
        mods.append(nn.Linear(LAYERS[i], LAYERS[i + 1]))
        if i + 2 < len(LAYERS):
            mods.append(nn.ReLU())
    return nn.Sequential(*mods)



def trainer(m, rank, args):
    """One SGD step of `m` (a module or a DDP wrapper) on this rank's synthetic batch."""
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(1000 + rank)  # per-rank data, as ddp_bench
    x = torch.rand(args.batch, LAYERS[0], generator=g) * 2 - 1
    y = torch.randint(0, LAYERS[-1], (args.batch,), generator=g)
    lossf = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=False)
        lossf(m(x), y).backward()
        opt.step()
    return step


def time_steps(step, steps, warmup, world):
    """Median and mean of `steps` timed steps after `warmup`, of the slowest rank (a barrier
    before each timed step, not timed)."""
    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        if world > 1:
            dist.barrier()
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    med = torch.tensor([statistics.median(times)], dtype=torch.float64)
    mean = torch.tensor([statistics.mean(times)], dtype=torch.float64)
    if world > 1:
        dist.all_reduce(med, op=dist.ReduceOp.MAX)
        dist.all_reduce(mean, op=dist.ReduceOp.MAX)
    return med.item(), mean.item()


def train(rank, world, port, args, q):
    torch.set_num_threads(1)
    torch.manual_seed(0)
    m = model()
    if world > 1:
        init_gloo(rank, world, port)
        m = nn.parallel.DistributedDataParallel(m)
    res = time_steps(trainer(m, rank, args), args.steps, args.warmup, world)
    if world > 1:
        dist.destroy_process_group()
    if rank == 0:
        q.put(res)


def run(world, args):
    res, ok = spawn(train, world, args)
    if not ok:
        sys.exit(f"torch_ddp_mlp: a process of world {world} failed")
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--np", type=int, default=2, help="world size of the DDP run (default 2)")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--batch", type=int, default=64, help="per-rank batch (default 64)")
    ap.add_argument("-J", "--json", help="write the results as JSON")
    args = ap.parse_args()
    nparams = sum(p.numel() for p in model().parameters())
    res = {}
    for w in (1, args.np):
        res[w] = run(w, args)
    print(f"# torch {torch.__version__} DDP (gloo) W-DDP MLP {'-'.join(map(str, LAYERS))}, "
          f"{nparams} parameters, per-rank batch {args.batch}, SGD, 1 thread per process, "
          f"{args.steps} steps (+{args.warmup} warm-up), median step of the slowest rank")
    print(f"#{'np':>3} {'step_ms':>9} {'mean_ms':>9} {'samples/s':>10}")
    recs = []
    for w in (1, args.np):
        med, mean = res[w]
        sps = args.batch * w / med
        print(f" {w:>3} {med * 1e3:>9.2f} {mean * 1e3:>9.2f} {sps:>10.0f}")
        recs.append({"np": w, "params": nparams, "batch": args.batch, "steps": args.steps,
                     "step_ms": med * 1e3, "step_mean_ms": mean * 1e3, "samples_per_s": sps})
    eff = res[1][0] / res[args.np][0]
    print(f"# scaling efficiency step(np=1) / step(np={args.np}): {eff:.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": recs, "efficiency": eff, "torch": torch.__version__}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
