"""FSDP over the "mpiddp" backend against FSDP over gloo, in one job at np=N, on the CPU:
FULL_SHARD and SHARD_GRAD_OP, each training the W-DDP MLP (784-2048-2048-2048-10, a synthetic
per-rank batch of 64, 8 SGD steps) and the Fashion-MNIST MLP (784-512-256-10, the real data through
mpiddp.datasets, 150 per-rank batches of 64 from mpiddp.DistributedSampler, SGD with momentum)
from the same initial weights on the same batches: every step's loss within LOSS_TOL of
gloo's, and every rank's parameters bitwise equal to rank 0's at the end. Skips (77) where
torch's FSDP cannot run on the CPU: Debian's torch 1.13 does not even import it under Python
3.11 (a dataclass with a mutable default in torch.distributed._shard), and its FSDP needs
CUDA streams."""
import sys

from ddptest import Check, need_torch

torch = need_torch()
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402

import mpiddp  # noqa: E402
import mpiddp.datasets  # noqa: E402
import mpiddp.torch  # noqa: E402

LOSS_TOL = 1e-6  # absolute, per step; at np=2 each reduction is one addition: expect 0
WDDP = [784, 2048, 2048, 2048, 10]
FMNIST = [784, 512, 256, 10]


def mlp(layers):
    mods = []
    for i in range(len(layers) - 1):
        mods.append(nn.Linear(layers[i], layers[i + 1]))
        if i + 2 < len(layers):
            mods.append(nn.ReLU())
    return nn.Sequential(*mods)


def fsdp_modules():
    try:
        from torch.distributed.fsdp import FullyShardedDataParallel, ShardingStrategy
        return FullyShardedDataParallel, ShardingStrategy
    except Exception as e:  # 1.13 under Python 3.11: ValueError from a dataclass
        print("SKIP: torch %s: torch.distributed.fsdp does not import (%s: %s)"
              % (torch.__version__, type(e).__name__, str(e)[:160]))
        sys.exit(77)


def train(FSDP, strategy, group, layers, batches, opt_kw):
    torch.manual_seed(0)
    m = FSDP(mlp(layers), process_group=group, sharding_strategy=strategy,
             device_id=torch.device("cpu"))
    opt = torch.optim.SGD(m.parameters(), **opt_kw)
    losses = []
    for x, y in batches:
        opt.zero_grad()
        loss = nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with FSDP.summon_full_params(m):
        flat = torch.cat([p.detach().reshape(-1).clone() for p in m.parameters()])
    return losses, flat


def main():
    torch.set_num_threads(1)
    FSDP, ShardingStrategy = fsdp_modules()
    comm = mpiddp.torch.init_process_group()  # gloo, the reference
    c = Check("python_fsdp", comm)
    R, r = comm.size, comm.rank
    backend = dist.new_group(backend="mpiddp")
    g = torch.Generator().manual_seed(1000 + r)
    # W-DDP: one synthetic batch per rank, 8 steps on it (the loss falls as it is learnt)
    wddp = [(torch.rand(64, 784, generator=g) * 2 - 1,
             torch.randint(0, 10, (64,), generator=g))] * 8
    x, y = mpiddp.datasets.fashion_mnist()
    sampler = mpiddp.DistributedSampler(len(x), seed=0)
    idx = torch.tensor(sampler.indices()[:64 * 150])
    xs, ys = torch.from_numpy(x)[idx], torch.from_numpy(y)[idx]
    fmnist = [(xs[k:k + 64], ys[k:k + 64]) for k in range(0, len(idx), 64)]
    work = (("W-DDP MLP", WDDP, wddp, {"lr": 0.01}),
            ("Fashion-MNIST MLP", FMNIST, fmnist, {"lr": 0.05, "momentum": 0.9}))
    for strategy in (ShardingStrategy.FULL_SHARD, ShardingStrategy.SHARD_GRAD_OP):
        for name, layers, batches, opt_kw in work:
            ref, ref_p = train(FSDP, strategy, None, layers, batches, opt_kw)
            got, got_p = train(FSDP, strategy, backend, layers, batches, opt_kw)
            diff = max(abs(a - b) for a, b in zip(ref, got))
            what = "FSDP %s %s" % (strategy.name, name)
            c.expect(diff <= LOSS_TOL, "%s: max |loss mpiddp - gloo| = %.3g > %g"
                     % (what, diff, LOSS_TOL))
            root = got_p.clone()
            comm.broadcast(root, root=0)
            c.expect(torch.equal(root, got_p), "%s: parameters differ across ranks" % what)
            c.log("%s, torch %s, np=%d, %d steps: loss first %.4f last %.4f with gloo, %.4f / "
                  "%.4f with mpiddp (max |diff| over the steps %.3g, tolerance %g)"
                  % (what, torch.__version__, R, len(batches), ref[0], ref[-1], got[0], got[-1],
                     diff, LOSS_TOL))
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())
