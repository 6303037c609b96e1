"""Device buffers through the Python binding at np=N, on the library's emulated device
(ctest sets DDP_DEVICE_EMULATE=1: "device memory" is tracked host memory behind the same device
collectives a GPU uses): DeviceArray and foreign __cuda_array_interface__ objects in
allreduce / iallreduce / broadcast / allgather / reduce-scatter with exact integer-valued
results and identical bits on every rank; bad device inputs raise (host memory posing as device
memory, host and device mixed, freed arrays, strides, dtypes, unknown streams). CUDA torch
tensors are checked too where torch has CUDA and a GPU."""
import ctypes
import sys
import time

from ddptest import Check, need_torch

torch = need_torch()
import numpy as np  # noqa: E402

import mpiddp  # noqa: E402


def seeded(rank, count, dtype):
    return ((rank + 1) * (np.arange(count) % 7 + 1)).astype(dtype)


class Foreign:
    """What CuPy or Numba hand over: only a __cuda_array_interface__ (v3)."""

    def __init__(self, ptr, shape, typestr, strides=None, stream=None, readonly=False):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr,
                                         "data": (ptr, readonly), "strides": strides,
                                         "version": 3, "stream": stream}


def main():
    comm = mpiddp.init()
    c = Check("python_device", comm)
    R, r = comm.size, comm.rank
    rsum = R * (R + 1) // 2
    # the MPI handle ABI the binding chose matches the MPI library libmpiddp was built with
    # (the MPICH build of CI runs this test too: MPI_Comm is an int there, a pointer in Open MPI)
    L = mpiddp._lib_()
    ver = ctypes.create_string_buffer(1024)
    c.expect(L.mpi_library_version(ver, len(ver)) == 0, "ddp_mpi_library_version")
    mpi = ver.value.decode(errors="replace").splitlines()[0] if ver.value else "?"
    c.expect((L.abi.kind == "openmpi") == ("Open MPI" in mpi),
             "MPI handle ABI %s for %s" % (L.abi.kind, mpi))
    c.log("MPI %s, handle ABI %s" % (mpi, L.abi.kind))
    desc = comm.device_describe()
    if not c.expect(desc.startswith("emulated") or desc.startswith("cuda"),
                    "device: %s (run with DDP_DEVICE_EMULATE=1)" % desc):
        return c.finish()
    c.log("device %s" % desc)

    # allreduce, blocking and not, every dtype, sizes across the staging chunking
    for dt in ("float32", "float64", "float16", "int32", "int64", "uint8"):
        for count in (1, 1000, 70001):
            d = comm.to_device(seeded(r, count, dt))
            comm.allreduce(d)
            want = (rsum * (np.arange(count) % 7 + 1)).astype(dt)
            c.expect(np.array_equal(d.numpy(), want), "device allreduce %s x%d" % (dt, count))
    x = comm.to_device(seeded(r, 4097, "float32"))
    out = comm.device_array(4097)
    req = comm.iallreduce(x, op="avg", out=out)
    del out  # the request keeps it alive
    req.wait()
    got = req._keep  # released after wait
    c.expect(got is None, "request drops its buffers after wait")
    out2 = comm.device_array(4097)
    comm.iallreduce(x, op="avg", out=out2).wait()
    res = out2.numpy()
    c.expect(np.array_equal(res, seeded(0, 4097, "float32") * rsum / R) and
             np.array_equal(x.numpy(), seeded(r, 4097, "float32")), "device iallreduce avg out of place")
    everyone = np.empty(4097 * R, np.float32)
    comm.allgather(res, everyone)
    c.expect(all(np.array_equal(everyone[q * 4097:(q + 1) * 4097].view(np.uint32), res.view(np.uint32))
                 for q in range(R)), "identical bits on every rank")

    # ordered after the work queued on the stream: the default stream is held 300 ms by a host
    # function, then an asynchronous copy writes new input; a collective that did not wait for
    # the stream (the host path) would reduce the old contents
    hold = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(lambda arg: time.sleep(0.3))
    launch = L.handle.ddp_launch_host_func
    launch.argtypes = [ctypes.c_void_p, ctypes.c_void_p, type(hold), ctypes.c_void_p]
    d = comm.to_device(np.zeros(1 << 16, np.int32))
    src = seeded(r, 1 << 16, "int32")
    c.expect(launch(comm._handle(), None, hold, None) == 0 and
             L.memcpy_async(comm._handle(), d.ptr, src.ctypes.data, src.nbytes, None) == 0,
             "queue a held stream")
    comm.allreduce(d)
    c.expect(np.array_equal(d.numpy(), seeded(0, 1 << 16, "int32") * rsum),
             "allreduce ordered after the stream's queued copy")

    # broadcast, allgather, reduce-scatter on device buffers
    b = comm.to_device(np.full(33, r, np.int32))
    comm.broadcast(b, root=R - 1)
    c.expect((b.numpy() == R - 1).all(), "device broadcast from the last rank")
    g = comm.device_array(5 * R, "int64")
    comm.iallgather(comm.to_device(np.arange(5, dtype=np.int64) + 10 * r), g).wait()
    c.expect(np.array_equal(g.numpy(), np.concatenate([np.arange(5) + 10 * q for q in range(R)])),
             "device allgather")
    send = comm.to_device(np.tile(seeded(r, 6, "float64"), R))
    recv = comm.device_array(6, "float64")
    comm.reduce_scatter(send, recv)
    c.expect(np.array_equal(recv.numpy(), seeded(0, 6, "float64") * rsum), "device reduce_scatter")

    # a foreign object (CuPy-like) over device memory: only its interface is used
    host = seeded(r, 256, "int32")
    d = comm.to_device(host)
    f = Foreign(d.ptr, (16, 16), "<i4")
    comm.allreduce(f)
    c.expect(np.array_equal(d.numpy(), (rsum * (np.arange(256) % 7 + 1)).astype(np.int32)),
             "allreduce on a __cuda_array_interface__ object")
    comm.allreduce(Foreign(d.ptr, (256,), "<i4", strides=(4,), stream=1))  # legacy default stream

    # bad device inputs raise before any pointer is used
    h = np.zeros(256, np.int32)
    c.raises(ValueError, "host memory posing as device memory", comm.allreduce,
             Foreign(h.ctypes.data, (256,), "<i4"))
    c.raises(ValueError, "host and device buffers in one call", comm.allreduce, d, out=h)
    c.raises(ValueError, "non-contiguous device array", comm.allreduce,
             Foreign(d.ptr, (16, 8), "<i4", strides=(64, 8)))
    c.raises(TypeError, "unsupported device dtype", comm.allreduce, Foreign(d.ptr, (4,), "<c8"))
    c.raises(TypeError, "malformed interface", comm.allreduce, Foreign(d.ptr, None, "<i4"))
    c.raises(ValueError, "read-only device array", comm.allreduce,
             Foreign(d.ptr, (4,), "<i4", readonly=True))
    c.raises(ValueError, "a stream the emulation does not know", comm.allreduce,
             Foreign(d.ptr, (4,), "<i4", stream=12345))
    c.raises(ValueError, "device allgather recv too small", comm.allgather, d,
             comm.device_array(256 * R - 1, "int32"))
    dead = comm.to_device(host)
    ptr = dead.ptr
    dead.free()
    c.raises(ValueError, "freed DeviceArray", comm.allreduce, dead)
    c.raises(ValueError, "interface over freed device memory", comm.allreduce,
             Foreign(ptr, (256,), "<i4"))
    c.raises(TypeError, "DeviceArray dtype", comm.device_array, 4, "complex64")
    c.raises(ValueError, "copy_from size", d.copy_from, np.zeros(3, np.int32))
    comm.barrier()
    y = comm.to_device(np.ones(3, np.int64))
    comm.allreduce(y)
    c.expect((y.numpy() == R).all(), "device allreduce after the failures")

    if torch.cuda.is_available() and desc.startswith("cuda"):
        t = torch.from_numpy(seeded(r, 1000, "float32")).cuda()
        comm.allreduce(t)
        c.expect(torch.equal(t.cpu(), torch.from_numpy(seeded(0, 1000, "float32") * rsum)),
                 "allreduce on a CUDA torch tensor")
    else:
        c.log("CUDA torch tensors not checked: torch %s has no CUDA device here" % torch.__version__)
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())
