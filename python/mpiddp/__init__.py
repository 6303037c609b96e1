"""mpiddp for Python: mpiddp's communicator, collectives, node-shared buffers and sampler over
the installed libmpiddp, through ctypes (pure Python, nothing to compile).

    import mpiddp
    comm = mpiddp.init()                 # MPI_Init_thread if nobody did (adopts mpi4py's MPI)
    comm.allreduce(x, op="avg")          # x: contiguous CPU NumPy array or torch tensor, in place
    req = comm.iallreduce(x); ...; req.wait()

Buffers go to C by their data pointer (zero copy). Their type, contiguity and liveness are
checked here before any pointer reaches C: a bad buffer raises TypeError / ValueError, a
failing call raises MpiddpError carrying ddp_last_error()'s message. mpiddp.torch adds
init_process_group() and the DDP comm hooks.
"""
import atexit
import ctypes
import sys
import threading

from . import _lib

__all__ = ["MpiddpError", "Comm", "Request", "SharedBuffer", "DistributedSampler", "init",
           "finalize", "default_comm", "library_path", "version"]

_L = None
_L_lock = threading.Lock()


def _lib_():
    global _L
    with _L_lock:
        if _L is None:
            _L = _lib.Lib()
        return _L


class MpiddpError(RuntimeError):
    """A libmpiddp call failed. `status` is the ddp_status_t code, `name` its name
    ("DDP_EINVAL"), `detail` ddp_last_error()'s message."""

    def __init__(self, func, status, detail):
        self.func, self.status, self.detail = func, status, detail
        self.name = _lib.STATUS_NAMES.get(status, str(status))
        super().__init__("%s: %s (%s)%s" % (func, self.name, _lib_().strerror(status).decode(),
                                            ": " + detail if detail else ""))


def _check(func, st):
    if st != 0:
        raise MpiddpError(func, st, _lib_().last_error().decode(errors="replace"))


def library_path():
    """The path of the libmpiddp this package loaded."""
    return _lib_().path


def version():
    return _lib_().version().decode()


# ---- buffers -------------------------------------------------------------------------------
def _np():
    return sys.modules.get("numpy")


def _torch():
    return sys.modules.get("torch")


_NP_DTYPES = {"float32": _lib.F32, "float64": _lib.F64, "float16": _lib.F16, "int32": _lib.I32,
              "int64": _lib.I64, "uint8": _lib.U8}
_TORCH_DTYPES = {"torch.float32": _lib.F32, "torch.float64": _lib.F64, "torch.float16": _lib.F16,
                 "torch.bfloat16": _lib.BF16, "torch.int32": _lib.I32, "torch.int64": _lib.I64,
                 "torch.uint8": _lib.U8}


class _Buf:
    """A checked buffer: pointer, element count, dtype; `keep` holds what keeps it alive."""
    __slots__ = ("ptr", "count", "dtype", "nbytes", "keep")

    def __init__(self, ptr, count, dtype, nbytes, keep):
        self.ptr, self.count, self.dtype, self.nbytes, self.keep = ptr, count, dtype, nbytes, keep


def _shared_owner(obj):
    """The SharedBuffer an array or tensor was made from, if any."""
    o = getattr(obj, "_mpiddp_shared", None)
    if o is not None:
        return o
    np = _np()
    while np is not None and isinstance(obj, np.ndarray):
        obj = obj.base
        o = getattr(obj, "_mpiddp_shared", None)
        if o is not None:
            return o
    return None


def buffer(x, name="buffer", writable=True):
    """Checks a NumPy array or torch tensor and returns its _Buf. Raises TypeError (not an
    array, unsupported dtype, device memory) or ValueError (non-contiguous, read-only,
    freed storage, requires grad)."""
    owner = _shared_owner(x)
    if owner is not None and owner.freed:
        raise ValueError("%s: the node-shared buffer it views was freed (SharedBuffer.free)" % name)
    np, torch = _np(), _torch()
    if torch is not None and isinstance(x, torch.Tensor):
        dt = _TORCH_DTYPES.get(str(x.dtype))
        if dt is None:
            raise TypeError("%s: torch dtype %s is not supported (float32, float64, float16, "
                            "bfloat16, int32, int64, uint8)" % (name, x.dtype))
        if x.device.type != "cpu":
            raise TypeError("%s: tensor on %s: this binding passes CPU tensors only" % (name, x.device))
        if x.layout != torch.strided:
            raise TypeError("%s: %s tensor: only dense (strided) tensors" % (name, x.layout))
        if not x.is_contiguous():
            raise ValueError("%s: tensor of shape %s with strides %s is not contiguous (use "
                             ".contiguous())" % (name, tuple(x.shape), x.stride()))
        if writable and x.requires_grad:
            raise ValueError("%s: tensor requires grad: a collective writing into it would bypass "
                             "autograd (pass t.detach() or t.grad)" % name)
        esize = x.element_size()
        nbytes = x.numel() * esize
        if nbytes:
            st = x.untyped_storage() if hasattr(x, "untyped_storage") else x.storage()
            have = st.nbytes() if hasattr(st, "nbytes") else st.size() * st.element_size()
            if x.data_ptr() == 0 or have < (x.storage_offset() * esize + nbytes):
                raise ValueError("%s: tensor storage was freed or shrunk (%d bytes for %d needed)"
                                 % (name, have, x.storage_offset() * esize + nbytes))
        return _Buf(x.data_ptr(), x.numel(), dt, nbytes, x)
    if np is not None and isinstance(x, np.ndarray):
        dt = _NP_DTYPES.get(x.dtype.name)
        if dt is None or not x.dtype.isnative:
            raise TypeError("%s: NumPy dtype %s is not supported (float32, float64, float16, "
                            "int32, int64, uint8, native byte order)" % (name, x.dtype))
        if not x.flags.c_contiguous:
            raise ValueError("%s: array of shape %s with strides %s is not C-contiguous (use "
                             "numpy.ascontiguousarray)" % (name, x.shape, x.strides))
        if writable and not x.flags.writeable:
            raise ValueError("%s: array is read-only" % name)
        if not x.flags.aligned:
            raise ValueError("%s: array is not aligned" % name)
        return _Buf(x.ctypes.data, x.size, dt, x.nbytes, x)
    raise TypeError("%s: expected a NumPy array or a torch tensor, got %s"
                    % (name, type(x).__name__))


def _op(op):
    try:
        return _lib.OPS[op]
    except (KeyError, TypeError):
        raise ValueError("op %r: expected one of %s" % (op, ", ".join(_lib.OPS))) from None


# ---- requests ------------------------------------------------------------------------------
class Request:
    """A non-blocking collective in flight. The buffers it uses are kept alive (also by the
    communicator, so dropping the Request is safe) until wait() or test() saw it complete."""

    def __init__(self, comm, func, keep):
        self._comm, self._func, self._keep = comm, func, keep
        self._h = ctypes.c_void_p()
        self._status = None

    def wait(self):
        """Blocks (without the GIL) until done; raises MpiddpError if the collective failed."""
        if self._status is None:
            self._status = _lib_().wait(ctypes.byref(self._h))
            self._done()
        _check(self._func, self._status)

    def test(self):
        """True once complete (then like wait(): raises if it failed)."""
        if self._status is None:
            done = ctypes.c_int(0)
            st = _lib_().test(ctypes.byref(self._h), ctypes.byref(done))
            if not done.value and st == 0:
                return False
            self._status = st
            self._done()
        _check(self._func, self._status)
        return True

    def _done(self):
        self._comm._pending.discard(self)
        self._keep = None


# ---- node-shared buffers -------------------------------------------------------------------
class SharedBuffer:
    """`bytes` of node-shared memory from ddp_alloc (collective over the node). numpy(dtype,
    shape) and torch(dtype, shape) return views; free() is collective too. A view used in a
    collective after free() raises ValueError (reading it yourself is not checked)."""

    def __init__(self, comm, nbytes):
        self.comm, self.nbytes, self.freed = comm, int(nbytes), False
        self._ptr = ctypes.c_void_p()
        _check("ddp_alloc", _lib_().alloc(comm._handle(), self.nbytes, ctypes.byref(self._ptr)))
        # a ctypes array over the bytes, marked with its owner: NumPy views keep it as .base
        raw = type("_SharedBytes", (ctypes.c_uint8 * self.nbytes,), {})
        self._mem = raw.from_address(self._ptr.value)
        self._mem._mpiddp_shared = self

    @property
    def ptr(self):
        return self._ptr.value

    def numpy(self, dtype="float32", shape=None):
        import numpy as np
        if self.freed:
            raise ValueError("SharedBuffer was freed")
        dt = np.dtype(dtype)
        count = self.nbytes // dt.itemsize
        arr = np.frombuffer(self._mem, dtype=dt, count=count)
        if shape is not None:
            arr = arr.reshape(shape)
        return arr

    def torch(self, dtype=None, shape=None):
        import torch
        if self.freed:
            raise ValueError("SharedBuffer was freed")
        dtype = dtype or torch.float32
        esize = torch.tensor([], dtype=dtype).element_size()
        t = torch.frombuffer(self._mem, dtype=dtype, count=self.nbytes // esize)
        if shape is not None:
            t = t.view(shape)
        t._mpiddp_shared = self
        return t

    def free(self):
        """Collective over the node, like the allocation."""
        if not self.freed:
            self.freed = True
            self._mem = None
            _check("ddp_free", _lib_().free(self.comm._handle(), self._ptr))


# ---- communicator --------------------------------------------------------------------------
class Comm:
    """An mpiddp communicator (ddp_comm_t *). Created by mpiddp.init() (the world, or an
    mpi4py communicator) and closed by finalize() (or at interpreter exit)."""

    def __init__(self, mpi_comm=None, _init=True):
        L = _lib_()
        self._h = ctypes.c_void_p()
        self._pending = set()
        self._init = _init
        base = self._mpi_handle(mpi_comm)
        if _init:
            _check("ddp_init", L.init(None, None, base, ctypes.byref(self._h)))
        else:
            _check("ddp_comm_create", L.comm_create(base, ctypes.byref(self._h)))
        info = _lib.CommInfo()
        _check("ddp_comm_info", L.comm_info(self._h, ctypes.byref(info)))
        self.rank, self.size = info.rank, info.size
        self.local_rank, self.local_size = info.local_rank, info.local_size
        self.node, self.nodes = info.node, info.nodes
        self.host = info.host.decode(errors="replace")
        self.mpi_owned = bool(info.mpi_owned)
        self.thread_level = info.thread_level

    @staticmethod
    def _mpi_handle(mpi_comm):
        """MPI_COMM_NULL (the world) or the handle of an mpi4py communicator, as the ctypes
        value of this MPI's MPI_Comm."""
        L = _lib_()
        if mpi_comm is None:
            return L.abi.comm_null
        try:
            from mpi4py import MPI
        except ImportError:
            raise TypeError("mpi_comm: expected an mpi4py communicator (mpi4py is not "
                            "importable)") from None
        if not isinstance(mpi_comm, MPI.Comm):
            raise TypeError("mpi_comm: expected an mpi4py MPI.Comm, got %s" % type(mpi_comm).__name__)
        if mpi_comm == MPI.COMM_NULL:
            raise ValueError("mpi_comm: MPI.COMM_NULL (pass None for the world)")
        # Same MPI library in this process (not another one mpi4py was built against): its
        # MPI_COMM_NULL is the very handle libmpiddp's MPI uses.
        if MPI._handleof(MPI.COMM_NULL) != L.abi.comm_null:
            raise ValueError("mpi_comm: mpi4py uses another MPI library than libmpiddp (%s); "
                             "build mpi4py against libmpiddp's MPI"
                             % MPI.Get_library_version().splitlines()[0])
        return MPI._handleof(mpi_comm)

    def _handle(self):
        if not self._h.value:
            raise ValueError("communicator is closed")
        return self._h

    @property
    def closed(self):
        return not self._h.value

    def info(self):
        """ddp_comm_info as a dict."""
        info = _lib.CommInfo()
        _check("ddp_comm_info", _lib_().comm_info(self._handle(), ctypes.byref(info)))
        d = {n: getattr(info, n) for n, _ in info._fields_}
        d["host"], d["cuda_aware_reason"] = info.host.decode(), info.cuda_aware_reason.decode()
        return d

    # -- collectives. out=None: in place in `buf`. They return the result buffer. --
    def _args_reduce(self, buf, out):
        if out is None:
            b = buffer(buf, "buf")
            return b, _lib.IN_PLACE, b
        send = buffer(buf, "buf", writable=False)
        o = buffer(out, "out")
        if o.dtype != send.dtype or o.count != send.count:
            raise ValueError("out: %d elements of dtype %d for an input of %d of dtype %d"
                             % (o.count, o.dtype, send.count, send.dtype))
        return send, send.ptr, o

    def allreduce(self, buf, op="sum", out=None):
        _op(op)
        send, sp, recv = self._args_reduce(buf, out)
        _check("ddp_allreduce", _lib_().allreduce(self._handle(), sp, recv.ptr, recv.count,
                                                  recv.dtype, _op(op), None))
        return recv.keep

    def iallreduce(self, buf, op="sum", out=None):
        _op(op)
        send, sp, recv = self._args_reduce(buf, out)
        return self._post("ddp_iallreduce", (send, recv), _lib_().iallreduce, self._handle(), sp,
                          recv.ptr, recv.count, recv.dtype, _op(op), None)

    def broadcast(self, buf, root=0):
        b = buffer(buf, "buf")
        self._check_root(root)
        _check("ddp_broadcast", _lib_().broadcast(self._handle(), b.ptr, b.count, b.dtype,
                                                  root, None))
        return buf

    def ibroadcast(self, buf, root=0):
        b = buffer(buf, "buf")
        self._check_root(root)
        return self._post("ddp_ibroadcast", (b,), _lib_().ibroadcast, self._handle(), b.ptr,
                          b.count, b.dtype, root, None)

    def _args_gather(self, send, recv):
        s = buffer(send, "send", writable=False)
        r = buffer(recv, "recv")
        if r.dtype != s.dtype or r.count != s.count * self.size:
            raise ValueError("recv: %d elements of dtype %d, expected size*%d = %d of dtype %d"
                             % (r.count, r.dtype, s.count, s.count * self.size, s.dtype))
        return s, r

    def allgather(self, send, recv):
        """recv (size * len(send) elements) gets every rank's `send`, in rank order."""
        s, r = self._args_gather(send, recv)
        _check("ddp_allgather", _lib_().allgather(self._handle(), s.ptr, r.ptr, s.count, s.dtype,
                                                  None))
        return recv

    def iallgather(self, send, recv):
        s, r = self._args_gather(send, recv)
        return self._post("ddp_iallgather", (s, r), _lib_().iallgather, self._handle(), s.ptr,
                          r.ptr, s.count, s.dtype, None)

    def reduce_scatter(self, send, recv, op="sum"):
        """recv (len(send) / size elements) gets this rank's block of the reduction."""
        r, s = self._args_gather(recv, send)
        _check("ddp_reduce_scatter", _lib_().reduce_scatter(self._handle(), s.ptr, r.ptr, r.count,
                                                            r.dtype, _op(op), None))
        return recv

    def ireduce_scatter(self, send, recv, op="sum"):
        r, s = self._args_gather(recv, send)
        return self._post("ddp_ireduce_scatter", (s, r), _lib_().ireduce_scatter, self._handle(),
                          s.ptr, r.ptr, r.count, r.dtype, _op(op), None)

    def barrier(self):
        _check("ddp_barrier", _lib_().barrier(self._handle()))

    def ibarrier(self):
        return self._post("ddp_ibarrier", (), _lib_().ibarrier, self._handle())

    def alloc(self, nbytes):
        """Node-shared memory (ddp_alloc); collective over the node."""
        if not isinstance(nbytes, int) or nbytes <= 0:
            raise ValueError("nbytes %r: expected a positive int" % (nbytes,))
        return SharedBuffer(self, nbytes)

    def _check_root(self, root):
        if not isinstance(root, int) or not 0 <= root < self.size:
            raise ValueError("root %r: expected 0 <= root < %d" % (root, self.size))

    def _post(self, func, keep, cfun, *args):
        req = Request(self, func, keep)
        _check(func, cfun(*args, ctypes.byref(req._h)))
        self._pending.add(req)
        return req

    def close(self):
        """Waits for the collectives still in flight, then ddp_finalize (the communicator of
        init(); also finalises MPI when it initialised it) or ddp_comm_destroy. Collective."""
        if not self._h.value:
            return
        for r in list(self._pending):
            try:
                r.wait()
            except MpiddpError:
                pass
        L = _lib_()
        if self._init:
            _check("ddp_finalize", L.finalize(ctypes.byref(self._h)))
        else:
            _check("ddp_comm_destroy", L.comm_destroy(ctypes.byref(self._h)))

    def split(self, mpi_comm):
        """Another mpiddp communicator over an mpi4py communicator (ddp_comm_create)."""
        return Comm(mpi_comm, _init=False)


# ---- the process's default communicator ----------------------------------------------------
_default = None
_default_lock = threading.Lock()
_exit_hooks = []  # run before the default communicator closes (mpiddp.torch's waiter thread)


def init(mpi_comm=None):
    """Initialises mpiddp once per process and returns the default communicator (later calls
    return the same one). MPI is initialised with MPI_THREAD_MULTIPLE unless someone (mpi4py,
    on import) already did; then it is adopted and left for its owner to finalise. mpi_comm:
    an mpi4py communicator to work over instead of the world."""
    global _default
    with _default_lock:
        if _default is None or _default.closed:
            _default = Comm(mpi_comm)
            atexit.register(finalize)
        return _default


def default_comm():
    """The communicator of init(); ValueError if init() was not called."""
    if _default is None or _default.closed:
        raise ValueError("mpiddp.init() has not been called (or mpiddp was finalised)")
    return _default


def finalize():
    """Closes the default communicator (collective); registered with atexit by init()."""
    global _default
    for h in list(_exit_hooks):
        h()
    with _default_lock:
        if _default is not None:
            _default.close()


from .sampler import DistributedSampler  # noqa: E402
