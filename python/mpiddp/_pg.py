"""The torch.distributed backend "mpiddp": a ProcessGroup written in Python over mpiddp's
non-blocking collectives, registered when mpiddp.torch is imported.

    import mpiddp.torch
    torch.distributed.init_process_group(backend="mpiddp")   # under mpirun / srun, nothing set

Each collective checks its tensors, posts ddp_i* and returns a Work made from a
torch.futures.Future (torch's _create_work_from_future: the C++ Work that DDP's reducer and
FSDP wait on); one waiter thread per communicator calls ddp_wait (ctypes drops the GIL) in
posting order, which is completion order, and completes the future. Why Python and not a C++
extension: PyTorch calls a Python subclass of ProcessGroup from C++ too (DDP's reducer through
pybind11's trampoline), and per call the Python layer costs microseconds against the
milliseconds of a gradient bucket (bench/peers/torch_pg_cost.py); a Python backend also runs
unchanged on 1.13 and 2.x and needs no compiler or torch headers on the user's side.

Rank and world size are MPI's: the process group must span the whole MPI world in MPI rank
order (torch's rank and world size are checked against it). Without MASTER_ADDR / MASTER_PORT /
RANK / WORLD_SIZE in the environment, the env:// rendezvous that init_process_group runs by
default takes them from MPI (rank 0 picks the address and broadcasts it), for every backend.
"""
import importlib
import os

import torch
import torch.distributed as dist

import mpiddp
from ._buffers import check_tensor
from ._coll import Waiter

try:
    from torch._C._distributed_c10d import _create_work_from_future
except ImportError:  # pragma: no cover - every torch since 1.10 has it
    _create_work_from_future = None

BACKEND = "mpiddp"

# torch.distributed.ReduceOp -> mpiddp's op name; the others (BAND, BOR, BXOR, PREMUL_SUM)
# are refused by name
_OPS = {"SUM": "sum", "AVG": "avg", "PRODUCT": "prod", "MIN": "min", "MAX": "max"}


_REDUCE_OPS = [(n, getattr(dist.ReduceOp, n)) for n in dir(dist.ReduceOp) if n.isupper()]


def _op_name(op):
    for name, member in _REDUCE_OPS:
        try:
            if op == member:
                return name
        except TypeError:  # PREMUL_SUM compares with nothing
            pass
    return str(op)


def _op(opts):
    name = _op_name(opts.reduceOp)
    if name not in _OPS:
        raise ValueError("mpiddp backend: ReduceOp.%s is not supported (%s)"
                         % (name, ", ".join(_OPS)))
    return _OPS[name]


def future(device):
    """A torch future for a result on `device` (a CUDA one records on the current stream when
    set, so later work on it is ordered after the collective)."""
    return torch.futures.Future(devices=[device]) if device.type == "cuda" else \
        torch.futures.Future()


def _tensor(t, name, device=None):
    """The checks of the binding (dtype, dense, contiguous, storage alive), on a detached
    alias: torch.distributed writes into tensors that require grad (outside autograd) as gloo
    does. device: the device the call's other tensors are on."""
    if not isinstance(t, torch.Tensor):
        raise TypeError("%s: expected a torch.Tensor, got %s" % (name, type(t).__name__))
    if device is not None and t.device != device:
        raise ValueError("%s: tensor on %s, the call's other tensors on %s"
                         % (name, t.device, device))
    t = t.detach()
    check_tensor(t, name)
    return t


def _one(tensors, what):
    if len(tensors) != 1:
        raise ValueError("mpiddp backend: %s takes one tensor per process (got %d)"
                         % (what, len(tensors)))
    return tensors[0]


class ProcessGroupMpiddp(dist.ProcessGroup):
    """A ProcessGroup over an mpiddp communicator. Made by init_process_group / new_group
    (backend="mpiddp"); the first one of a process uses mpiddp's default communicator, later
    ones their own (a duplicate of the world)."""

    def __init__(self, rank, size, comm, owned):
        super().__init__(rank, size)
        self._comm, self._owned = comm, owned
        self._waiter = Waiter("mpiddp-pg-waiter")
        _groups.append(self)

    # -- what torch asks of a process group --
    def getBackendName(self):
        return BACKEND

    def name(self):
        return BACKEND

    def _get_backend_name(self):
        return BACKEND

    def _post(self, reqs, finish, device):
        return _create_work_from_future(self._waiter.put(reqs, future(device), finish))

    def _close(self):
        if self._waiter is not None:
            self._waiter.stop()
            self._waiter = None
        if self._owned and not self._comm.closed:
            self._comm.close()

    # -- collectives --
    def allreduce(self, tensors, opts=None):
        t = _tensor(_one(tensors, "allreduce"), "allreduce tensor")
        op = _op(opts) if opts is not None else "sum"
        req = self._comm.iallreduce(t, op=op)
        return self._post([req], lambda: tensors, t.device)

    def allreduce_coalesced(self, tensors, opts=None):
        ts = [_tensor(t, "allreduce_coalesced tensor %d" % i, tensors[0].device)
              for i, t in enumerate(tensors)]
        op = _op(opts) if opts is not None else "sum"
        reqs = [self._comm.iallreduce(t, op=op) for t in ts]
        return self._post(reqs, lambda: tensors, ts[0].device if ts else torch.device("cpu"))

    def broadcast(self, tensors, opts=None):
        t = _tensor(_one(tensors, "broadcast"), "broadcast tensor")
        root = opts.rootRank if opts is not None else 0
        if opts is not None and opts.rootTensor != 0:
            raise ValueError("mpiddp backend: broadcast rootTensor %d (one tensor per process)"
                             % opts.rootTensor)
        req = self._comm.ibroadcast(t, root=root)
        return self._post([req], lambda: tensors, t.device)

    def _allgather_base(self, output, input, opts=None):
        """all_gather_into_tensor: output holds size * input.numel() elements."""
        i = _tensor(input, "all_gather_into_tensor input")
        o = _tensor(output, "all_gather_into_tensor output", i.device)
        self._same_dtype(o, i, "all_gather_into_tensor")
        if o.numel() != i.numel() * self.size():
            raise ValueError("all_gather_into_tensor: output of %d elements for an input of %d "
                             "at world size %d (expected %d)"
                             % (o.numel(), i.numel(), self.size(), i.numel() * self.size()))
        req = self._comm.iallgather(i, o)
        return self._post([req], lambda: [output], i.device)

    def allgather(self, output_tensors, input_tensors, opts=None):
        """all_gather into a list of size tensors: gathered into one buffer, then copied out."""
        outs = _one(output_tensors, "allgather")
        i = _tensor(_one(input_tensors, "allgather"), "all_gather input")
        if len(outs) != self.size():
            raise ValueError("all_gather: %d output tensors at world size %d"
                             % (len(outs), self.size()))
        os_ = [_tensor(o, "all_gather output %d" % k, i.device) for k, o in enumerate(outs)]
        for k, o in enumerate(os_):
            self._same_dtype(o, i, "all_gather output %d" % k)
            if o.numel() != i.numel():
                raise ValueError("all_gather: output %d has %d elements, the input %d"
                                 % (k, o.numel(), i.numel()))
        flat = torch.empty(self.size() * i.numel(), dtype=i.dtype, device=i.device)
        req = self._comm.iallgather(i, flat)

        def finish():
            for k, o in enumerate(os_):
                o.view(-1).copy_(flat[k * i.numel():(k + 1) * i.numel()])
            return output_tensors[0]
        return self._post([req], finish, i.device)

    def _reduce_scatter_base(self, output, input, opts=None):
        """reduce_scatter_tensor: input holds size * output.numel() elements."""
        i = _tensor(input, "reduce_scatter_tensor input")
        o = _tensor(output, "reduce_scatter_tensor output", i.device)
        self._same_dtype(o, i, "reduce_scatter_tensor")
        if i.numel() != o.numel() * self.size():
            raise ValueError("reduce_scatter_tensor: input of %d elements for an output of %d "
                             "at world size %d (expected %d)"
                             % (i.numel(), o.numel(), self.size(), o.numel() * self.size()))
        op = _op(opts) if opts is not None else "sum"
        req = self._comm.ireduce_scatter(i, o, op=op)
        return self._post([req], lambda: [output], i.device)

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        """reduce_scatter from a list of size tensors: concatenated into one buffer first."""
        o = _tensor(_one(output_tensors, "reduce_scatter"), "reduce_scatter output")
        ins = _one(input_tensors, "reduce_scatter")
        if len(ins) != self.size():
            raise ValueError("reduce_scatter: %d input tensors at world size %d"
                             % (len(ins), self.size()))
        for k, x in enumerate(ins):
            x = _tensor(x, "reduce_scatter input %d" % k, o.device)
            self._same_dtype(o, x, "reduce_scatter input %d" % k)
            if x.numel() != o.numel():
                raise ValueError("reduce_scatter: input %d has %d elements, the output %d"
                                 % (k, x.numel(), o.numel()))
        flat = torch.cat([x.detach().reshape(-1) for x in ins])
        op = _op(opts) if opts is not None else "sum"
        req = self._comm.ireduce_scatter(flat, o, op=op)
        return self._post([req], lambda: output_tensors, o.device)

    def barrier(self, opts=None):
        return self._post([self._comm.ibarrier()], lambda: [], torch.device("cpu"))

    @staticmethod
    def _same_dtype(a, b, what):
        if a.dtype != b.dtype:
            raise ValueError("%s: dtype %s, the input %s" % (what, a.dtype, b.dtype))


def _not_implemented(op, why):
    def refuse(self, *args, **kwargs):
        raise NotImplementedError("mpiddp backend: %s is not implemented (%s)" % (op, why))
    refuse.__name__ = op
    return refuse


# torch's later names for the same calls (2.x past 2.9: dist.all_gather_into_tensor calls
# group.all_gather_single, reduce_scatter_tensor group.reduce_scatter_single)
ProcessGroupMpiddp.all_gather_single = ProcessGroupMpiddp._allgather_base
ProcessGroupMpiddp.reduce_scatter_single = ProcessGroupMpiddp._reduce_scatter_base

for _name, _why in (("alltoall", "libmpiddp has no alltoall"),
                    ("alltoall_base", "libmpiddp has no alltoall"),
                    ("all_to_all_single", "libmpiddp has no alltoall"),
                    ("gather_single", "libmpiddp has no gather; use all_gather"),
                    ("all_gather_single_coalesced", "use all_gather_into_tensor per tensor"),
                    ("reduce_scatter_single_coalesced", "use reduce_scatter_tensor per tensor"),
                    ("reduce", "libmpiddp has no rooted reduce; use all_reduce"),
                    ("gather", "libmpiddp has no gather; use all_gather"),
                    ("scatter", "libmpiddp has no scatter"),
                    ("allgather_coalesced", "use all_gather_into_tensor"),
                    ("send", "libmpiddp has no point-to-point calls"),
                    ("recv", "libmpiddp has no point-to-point calls"),
                    ("recv_anysource", "libmpiddp has no point-to-point calls")):
    setattr(ProcessGroupMpiddp, _name, _not_implemented(_name, _why))

_groups = []  # closed before the default communicator is (mpiddp._exit_hooks)


def _close_groups():
    while _groups:
        _groups.pop()._close()


def _create(store, rank, size, timeout):
    """Backend.register_backend's creator: the store of torch's rendezvous is not needed
    (MPI carries everything), rank and size must be MPI's."""
    default = mpiddp.init()
    if size != default.size or rank != default.rank:
        raise ValueError("mpiddp backend: process group rank %d of %d, but MPI has rank %d of %d "
                         "(the group must span the MPI world in rank order; let RANK / "
                         "WORLD_SIZE come from MPI)" % (rank, size, default.rank, default.size))
    if not _groups:
        return ProcessGroupMpiddp(rank, size, default, owned=False)
    return ProcessGroupMpiddp(rank, size, mpiddp.Comm(None, _init=False), owned=True)


# ---- DDP's default gradient_as_bucket_view on this backend ----------------------------------
_ddp_init = None


def _on_mpiddp(pg):
    if pg is None:
        try:
            pg = dist.distributed_c10d._get_default_group()
        except (RuntimeError, ValueError, AttributeError):
            return False
    return isinstance(pg, ProcessGroupMpiddp)


def _ddp_views_default():
    """DistributedDataParallel on an mpiddp process group takes gradient_as_bucket_view=True
    when the caller did not choose (MPIDDP_DDP_BUCKET_VIEW=0 keeps DDP's False): gradients
    are views into DDP's buckets, which spares two copies of every gradient per step (into
    the bucket during backward, out of it after the allreduce; measured on W-DDP at np=2 in
    bench/peers/torch_ddp_hook.py). PyTorch's documented caveat holds: a gradient cannot be
    detach_()ed; zero_grad (either form) is fine."""
    global _ddp_init
    import inspect
    DDP = torch.nn.parallel.DistributedDataParallel
    if _ddp_init is not None:
        return
    _ddp_init = DDP.__init__
    sig = inspect.signature(_ddp_init)

    def __init__(self, *args, **kwargs):
        if os.environ.get("MPIDDP_DDP_BUCKET_VIEW", "1") != "0":
            try:
                given = sig.bind(self, *args, **kwargs).arguments
            except TypeError:
                given = None  # DDP itself reports the bad call
            if given is not None and "gradient_as_bucket_view" not in given and \
                    _on_mpiddp(given.get("process_group")):
                kwargs["gradient_as_bucket_view"] = True
        _ddp_init(self, *args, **kwargs)
    __init__.__doc__ = _ddp_init.__doc__
    __init__.__wrapped__ = _ddp_init
    DDP.__init__ = __init__


# ---- env:// from MPI ------------------------------------------------------------------------
_env_handler = None


def _env_from_mpi(url, timeout=None, **kwargs):
    """torch's env:// rendezvous, with what the environment lacks taken from MPI: RANK,
    WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT (rank 0 chooses, as
    mpiddp.torch.init_process_group does). With all of them set, torch's handler alone."""
    need = [k for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE")
            if not os.environ.get(k)]
    query = url.split("?", 1)[1] if "?" in url else ""
    need = [k for k in need if not (k == "RANK" and "rank=" in query) and
            not (k == "WORLD_SIZE" and "world_size=" in query)]
    if need:
        from .torch import _rendezvous
        comm = mpiddp.init()
        os.environ.setdefault("RANK", str(comm.rank))
        os.environ.setdefault("WORLD_SIZE", str(comm.size))
        os.environ.setdefault("LOCAL_RANK", str(comm.local_rank))
        if "MASTER_ADDR" in need or "MASTER_PORT" in need:
            addr, port = _rendezvous(comm, os.environ.get("MASTER_ADDR"),
                                     os.environ.get("MASTER_PORT"))
            os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = addr, str(port)
            if comm.nodes == 1 and addr.startswith("127."):
                os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    return _env_handler(url, timeout=timeout, **kwargs) if timeout is not None else \
        _env_handler(url, **kwargs)


def register():
    """Registers the backend and the env:// rendezvous from MPI (once; mpiddp.torch calls it)."""
    global _env_handler
    if _create_work_from_future is None:
        raise ImportError("mpiddp backend: this torch has no _create_work_from_future")
    if BACKEND.upper() not in dir(dist.Backend) or getattr(dist.Backend, BACKEND.upper(), None) \
            is None:
        try:
            dist.Backend.register_backend(BACKEND, _create, devices=["cpu", "cuda"])
        except TypeError:  # 1.13: no devices argument
            dist.Backend.register_backend(BACKEND, _create)
    # the module (torch.distributed.rendezvous, the attribute, is its function of that name)
    handlers = importlib.import_module("torch.distributed.rendezvous")._rendezvous_handlers
    if _env_handler is None and handlers.get("env") is not _env_from_mpi:
        _env_handler = handlers["env"]
        handlers["env"] = _env_from_mpi
    _ddp_views_default()
    if _close_groups not in mpiddp._exit_hooks:
        mpiddp._exit_hooks.insert(0, _close_groups)
