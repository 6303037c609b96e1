"""PyTorch on mpiddp: `mpirun -np N python3 train.py` with no torchrun and no variables set by
hand, the torch.distributed backend "mpiddp" (mpiddp/_pg.py; registered on import), and DDP
comm hooks that reduce PyTorch's gradient buckets with mpiddp's collectives.

    import mpiddp.torch
    torch.distributed.init_process_group(backend="mpiddp")   # every collective on mpiddp
    # or: the hooks over another backend
    mpiddp.torch.init_process_group()                    # rank, world size, rendezvous from MPI
    model = torch.nn.parallel.DistributedDataParallel(model)
    model.register_comm_hook(None, mpiddp.torch.allreduce_hook)   # or fp16_hook, bf16_hook

A hook posts a non-blocking allreduce (op avg: a sum, then a division by the world size on
every rank, so every rank ends with the same bits) and returns a torch.futures.Future that one
waiter thread completes when ddp_wait returns (ctypes releases the GIL around the call), so
PyTorch keeps overlapping communication with the rest of the backward pass. The bucket's
tensor (and the compressed copy) stay referenced until the allreduce is complete. Written
against the hook API of PyTorch 1.13 that 2.x keeps: hook(state, GradBucket) -> Future[Tensor],
GradBucket.buffer().
"""
import os
import socket
import threading

import torch
import torch.distributed as dist

import mpiddp
from mpiddp import _hooks, _pg
from mpiddp._coll import Waiter
from mpiddp._pg import ProcessGroupMpiddp

__all__ = ["init_process_group", "allreduce_hook", "fp16_hook", "bf16_hook", "COMM_HOOKS",
           "ProcessGroupMpiddp"]


def _free_port(addr):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def _rendezvous(comm, master_addr, master_port):
    """Rank 0 chooses host:port and broadcasts it over MPI."""
    buf = torch.zeros(256, dtype=torch.uint8)
    if comm.rank == 0:
        addr = master_addr or os.environ.get("MASTER_ADDR")
        if not addr:
            # one node: loopback; several: the address rank 0's host name resolves to
            addr = "127.0.0.1" if comm.nodes == 1 else socket.gethostbyname(socket.gethostname())
        port = int(master_port or os.environ.get("MASTER_PORT") or _free_port(addr))
        text = ("%s:%d" % (addr, port)).encode()
        buf[:len(text)] = torch.frombuffer(bytearray(text), dtype=torch.uint8)
    comm.broadcast(buf, root=0)
    addr, port = bytes(buf.tolist()).rstrip(b"\0").decode().rsplit(":", 1)
    return addr, int(port)


def init_process_group(backend="gloo", mpi_comm=None, master_addr=None, master_port=None,
                       **kwargs):
    """mpiddp.init(mpi_comm), then torch.distributed.init_process_group(backend) with this
    rank, the world size, and a TCP rendezvous that rank 0 chooses (MASTER_ADDR/MASTER_PORT or
    the arguments if set; else 127.0.0.1 on one node, rank 0's host address on several, and a
    free port) and broadcasts over MPI. Works under mpirun, mpiexec, srun and inside sbatch.
    On one node gloo is kept on loopback (GLOO_SOCKET_IFNAME=lo unless set). kwargs go to
    torch.distributed.init_process_group (timeout, ...). Returns the mpiddp communicator."""
    comm = mpiddp.init(mpi_comm)
    if dist.is_initialized():
        if dist.get_world_size() != comm.size or dist.get_rank() != comm.rank:
            raise ValueError("torch.distributed is already initialised with rank %d of %d, "
                             "mpiddp has rank %d of %d" % (dist.get_rank(), dist.get_world_size(),
                                                           comm.rank, comm.size))
        return comm
    addr, port = _rendezvous(comm, master_addr, master_port)
    if comm.nodes == 1 and addr.startswith("127.") and backend == "gloo":
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group(backend, init_method="tcp://%s:%d" % (addr, port), rank=comm.rank,
                            world_size=comm.size, **kwargs)
    return comm


_waiter = None
_waiter_lock = threading.Lock()


def _submit(req, finish, device):
    global _waiter
    with _waiter_lock:
        if _waiter is None:
            _waiter = Waiter("mpiddp-hook-waiter")
            mpiddp._exit_hooks.append(_stop_waiter)
        # a CUDA bucket: the future records on its device's current stream when set, so
        # DDP's later work is ordered after the collective (which the caller's stream waits for)
        return _waiter.put([req], _pg.future(device), finish)


def _stop_waiter():
    global _waiter
    with _waiter_lock:
        if _waiter is not None:
            _waiter.stop()
            _waiter = None


def _comm(state):
    if state is None:
        return mpiddp.default_comm()
    if isinstance(state, mpiddp.Comm):
        return state
    raise TypeError("hook state: expected None or an mpiddp.Comm, got %s" % type(state).__name__)


def allreduce_hook(state, bucket):
    """Averages the bucket in place with mpiddp's non-blocking allreduce (dtype kept)."""
    buf = bucket.buffer()
    req = _comm(state).iallreduce(buf, op="avg")
    return _submit(req, lambda: buf, buf.device)


def _compress_hook(state, bucket, hook):
    buf = bucket.buffer()
    dtype = getattr(torch, _hooks.wire_dtype(hook))
    wire = buf.to(dtype)
    req = _comm(state).iallreduce(wire, op="avg")

    def finish():
        buf.copy_(wire)
        return buf
    return _submit(req, finish, buf.device)


def fp16_hook(state, bucket):
    """Like allreduce_hook with the bucket sent as float16 (half the bytes; mpiddp reduces
    f16 in f32 and rounds once per step); the result is written back in the bucket's dtype."""
    return _compress_hook(state, bucket, _hooks.FP16)


def bf16_hook(state, bucket):
    """As fp16_hook with bfloat16 (f32's range, 8 bits of mantissa). Not named
    bf16_compress_hook: DDP refuses a hook of that name without CUDA 11 and NCCL 2.10."""
    return _compress_hook(state, bucket, _hooks.BF16)


# The comm hooks by name: "allreduce" (the bucket's dtype) and the compressing ones under the
# library's hook names (mpiddp._hooks).
COMM_HOOKS = {"allreduce": allreduce_hook, _hooks.hook_name(_hooks.FP16): fp16_hook,
              _hooks.hook_name(_hooks.BF16): bf16_hook}

_pg.register()
