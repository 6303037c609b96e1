"""PyTorch peer of ddp_train: MLP 784-512-256-10 on Fashion-MNIST under torch DDP (gloo, CPU).

The same recipe as `mpirun -np N build/apps/ddp_train --epochs E`: N processes, per-rank batch
64, DistributedSampler(shuffle, seed 0, set_epoch each epoch: the very index order ddp_train's
sampler reproduces), pixels /255 then Normalize(0.2860, 0.3530), softmax cross-entropy (mean
over the local batch), SGD lr 0.05 momentum 0.9 weight decay 5e-4, linear warmup over
min(200, total/10) steps then half a cosine to 0, PyTorch's default initialisation, one
thread per process. Per epoch: mean training loss, accuracy on the whole test set, samples/s,
epoch time; a CSV in ddp_train --metrics format.

    /usr/bin/python3 bench/peers/torch_fmnist.py --np 2 --epochs 10 --metrics torch_fmnist.csv

Written for Debian's python3-torch (1.13, CPU) and dataset-fashion-mnist (gzip IDX files under
/usr/share/datasets/fashion-mnist); rendezvous on 127.0.0.1 (loopback only)."""
import argparse
import gzip
import math
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from peerlib import init_gloo, spawn

MEAN, STD = 0.2860, 0.3530


def load(folder, train):
    pre = "train" if train else "t10k"

    def read(name, offset):
        path = os.path.join(folder, name)
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rb") as f:
            return np.frombuffer(f.read(), np.uint8, offset=offset)

    def find(stem):
        for suffix in (".gz", ""):
            if os.path.exists(os.path.join(folder, stem + suffix)):
                return stem + suffix
        sys.exit(f"torch_fmnist: {stem}[.gz] not found in {folder}")

    x = read(find(f"{pre}-images-idx3-ubyte"), 16).reshape(-1, 784)
    y = read(find(f"{pre}-labels-idx1-ubyte"), 8).astype(np.int64)
    # as torchvision's ToTensor + Normalize: /255 in f32, then (x - mean) / std in f32
    xt = (torch.from_numpy(x.astype(np.float32)) / 255.0 - MEAN) / STD
    return TensorDataset(xt, torch.from_numpy(y))



def train(rank, world, port, args, q):
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    if world > 1:
        init_gloo(rank, world, port)
    tr, te = load(args.data, True), load(args.data, False)
    sampler = DistributedSampler(tr, num_replicas=world, rank=rank, shuffle=True, seed=args.seed)
    loader = DataLoader(tr, batch_size=args.batch, sampler=sampler)
    m = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                      nn.Linear(256, 10))
    if world > 1:
        m = nn.parallel.DistributedDataParallel(m)
    opt = torch.optim.SGD(m.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    steps = len(loader)
    total = steps * args.epochs
    warm = min(200, total // 10)
    lossf = nn.CrossEntropyLoss()
    s = 0
    rows = []
    for ep in range(args.epochs):
        sampler.set_epoch(ep)
        t0 = time.perf_counter()
        lsum = torch.zeros(2, dtype=torch.float64)
        m.train()
        for xb, yb in loader:
            lr = args.lr * (s + 1) / warm if s < warm else \
                args.lr * 0.5 * (1 + math.cos(math.pi * (s - warm) / max(total - warm, 1)))
            for pg in opt.param_groups:
                pg["lr"] = lr
            opt.zero_grad()
            loss = lossf(m(xb), yb)
            loss.backward()
            opt.step()
            lsum += torch.tensor([loss.item(), 1.0], dtype=torch.float64)
            s += 1
        dt = time.perf_counter() - t0
        m.eval()
        with torch.no_grad():  # every rank evaluates its contiguous share of the test set
            n = len(te)
            lo, hi = rank * n // world, (rank + 1) * n // world
            xs, ys = te.tensors[0][lo:hi], te.tensors[1][lo:hi]
            correct = torch.tensor([float((m(xs).argmax(1) == ys).sum().item())],
                                   dtype=torch.float64)
        slowest = torch.tensor([dt], dtype=torch.float64)
        if world > 1:
            dist.all_reduce(lsum)
            dist.all_reduce(correct)
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        dt = slowest.item()
        rows.append((ep + 1, s, lsum[0].item() / lsum[1].item(), correct.item() / len(te),
                     len(tr) / dt, dt, lr))
    if world > 1:
        dist.destroy_process_group()
    if rank == 0:
        q.put(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--np", type=int, default=2, help="processes (default 2)")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch", type=int, default=64, help="per-rank batch (default 64)")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--metrics", help="CSV in ddp_train --metrics format")
    args = ap.parse_args()
    rows, ok = spawn(train, args.np, args)
    if not ok:
        print("torch_fmnist: a process failed", file=sys.stderr)
        return 1
    print(f"# torch {torch.__version__} DDP (gloo): MLP 784-512-256-10, Fashion-MNIST, "
          f"{args.np} processes, per-rank batch {args.batch}, global batch {args.batch * args.np}")
    print(f"{'epoch':>5} {'train_loss':>11} {'test_acc':>9} {'samples/s':>11} {'time_s':>8}")
    for ep, _, loss, acc, sps, dt, _ in rows:
        print(f"{ep:>5} {loss:>11.6f} {acc * 100:>8.2f}% {sps:>11.1f} {dt:>8.2f}")
    print(f"final: test accuracy {rows[-1][3] * 100:.2f}% after {args.epochs} epochs")
    if args.metrics:
        with open(args.metrics, "w") as f:
            f.write("epoch,global_step,train_loss,test_acc,samples_per_s,epoch_s,lr\n")
            for r in rows:
                f.write("%d,%d,%.9f,%.6f,%.1f,%.3f,%g\n" % r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
