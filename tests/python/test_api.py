"""The ctypes binding at np=N: MPI adopted from mpi4py, blocking and non-blocking collectives on
NumPy arrays and torch tensors with exact integer-valued results, node-shared buffers, the
sampler against torch.utils.data.DistributedSampler, and bad inputs raising (wrong dtype,
non-contiguous, read-only, freed storage, freed shared buffer, overlapping buffers from C)."""
import sys

from ddptest import Check, need_torch

torch = need_torch()
import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402  (initialises MPI first: mpiddp must adopt it)
from torch.utils.data import DistributedSampler as TorchSampler  # noqa: E402

import mpiddp  # noqa: E402


def seeded(rank, count, dtype):
    """Verifiable input: element i of rank r is (r + 1) * (i % 7 + 1), exact in every dtype."""
    return ((rank + 1) * (np.arange(count) % 7 + 1)).astype(dtype)


def main():
    comm = mpiddp.init()
    c = Check("python_api", comm)
    R, r = comm.size, comm.rank
    rsum = R * (R + 1) // 2
    c.expect(not comm.mpi_owned and comm.thread_level == MPI.THREAD_MULTIPLE,
             "MPI initialised by mpi4py: mpi_owned %d thread_level %d"
             % (comm.mpi_owned, comm.thread_level))
    c.expect(mpiddp.init() is comm, "init() twice returns the same communicator")

    # blocking and non-blocking allreduce, NumPy and torch, every dtype, sum and avg
    for dt in ("float32", "float64", "float16", "int32", "int64", "uint8"):
        for count in (1, 1000, 70001):
            x = seeded(r, count, dt)
            comm.allreduce(x)
            want = (rsum * (np.arange(count) % 7 + 1)).astype(dt)
            c.expect(np.array_equal(x, want), "numpy allreduce %s x%d" % (dt, count))
    for dt in (torch.float32, torch.bfloat16, torch.int64):
        t = torch.from_numpy(seeded(r, 4097, "float32")).to(dt)
        req = comm.iallreduce(t, op="max")
        del t  # the request keeps the buffer alive
        req.wait()
        c.expect(req.test(), "test() after wait()")
    t = torch.from_numpy(seeded(r, 4097, "float32"))
    out = torch.empty_like(t)
    comm.iallreduce(t, op="avg", out=out).wait()
    want = torch.from_numpy(seeded(0, 4097, "float32")) * rsum / R
    c.expect(torch.equal(out, want) and torch.equal(t, torch.from_numpy(seeded(r, 4097, "float32"))),
             "iallreduce avg out of place")

    # broadcast, allgather, reduce-scatter
    b = np.full(33, r, dtype=np.int32)
    comm.broadcast(b, root=R - 1)
    c.expect((b == R - 1).all(), "broadcast from the last rank")
    g = torch.empty(5 * R, dtype=torch.int64)
    comm.iallgather(torch.arange(5) + 10 * r, g).wait()
    c.expect(torch.equal(g, torch.cat([torch.arange(5) + 10 * q for q in range(R)])), "allgather")
    send = np.tile(seeded(r, 6, "float64"), R)
    recv = np.empty(6)
    comm.reduce_scatter(send, recv)
    c.expect(np.array_equal(recv, seeded(0, 6, "float64") * rsum), "reduce_scatter")
    comm.ibarrier().wait()

    # node-shared buffer: an allreduce in it, views as NumPy and torch
    sh = comm.alloc(4096 * 4)
    a = sh.numpy("float32")
    a[:] = seeded(r, 4096, "float32")
    comm.allreduce(a)
    c.expect(np.array_equal(sh.torch(torch.float32).numpy(), seeded(0, 4096, "float32") * rsum),
             "allreduce in a node-shared buffer")
    view, tview = a[8:], sh.torch()
    sh.free()
    c.raises(ValueError, "allreduce on a NumPy view of a freed shared buffer", comm.allreduce, view)
    c.raises(ValueError, "allreduce on a tensor of a freed shared buffer", comm.allreduce, tview)

    # bad inputs raise before any pointer reaches C
    c.raises(TypeError, "complex dtype", comm.allreduce, np.zeros(4, np.complex64))
    c.raises(TypeError, "torch bool", comm.allreduce, torch.zeros(4, dtype=torch.bool))
    c.raises(TypeError, "big-endian", comm.allreduce, np.zeros(4, ">f4"))
    c.raises(TypeError, "a list", comm.allreduce, [1.0, 2.0])
    c.raises(ValueError, "non-contiguous NumPy", comm.allreduce, np.zeros((4, 4), np.float32)[:, 1])
    c.raises(ValueError, "non-contiguous torch", comm.allreduce, torch.zeros(4, 4).t())
    ro = np.zeros(4, np.float32)
    ro.flags.writeable = False
    c.raises(ValueError, "read-only array", comm.allreduce, ro)
    c.raises(ValueError, "requires_grad", comm.allreduce, torch.zeros(4, requires_grad=True))
    freed = torch.zeros(1024)
    freed.storage().resize_(0)
    c.raises(ValueError, "tensor with freed storage", comm.iallreduce, freed)
    c.raises(ValueError, "op name", comm.allreduce, np.zeros(4, np.float32), op="mean")
    # the hook names come from the C library (ddp_hook_name / ddp_hook_parse)
    from mpiddp import _hooks as H
    c.expect([H.hook_name(k) for k in H.codes()] == ["none", "fp16", "bf16"]
             and all(H.hook_parse(H.hook_name(k)) == k for k in H.codes()), "hook names round-trip")
    e = c.raises(ValueError, "unknown hook name", H.hook_parse, "fp8")
    c.expect(e is not None and "'fp8'" in str(e) and "bf16" in str(e), "hook message: %s" % e)
    for bad in (None, 3, -1, True, 2 ** 40):
        c.raises(ValueError, "hook code %r" % (bad,), H.hook_name, bad)
    c.raises(ValueError, "root out of range", comm.broadcast, np.zeros(4, np.float32), root=R)
    c.raises(ValueError, "allgather recv too small", comm.allgather, np.zeros(4), np.zeros(4 * R - 1))
    c.raises(ValueError, "out dtype", comm.allreduce, np.zeros(4), out=np.zeros(4, np.float32))
    # device memory on a communicator without a device (no GPU, no DDP_DEVICE_EMULATE)
    class OnDevice:
        __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (4096, False),
                                    "version": 3}
    c.raises(TypeError, "device buffer without a device", comm.allreduce, OnDevice())
    c.raises(mpiddp.MpiddpError, "device_array without a device", comm.device_array, 4)
    # an error found by the C library comes back as MpiddpError with ddp_last_error()'s text
    big = np.zeros(16, np.float32)
    e = c.raises(mpiddp.MpiddpError, "partially overlapping send/recv", comm.allreduce, big[:8],
                 out=big[4:12])
    if e is not None:
        c.expect(e.name == "DDP_EINVAL" and e.detail, "MpiddpError carries status and detail: %s" % e)
    comm.barrier()  # the failed calls left nothing behind: the next collective works
    x = np.ones(3, np.int64)
    comm.allreduce(x)
    c.expect((x == R).all(), "allreduce after the failures")

    # sampler: the very indices of torch's DistributedSampler
    cases = 0
    for size in (0, 1, 7, 100, 60000):
        for shuffle in (True, False):
            for drop_last in (False, True):
                for seed, epoch in ((0, 0), (42, 3)):
                    ours = mpiddp.DistributedSampler(size, shuffle=shuffle, seed=seed,
                                                     drop_last=drop_last)
                    ref = TorchSampler(range(size), num_replicas=R, rank=r, shuffle=shuffle,
                                       seed=seed, drop_last=drop_last)
                    ours.set_epoch(epoch)
                    ref.set_epoch(epoch)
                    c.expect(list(ours) == list(ref) and len(ours) == len(ref),
                             "sampler size %d shuffle %d drop_last %d seed %d epoch %d"
                             % (size, shuffle, drop_last, seed, epoch))
                    cases += 1
    dl = torch.utils.data.DataLoader(torch.arange(50), batch_size=8,
                                     sampler=mpiddp.DistributedSampler(50, seed=1))
    ref = TorchSampler(range(50), num_replicas=R, rank=r, seed=1)
    c.expect(torch.cat(list(dl)).tolist() == list(ref), "DataLoader with the sampler")
    c.raises(ValueError, "sampler rank out of range", mpiddp.DistributedSampler, 10, num_replicas=2,
             rank=2)
    c.log("sampler: %d argument sets equal to torch's DistributedSampler" % cases)

    # another communicator over an mpi4py one (ddp_comm_create)
    sub = comm.split(MPI.COMM_WORLD.Split(r % 2, r))
    y = np.ones(2, np.int32)
    sub.allreduce(y)
    c.expect((y == (R + 1 - r % 2) // 2).all() and sub.size == (R + 1 - r % 2) // 2,
             "allreduce over an mpi4py split")
    sub.close()
    c.raises(ValueError, "closed communicator", sub.allreduce, y)
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())
