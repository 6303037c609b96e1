"""DDP comm hooks at np=N against gloo: two copies of one model (a small CNN + MLP, several
buckets), one under PyTorch's own gloo allreduce and one under mpiddp.torch.allreduce_hook,
trained side by side on per-rank data. After every backward the averaged gradients must agree
within 1e-6 and be bitwise equal on every rank; the fp16 / bf16 hooks within their rounding."""
import sys

from ddptest import Check, need_torch

torch = need_torch()
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402

import mpiddp.torch  # noqa: E402

STEPS = 3


def net():
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(16 * 7 * 7, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                         nn.Linear(128, 10))


def ddp(hook):
    torch.manual_seed(0)  # the same initial weights for every copy
    # small buckets: several gradient buckets, so several allreduces in flight per backward
    m = nn.parallel.DistributedDataParallel(net(), bucket_cap_mb=0.1)
    if hook is not None:
        m.register_comm_hook(None, hook)
    return m, torch.optim.SGD(m.parameters(), lr=0.05)


def grads(m):
    return [p.grad.detach().clone() for p in m.parameters()]


def main():
    torch.set_num_threads(1)
    comm = mpiddp.torch.init_process_group()
    c = Check("python_hook", comm)
    c.expect(dist.get_world_size() == comm.size and dist.get_rank() == comm.rank,
             "torch.distributed rank/size from MPI")
    R, r = comm.size, comm.rank
    fp16, bf16 = (mpiddp._hooks.hook_name(h) for h in (mpiddp._hooks.FP16, mpiddp._hooks.BF16))
    tols = {"allreduce": 1e-6, fp16: 2.0 ** -10, bf16: 2.0 ** -7}
    hooks = {k: (mpiddp.torch.COMM_HOOKS[k], tol) for k, tol in tols.items()}
    ref, ref_opt = ddp(None)
    runs = {k: ddp(h) for k, (h, _) in hooks.items()}
    nparams = sum(p.numel() for p in ref.parameters())
    lossf = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(100 + r)  # per-rank data: the average matters
    worst = {k: 0.0 for k in hooks}
    for step in range(STEPS):
        x = torch.randn(32, 1, 28, 28, generator=g)
        y = torch.randint(0, 10, (32,), generator=g)
        for m, opt in [(ref, ref_opt)] + list(runs.values()):
            opt.zero_grad()
            lossf(m(x), y).backward()
        want = grads(ref)
        scale = max(w.abs().max().item() for w in want)
        for k, (m, opt) in runs.items():
            got = grads(m)
            diff = max((a - b).abs().max().item() for a, b in zip(got, want))
            worst[k] = max(worst[k], diff)
            tol = hooks[k][1] * (1 if k == "allreduce" else 4 * scale)
            c.expect(diff <= tol, "%s hook step %d: max |hook - gloo| = %.3g > %.3g"
                     % (k, step, diff, tol))
            # every rank ends with the very same bits
            flat = torch.cat([t.flatten() for t in got])
            root = flat.clone()
            comm.broadcast(root, root=0)
            c.expect(torch.equal(flat, root), "%s hook step %d: ranks differ" % (k, step))
        for m, opt in [(ref, ref_opt)] + list(runs.values()):
            opt.step()
    c.log("gradient equality np=%d: allreduce_hook vs gloo max |diff| = %.3g over %d parameters, "
          "%d steps, %d tensors (tolerance 1e-6); fp16 %.3g, bf16 %.3g; bitwise equal on all ranks"
          % (R, worst["allreduce"], nparams, STEPS, len(list(ref.parameters())), worst[fp16],
             worst[bf16]))
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())
