"""The torch.distributed backend "mpiddp" at np=N against gloo in the same job:
init_process_group(backend="mpiddp") with nothing in the environment (rank, size and the
rendezvous from MPI), a gloo group beside it, and every collective (all_reduce with each op,
blocking and async; broadcast from each root; all_gather and all_gather_into_tensor;
reduce_scatter and reduce_scatter_tensor; barrier) run on both with the same inputs: integer
results bit for bit equal to gloo's, float ones within 1e-6. DDP on the backend (where
gradient_as_bucket_view defaults to True) against DDP on gloo. Bad inputs raise (wrong device, non-contiguous, mismatched sizes, unsupported dtype or
op, alltoall) and the next collective still works."""
import os
import sys

from ddptest import Check, need_torch

torch = need_torch()
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402

import mpiddp  # noqa: E402
import mpiddp.torch  # noqa: E402

FTOL = 1e-6
DTYPES = (torch.float32, torch.float64, torch.int32, torch.int64, torch.uint8)
COUNTS = (1, 17, 4099, 70001)


def data(dtype, count, rank, salt):
    """Per-rank inputs: floats in [-1, 1), integers in 1..3 (products and sums stay exact)."""
    g = torch.Generator().manual_seed(1000 * salt + 7 * rank + count)
    if dtype.is_floating_point:
        return (torch.rand(count, generator=g, dtype=torch.float64) * 2 - 1).to(dtype)
    return torch.randint(1, 4, (count,), generator=g, dtype=torch.int64).to(dtype)


class Compare:
    def __init__(self, c):
        self.c, self.cases, self.worst = c, 0, 0.0

    def __call__(self, what, got, want):
        self.cases += 1
        if got.shape != want.shape or got.dtype != want.dtype:
            self.c.fail("%s: %s %s, gloo %s %s" % (what, got.dtype, tuple(got.shape), want.dtype,
                                                  tuple(want.shape)))
        elif got.dtype.is_floating_point:
            d = (got.double() - want.double()).abs().max().item() if got.numel() else 0.0
            self.worst = max(self.worst, d)
            self.c.expect(d <= FTOL, "%s: max |mpiddp - gloo| = %.3g > %g" % (what, d, FTOL))
        else:
            self.c.expect(torch.equal(got, want), "%s: not equal to gloo's" % what)


def collectives(c, same, gloo, R, r):
    ops = {"SUM": dist.ReduceOp.SUM, "PRODUCT": dist.ReduceOp.PRODUCT,
           "MIN": dist.ReduceOp.MIN, "MAX": dist.ReduceOp.MAX}
    for dt in DTYPES:
        for n in COUNTS:
            for name, op in ops.items():
                if name == "PRODUCT" and n > 17:
                    continue  # products of thousands of floats under/overflow: small counts
                x, y = data(dt, n, r, 1), data(dt, n, r, 1)
                dist.all_reduce(x, op=op)
                dist.all_reduce(y, op=op, group=gloo)
                same("all_reduce %s %s x%d" % (name, dt, n), x, y)
            if dt.is_floating_point:  # AVG (gloo has none): gloo's sum / size
                x, y = data(dt, n, r, 2), data(dt, n, r, 2)
                dist.all_reduce(x, op=dist.ReduceOp.AVG)
                dist.all_reduce(y, group=gloo)
                same("all_reduce AVG %s x%d" % (dt, n), x, y / R)
        n = 4099
        for root in range(R):
            x, y = data(dt, n, r, 3), data(dt, n, r, 3)
            dist.broadcast(x, src=root)
            dist.broadcast(y, src=root, group=gloo)
            same("broadcast %s from %d" % (dt, root), x, y)
        x = data(dt, n, r, 4)
        got, want = torch.empty(R * n, dtype=dt), torch.empty(R * n, dtype=dt)
        dist.all_gather_into_tensor(got, x)
        dist.all_gather([w for w in want.view(R, n)], x, group=gloo)
        same("all_gather_into_tensor %s" % dt, got, want)
        got = [torch.empty(n, dtype=dt) for _ in range(R)]
        dist.all_gather(got, x)
        same("all_gather %s" % dt, torch.cat(got), want)
        for name in ("SUM", "MAX"):
            x = data(dt, R * n, r, 5)
            got, want = torch.empty(n, dtype=dt), x[r * n:(r + 1) * n].clone()
            dist.reduce_scatter_tensor(got, x, op=ops[name])
            dist.all_reduce(x, op=ops[name], group=gloo)  # gloo has no reduce-scatter
            want = x[r * n:(r + 1) * n]
            same("reduce_scatter_tensor %s %s" % (name, dt), got, want)
            x = data(dt, R * n, r, 6)
            got = torch.empty(n, dtype=dt)
            dist.reduce_scatter(got, list(x.clone().view(R, n)), op=ops[name])
            dist.all_reduce(x, op=ops[name], group=gloo)
            same("reduce_scatter %s %s" % (name, dt), got, x[r * n:(r + 1) * n])
    # several in flight, completed in any order of wait()
    xs = [data(torch.float32, 70001, r, 10 + k) for k in range(4)]
    ys = [x.clone() for x in xs]
    works = [dist.all_reduce(x, async_op=True) for x in xs]
    for w in reversed(works):
        w.wait()
    for k, y in enumerate(ys):
        dist.all_reduce(y, group=gloo)
        same("async all_reduce %d of 4" % k, xs[k], y)
    c.expect(all(w.is_completed() for w in works), "async work completed after wait()")
    fut = dist.all_reduce(torch.ones(3), async_op=True).get_future()
    c.expect(torch.equal(fut.wait()[0], torch.full((3,), float(R))), "Work.get_future()")
    dist.barrier()


def ddp(c, same, gloo, r):
    """DDP on the backend (default buckets, no hook) against DDP on gloo: same gradients."""
    def make(pg):
        torch.manual_seed(0)
        m = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
        return nn.parallel.DistributedDataParallel(m, process_group=pg, bucket_cap_mb=0.01)
    a, b = make(None), make(gloo)
    c.expect(a.gradient_as_bucket_view and not b.gradient_as_bucket_view,
             "DDP's gradient_as_bucket_view: %s on the backend (default True), %s on gloo"
             % (a.gradient_as_bucket_view, b.gradient_as_bucket_view))
    g = torch.Generator().manual_seed(50 + r)
    for step in range(2):
        x, y = torch.randn(16, 32, generator=g), torch.randint(0, 10, (16,), generator=g)
        for m in (a, b):
            m.zero_grad()
            nn.functional.cross_entropy(m(x), y).backward()
        for k, (p, q) in enumerate(zip(a.parameters(), b.parameters())):
            same("DDP step %d gradient %d" % (step, k), p.grad, q.grad)


def bad_inputs(c, R, r):
    f = torch.zeros(8)
    c.raises(TypeError, "tensor on the meta device", dist.all_reduce, torch.zeros(8, device="meta"))
    c.raises(ValueError, "non-contiguous", dist.all_reduce, torch.zeros(4, 4).t())
    c.raises(TypeError, "torch.bool", dist.all_reduce, torch.zeros(4, dtype=torch.bool))
    c.raises(TypeError, "torch.int16", dist.broadcast, torch.zeros(4, dtype=torch.int16), 0)
    c.raises(ValueError, "all_gather_into_tensor output too small", dist.all_gather_into_tensor,
             torch.empty(8 * R - 1), f)
    c.raises(ValueError, "all_gather output of another size", dist.all_gather,
             [torch.empty(8) for _ in range(R - 1)] + [torch.empty(9)], f)
    c.raises(ValueError, "all_gather output list length", dist.all_gather,
             [torch.empty(8) for _ in range(R + 1)], f)
    c.raises(ValueError, "reduce_scatter_tensor input size", dist.reduce_scatter_tensor,
             torch.empty(8), torch.empty(8 * R + 1))
    c.raises(ValueError, "reduce_scatter_tensor dtype", dist.reduce_scatter_tensor,
             torch.empty(8), torch.empty(8 * R, dtype=torch.float64))
    c.raises(ValueError, "reduce_scatter input of another size", dist.reduce_scatter,
             torch.empty(8), [torch.empty(8) for _ in range(R - 1)] + [torch.empty(7)])
    c.raises(ValueError, "ReduceOp.BAND", dist.all_reduce, torch.zeros(4, dtype=torch.int32),
             op=dist.ReduceOp.BAND)
    e = c.raises(NotImplementedError, "all_to_all_single", dist.all_to_all_single,
                 torch.empty(R), torch.ones(R))
    c.expect(e is None or "alltoall" in str(e), "NotImplementedError names the op: %s" % e)
    c.raises(NotImplementedError, "all_to_all", dist.all_to_all, [torch.empty(1)] * R,
             [torch.ones(1)] * R)
    c.raises((ValueError, RuntimeError), "broadcast root out of range", dist.broadcast, torch.zeros(4), R)
    # nothing was left behind: the next collective works and requires_grad is fine (as gloo)
    p = torch.ones(5, requires_grad=True)
    dist.all_reduce(p)
    c.expect(torch.equal(p.detach(), torch.full((5,), float(R))), "all_reduce after the failures")


def main():
    torch.set_num_threads(1)
    for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):
        os.environ.pop(k, None)
    dist.init_process_group(backend="mpiddp")  # all of it from MPI
    comm = mpiddp.default_comm()
    c = Check("python_backend", comm)
    R, r = dist.get_world_size(), dist.get_rank()
    c.expect(R == comm.size and r == comm.rank and dist.get_backend() == "mpiddp",
             "rank %d of %d backend %s; MPI rank %d of %d"
             % (r, R, dist.get_backend(), comm.rank, comm.size))
    gloo = dist.new_group(backend="gloo")
    same = Compare(c)
    collectives(c, same, gloo, R, r)
    ddp(c, same, gloo, r)
    bad_inputs(c, R, r)
    c.log("np=%d: %d results equal to gloo's (integers bit for bit, floats max |diff| %.3g, "
          "tolerance %g)" % (R, same.cases, same.worst, FTOL))
    rc = c.finish()
    dist.destroy_process_group(gloo)
    dist.destroy_process_group()
    return rc


if __name__ == "__main__":
    sys.exit(main())
