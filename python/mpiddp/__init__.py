"""mpiddp for Python: mpiddp's communicator, collectives, node-shared buffers and sampler over
the installed libmpiddp, through ctypes (pure Python, nothing to compile).

    import mpiddp
    comm = mpiddp.init()                 # MPI_Init_thread if nobody did (adopts mpi4py's MPI)
    comm.allreduce(x, op="avg")          # x: contiguous NumPy array or torch tensor, in place
    req = comm.iallreduce(x); ...; req.wait()

Buffers go to C by their data pointer (zero copy). Their type, contiguity and liveness are
checked here before any pointer reaches C: a bad buffer raises TypeError / ValueError, a
failing call raises MpiddpError carrying ddp_last_error()'s message. mpiddp.torch adds
init_process_group() and the DDP comm hooks.

Device buffers (CUDA torch tensors, any object with __cuda_array_interface__ such as CuPy or
Numba arrays, and mpiddp's own DeviceArray) go to the device collectives (ddp_coll_opts_t.mem =
DDP_MEM_CUDA), ordered after the work queued on their stream (torch's current stream, or the
interface's "stream"); the library's device must be available (a GPU, or DDP_DEVICE_EMULATE=1,
where Comm.device_array gives emulated device memory) and every buffer of a call must live on
the same side.
"""
import atexit
import ctypes
import sys
import threading

from . import _lib

__all__ = ["MpiddpError", "Comm", "Request", "SharedBuffer", "DeviceArray", "DistributedSampler", "init",
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
    """A checked buffer: pointer, element count, dtype, where it lives (mem: _lib.MEM_HOST or
    MEM_CUDA) and the stream its data is ordered on (device only; None = default stream);
    `keep` holds what keeps it alive."""
    __slots__ = ("ptr", "count", "dtype", "nbytes", "keep", "mem", "stream")

    def __init__(self, ptr, count, dtype, nbytes, keep, mem=_lib.MEM_HOST, stream=None):
        self.ptr, self.count, self.dtype, self.nbytes, self.keep = ptr, count, dtype, nbytes, keep
        self.mem, self.stream = mem, stream


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


def buffer(x, name="buffer", writable=True, comm=None):
    """Checks a NumPy array, torch tensor or device array and returns its _Buf. Raises
    TypeError (not an array, unsupported dtype, device memory without a device) or ValueError
    (non-contiguous, read-only, freed storage, requires grad, not this device's memory).
    comm: the communicator the buffer is for (device buffers are checked against its device;
    default: the one of init())."""
    torch = _torch()
    if isinstance(x, DeviceArray) or (torch is not None and isinstance(x, torch.Tensor) and
                                      x.device.type == "cuda") or (
            hasattr(x, "__cuda_array_interface__") and not (
                torch is not None and isinstance(x, torch.Tensor))):
        return _device_buffer(x, name, writable, comm)
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
            raise TypeError("%s: tensor on %s: mpiddp passes CPU and CUDA tensors only"
                            % (name, x.device))
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
    raise TypeError("%s: expected a NumPy array, a torch tensor or a device array, got %s"
                    % (name, type(x).__name__))


# __cuda_array_interface__ typestr -> dtype (little-endian, or no byte order for one byte)
_CAI_DTYPES = {"<f4": _lib.F32, "<f8": _lib.F64, "<f2": _lib.F16, "<i4": _lib.I32,
               "<i8": _lib.I64, "|u1": _lib.U8, "<u1": _lib.U8}
_ESIZE = {_lib.F32: 4, _lib.F64: 8, _lib.F16: 2, _lib.BF16: 2, _lib.I32: 4, _lib.I64: 8,
          _lib.U8: 1}


def _device_buffer(x, name, writable, comm):
    """A device buffer: a DeviceArray, a CUDA torch tensor or a __cuda_array_interface__
    object, checked against the communicator's device before its pointer is used."""
    comm = comm if comm is not None else default_comm()
    L = _lib_()
    kind = L.device_kind(comm._handle())
    if kind == _lib.DEVICE_NONE:
        raise TypeError("%s: device memory (%s), but this communicator has no device: %s"
                        % (name, type(x).__name__, comm.device_describe()))
    torch = _torch()
    stream = None
    if isinstance(x, DeviceArray):
        if x.freed:
            raise ValueError("%s: DeviceArray was freed" % name)
        if x.comm is not comm:
            raise ValueError("%s: DeviceArray of another communicator" % name)
        ptr, count, dt, keep = x.ptr, x.count, x.dtype, x
    elif torch is not None and isinstance(x, torch.Tensor):
        dt = _TORCH_DTYPES.get(str(x.dtype))
        if dt is None:
            raise TypeError("%s: torch dtype %s is not supported (float32, float64, float16, "
                            "bfloat16, int32, int64, uint8)" % (name, x.dtype))
        if x.layout != torch.strided or not x.is_contiguous():
            raise ValueError("%s: CUDA tensor of shape %s with strides %s is not dense and "
                             "contiguous (use .contiguous())" % (name, tuple(x.shape), x.stride()))
        if writable and x.requires_grad:
            raise ValueError("%s: tensor requires grad: a collective writing into it would bypass "
                             "autograd (pass t.detach() or t.grad)" % name)
        if kind != _lib.DEVICE_CUDA:
            raise TypeError("%s: CUDA tensor, but this communicator's device is %s"
                            % (name, comm.device_describe()))
        ptr, count, keep = x.data_ptr(), x.numel(), x
        stream = torch.cuda.current_stream(x.device).cuda_stream or None
    else:
        cai = x.__cuda_array_interface__
        try:
            shape, typestr, (ptr, readonly) = tuple(cai["shape"]), cai["typestr"], cai["data"]
        except (KeyError, TypeError, ValueError):
            raise TypeError("%s: malformed __cuda_array_interface__ %r" % (name, cai)) from None
        dt = _CAI_DTYPES.get(typestr)
        if dt is None:
            raise TypeError("%s: device dtype %s is not supported (%s)"
                            % (name, typestr, ", ".join(sorted(_CAI_DTYPES))))
        count = 1
        for n in shape:
            count *= int(n)
        strides = cai.get("strides")
        if strides is not None:
            want, step = [], _ESIZE[dt]
            for n in reversed(shape):
                want.insert(0, step)
                step *= int(n)
            if count > 1 and tuple(strides) != tuple(want):
                raise ValueError("%s: device array of shape %s with strides %s is not "
                                 "C-contiguous" % (name, shape, tuple(strides)))
        if writable and readonly:
            raise ValueError("%s: device array is read-only" % name)
        if cai.get("mask") is not None:
            raise ValueError("%s: masked device arrays are not supported" % name)
        s = cai.get("stream") if cai.get("version", 0) >= 3 else None
        if s not in (None, 1, 2):
            if kind != _lib.DEVICE_CUDA:
                raise ValueError("%s: stream %r: under the emulated device only the default "
                                 "stream (None, 1, 2) is known" % (name, s))
            stream = int(s)
        elif s == 2 and kind == _lib.DEVICE_CUDA:
            stream = 2  # cudaStreamPerThread
        keep = x
    nbytes = count * _ESIZE[dt]
    if nbytes and (not ptr or not L.device_is_device_ptr(comm._handle(), ptr)):
        raise ValueError("%s: pointer 0x%x is not device memory of this communicator's device "
                         "(%s)" % (name, ptr or 0, comm.device_describe()))
    return _Buf(ptr, count, dt, nbytes, keep, _lib.MEM_CUDA, stream)


def _opts(bufs):
    """NULL options for host buffers; for device buffers a CollOpts with mem = MEM_CUDA and
    their stream. Every buffer of one call must live on the same side, on one stream."""
    mems = {b.mem for b in bufs}
    if len(mems) > 1:
        raise ValueError("buffers on the host and on the device in one call: move them to one "
                         "side")
    if mems != {_lib.MEM_CUDA}:
        return None
    streams = {b.stream for b in bufs}
    if len(streams) > 1:
        raise ValueError("device buffers of one call on different streams %s"
                         % sorted(streams, key=str))
    o = _lib.CollOpts()
    _check("ddp_coll_opts_default", _lib_().coll_opts_default(ctypes.byref(o)))
    o.mem, o.stream = _lib.MEM_CUDA, streams.pop()
    return o


def _byref(o):
    return None if o is None else ctypes.byref(o)


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


# ---- device memory -------------------------------------------------------------------------
_DEV_DTYPES = {"float32": (_lib.F32, "<f4"), "float64": (_lib.F64, "<f8"),
               "float16": (_lib.F16, "<f2"), "int32": (_lib.I32, "<i4"),
               "int64": (_lib.I64, "<i8"), "uint8": (_lib.U8, "|u1")}


class DeviceArray:
    """A C-contiguous array in the communicator's device memory (ddp_device_malloc), usable
    in every collective and by CuPy / Numba / torch through __cuda_array_interface__. Copies
    to and from NumPy are blocking (default stream). free() (or garbage collection) releases
    it; a freed array in a collective raises ValueError."""

    def __init__(self, comm, shape, dtype="float32"):
        import numpy as np
        self.shape = (shape,) if isinstance(shape, int) else tuple(int(n) for n in shape)
        if any(n < 0 for n in self.shape):
            raise ValueError("shape %r: negative extent" % (shape,))
        self.np_dtype = np.dtype(dtype)
        if self.np_dtype.name not in _DEV_DTYPES or not self.np_dtype.isnative:
            raise TypeError("dtype %s is not supported (%s, native byte order)"
                            % (self.np_dtype, ", ".join(_DEV_DTYPES)))
        self.dtype, self._typestr = _DEV_DTYPES[self.np_dtype.name]
        self.count = 1
        for n in self.shape:
            self.count *= n
        self.nbytes = self.count * self.np_dtype.itemsize
        self.comm, self.freed = comm, True
        self._ptr = ctypes.c_void_p()
        _check("ddp_device_malloc", _lib_().device_malloc(comm._handle(), max(self.nbytes, 1),
                                                          ctypes.byref(self._ptr)))
        self.freed = False

    @property
    def ptr(self):
        return self._ptr.value

    @property
    def __cuda_array_interface__(self):
        if self.freed:
            raise ValueError("DeviceArray was freed")
        return {"shape": self.shape, "typestr": self._typestr, "data": (self.ptr, False),
                "strides": None, "version": 3, "stream": None}

    def _copy(self, dst, src):
        L = _lib_()
        h = self.comm._handle()
        _check("ddp_memcpy_async", L.memcpy_async(h, dst, src, self.nbytes, None))
        _check("ddp_stream_synchronize", L.stream_synchronize(h, None))

    def copy_from(self, array):
        """Copies a NumPy array of the same element count and dtype in; returns self."""
        import numpy as np
        if self.freed:
            raise ValueError("DeviceArray was freed")
        a = np.ascontiguousarray(array)
        if a.dtype != self.np_dtype or a.size != self.count:
            raise ValueError("array of %d %s for a DeviceArray of %d %s"
                             % (a.size, a.dtype, self.count, self.np_dtype))
        if self.nbytes:
            self._copy(self.ptr, a.ctypes.data)
        return self

    def numpy(self):
        """A NumPy copy of the contents."""
        import numpy as np
        if self.freed:
            raise ValueError("DeviceArray was freed")
        a = np.empty(self.shape, dtype=self.np_dtype)
        if self.nbytes:
            self._copy(a.ctypes.data, self.ptr)
        return a

    def free(self):
        """Releases the memory (a no-op once freed or after the communicator closed, which
        released it)."""
        if not self.freed:
            self.freed = True
            if not self.comm.closed:
                _check("ddp_device_free", _lib_().device_free(self.comm._handle(), self._ptr))

    def __del__(self):
        try:
            self.free()
        except Exception:
            pass


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
    def _buf(self, x, name, writable=True):
        return buffer(x, name, writable, comm=self)

    def _args_reduce(self, buf, out):
        if out is None:
            b = self._buf(buf, "buf")
            return b, _lib.IN_PLACE, b, _opts((b,))
        send = self._buf(buf, "buf", writable=False)
        o = self._buf(out, "out")
        if o.dtype != send.dtype or o.count != send.count:
            raise ValueError("out: %d elements of dtype %d for an input of %d of dtype %d"
                             % (o.count, o.dtype, send.count, send.dtype))
        return send, send.ptr, o, _opts((send, o))

    def allreduce(self, buf, op="sum", out=None):
        _op(op)
        send, sp, recv, opts = self._args_reduce(buf, out)
        _check("ddp_allreduce", _lib_().allreduce(self._handle(), sp, recv.ptr, recv.count,
                                                  recv.dtype, _op(op), _byref(opts)))
        return recv.keep

    def iallreduce(self, buf, op="sum", out=None):
        _op(op)
        send, sp, recv, opts = self._args_reduce(buf, out)
        return self._post("ddp_iallreduce", (send, recv, opts), _lib_().iallreduce,
                          self._handle(), sp, recv.ptr, recv.count, recv.dtype, _op(op),
                          _byref(opts))

    def broadcast(self, buf, root=0):
        b = self._buf(buf, "buf")
        self._check_root(root)
        opts = _opts((b,))
        _check("ddp_broadcast", _lib_().broadcast(self._handle(), b.ptr, b.count, b.dtype,
                                                  root, _byref(opts)))
        return buf

    def ibroadcast(self, buf, root=0):
        b = self._buf(buf, "buf")
        self._check_root(root)
        opts = _opts((b,))
        return self._post("ddp_ibroadcast", (b, opts), _lib_().ibroadcast, self._handle(), b.ptr,
                          b.count, b.dtype, root, _byref(opts))

    def _args_blocks(self, send, recv, gather):
        """allgather (gather=True: recv holds size * len(send)) or reduce-scatter (send holds
        size * len(recv)): recv is written, send only read."""
        s = self._buf(send, "send", writable=False)
        r = self._buf(recv, "recv")
        small, big, name = (s, r, "recv") if gather else (r, s, "send")
        if r.dtype != s.dtype or big.count != small.count * self.size:
            raise ValueError("%s: %d elements of dtype %d, expected size*%d = %d of dtype %d"
                             % (name, big.count, big.dtype, small.count, small.count * self.size,
                                small.dtype))
        return s, r, _opts((s, r))

    def allgather(self, send, recv):
        """recv (size * len(send) elements) gets every rank's `send`, in rank order."""
        s, r, opts = self._args_blocks(send, recv, True)
        _check("ddp_allgather", _lib_().allgather(self._handle(), s.ptr, r.ptr, s.count, s.dtype,
                                                  _byref(opts)))
        return recv

    def iallgather(self, send, recv):
        s, r, opts = self._args_blocks(send, recv, True)
        return self._post("ddp_iallgather", (s, r, opts), _lib_().iallgather, self._handle(),
                          s.ptr, r.ptr, s.count, s.dtype, _byref(opts))

    def reduce_scatter(self, send, recv, op="sum"):
        """recv (len(send) / size elements) gets this rank's block of the reduction."""
        _op(op)
        s, r, opts = self._args_blocks(send, recv, False)
        _check("ddp_reduce_scatter", _lib_().reduce_scatter(self._handle(), s.ptr, r.ptr, r.count,
                                                            r.dtype, _op(op), _byref(opts)))
        return recv

    def ireduce_scatter(self, send, recv, op="sum"):
        _op(op)
        s, r, opts = self._args_blocks(send, recv, False)
        return self._post("ddp_ireduce_scatter", (s, r, opts), _lib_().ireduce_scatter,
                          self._handle(), s.ptr, r.ptr, r.count, r.dtype, _op(op), _byref(opts))

    def barrier(self):
        _check("ddp_barrier", _lib_().barrier(self._handle()))

    def ibarrier(self):
        return self._post("ddp_ibarrier", (), _lib_().ibarrier, self._handle())

    def alloc(self, nbytes):
        """Node-shared memory (ddp_alloc); collective over the node."""
        if not isinstance(nbytes, int) or nbytes <= 0:
            raise ValueError("nbytes %r: expected a positive int" % (nbytes,))
        return SharedBuffer(self, nbytes)

    def device_describe(self):
        """The communicator's device: "cuda:0 (NVIDIA H200)", "emulated (...)" or "none (why)"."""
        buf = ctypes.create_string_buffer(256)
        _check("ddp_device_describe", _lib_().device_describe(self._handle(), buf, len(buf)))
        return buf.value.decode(errors="replace")

    def device_array(self, shape, dtype="float32"):
        """A DeviceArray of `shape` (int or tuple) in the library's device memory
        (ddp_device_malloc: a GPU, or the emulation under DDP_DEVICE_EMULATE=1), uninitialised."""
        return DeviceArray(self, shape, dtype)

    def to_device(self, array):
        """A DeviceArray holding a copy of a NumPy array."""
        import numpy as np
        a = np.ascontiguousarray(array)
        return DeviceArray(self, a.shape, a.dtype).copy_from(a)

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
