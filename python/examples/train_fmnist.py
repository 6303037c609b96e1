"""PyTorch DDP on Fashion-MNIST over MPI with mpiddp: an MLP 784-512-256-10 trained by
`mpirun -np N python3 train_fmnist.py [--hook allreduce|fp16|bf16|none] [--epochs E]`.

The four lines a script needs are marked (1)-(4). Data order: mpiddp.DistributedSampler,
the very indices torch.utils.data.DistributedSampler gives. Recipe as ddp_train's and
bench/peers/torch_fmnist.py's: per-rank batch 64, SGD lr 0.05 momentum 0.9 weight decay 5e-4,
linear warmup over min(200, total/10) steps then half a cosine to 0, one thread per rank.
"""
import argparse
import math
import time

import torch
import torch.nn as nn

import mpiddp
import mpiddp.datasets
import mpiddp.torch  # (1)

HOOKS = dict(mpiddp.torch.COMM_HOOKS, none=None)  # none: PyTorch's own allreduce


def mlp():
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                         nn.Linear(256, 10))


def train(hook="allreduce", epochs=1, batch=64, seed=0, lr=0.05, data=None, log=print):
    """Trains; returns the test accuracy and the trained module (the same on every rank).
    hook "none" keeps PyTorch's own allreduce over the process group (gloo)."""
    comm = mpiddp.default_comm()
    torch.manual_seed(seed)
    model = nn.parallel.DistributedDataParallel(mlp())  # (3)
    if HOOKS[hook] is not None:
        model.register_comm_hook(None, HOOKS[hook])  # (4)
    (xtr, ytr), (xte, yte) = data or (mpiddp.datasets.fashion_mnist(train=True),
                                      mpiddp.datasets.fashion_mnist(train=False))
    xtr, ytr = torch.from_numpy(xtr), torch.from_numpy(ytr)
    sampler = mpiddp.DistributedSampler(len(xtr), shuffle=True, seed=seed)
    steps_per_epoch = math.ceil(len(sampler) / batch)
    total = steps_per_epoch * epochs
    warm = min(200, total // 10)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)

    def lr_at(step):
        if step < warm:
            return lr * (step + 1) / warm
        return lr * 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, total - warm)))

    lossf = nn.CrossEntropyLoss()
    step = 0
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        idx = torch.tensor(sampler.indices(), dtype=torch.int64)
        t0, loss_sum = time.perf_counter(), 0.0
        for b in range(steps_per_epoch):
            sel = idx[b * batch:(b + 1) * batch]
            for g in opt.param_groups:
                g["lr"] = lr_at(step)
            opt.zero_grad()
            loss = lossf(model(xtr[sel]), ytr[sel])
            loss.backward()
            opt.step()
            loss_sum += loss.item()
            step += 1
        acc = accuracy(model.module, xte, yte)
        if comm.rank == 0:
            log("epoch %d hook %s loss %.4f test accuracy %.4f (%.1f s)"
                % (epoch, hook, loss_sum / steps_per_epoch, acc, time.perf_counter() - t0))
    return acc, model.module


def accuracy(model, x, y):
    with torch.no_grad():
        return (model(torch.from_numpy(x)).argmax(1) == torch.from_numpy(y)).float().mean().item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hook", choices=sorted(HOOKS), default="allreduce")
    ap.add_argument("--epochs", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(1)
    mpiddp.torch.init_process_group()  # (2)
    train(args.hook, args.epochs)


if __name__ == "__main__":
    main()
