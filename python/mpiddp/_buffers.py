"""Buffers on their way to C: a NumPy array, a torch tensor (CPU or CUDA) or a device array
is checked here and becomes a _Buf (pointer, count, dtype, where it lives) before any pointer
reaches the library; the per-call options for device buffers; op names."""
import ctypes
import sys

from . import _dtypes, _lib
from ._core import _check, _lib_
from ._memory import DeviceArray


def _np():
    return sys.modules.get("numpy")


def _torch():
    return sys.modules.get("torch")


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


def _is_torch_tensor(x):
    torch = _torch()
    return torch is not None and isinstance(x, torch.Tensor)


def check_tensor(x, name="buffer", writable=True):
    """The one check of a torch tensor, CPU or CUDA: supported dtype, dense (strided),
    contiguous, not requiring grad when written, storage alive. Returns the dtype code."""
    torch = _torch()
    dt = _dtypes.BY_TORCH.get(str(x.dtype))
    if dt is None:
        raise TypeError("%s: torch dtype %s is not supported (%s)"
                        % (name, x.dtype, _dtypes.TORCH_NAMES))
    if x.device.type not in ("cpu", "cuda"):
        raise TypeError("%s: tensor on %s: mpiddp passes CPU and CUDA tensors only"
                        % (name, x.device))
    if x.layout != torch.strided:
        raise TypeError("%s: %s tensor: only dense (strided) tensors" % (name, x.layout))
    if not x.is_contiguous():
        raise ValueError("%s: %stensor of shape %s with strides %s is not contiguous (use "
                         ".contiguous())" % (name, "CUDA " if x.device.type == "cuda" else "",
                                             tuple(x.shape), x.stride()))
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
    return dt


def buffer(x, name="buffer", writable=True, comm=None):
    """Checks a NumPy array, torch tensor or device array and returns its _Buf. Raises
    TypeError (not an array, unsupported dtype, device memory without a device) or ValueError
    (non-contiguous, read-only, freed storage, requires grad, not this device's memory).
    comm: the communicator the buffer is for (device buffers are checked against its device;
    default: the one of init())."""
    tensor = _is_torch_tensor(x)
    if isinstance(x, DeviceArray) or (tensor and x.device.type == "cuda") or (
            not tensor and hasattr(x, "__cuda_array_interface__")):
        return _device_buffer(x, name, writable, comm)
    owner = _shared_owner(x)
    if owner is not None and owner.freed:
        raise ValueError("%s: the node-shared buffer it views was freed (SharedBuffer.free)" % name)
    if tensor:
        dt = check_tensor(x, name, writable)
        return _Buf(x.data_ptr(), x.numel(), dt, x.numel() * x.element_size(), x)
    np = _np()
    if np is not None and isinstance(x, np.ndarray):
        dt = _dtypes.BY_NUMPY.get(x.dtype.name)
        if dt is None or not x.dtype.isnative:
            raise TypeError("%s: NumPy dtype %s is not supported (%s, native byte order)"
                            % (name, x.dtype, _dtypes.NUMPY_NAMES))
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


def _interface_buffer(x, name, writable, kind):
    """(ptr, count, dtype, stream) of a __cuda_array_interface__ object, checked."""
    cai = x.__cuda_array_interface__
    try:
        shape, typestr, (ptr, readonly) = tuple(cai["shape"]), cai["typestr"], cai["data"]
    except (KeyError, TypeError, ValueError):
        raise TypeError("%s: malformed __cuda_array_interface__ %r" % (name, cai)) from None
    dt = _dtypes.BY_TYPESTR.get(typestr)
    if dt is None:
        raise TypeError("%s: device dtype %s is not supported (%s)"
                        % (name, typestr, _dtypes.TYPESTR_NAMES))
    count = 1
    for n in shape:
        count *= int(n)
    strides = cai.get("strides")
    if strides is not None:
        want, step = [], _dtypes.ESIZE[dt]
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
    stream = None
    if s not in (None, 1, 2):
        if kind != _lib.DEVICE_CUDA:
            raise ValueError("%s: stream %r: under the emulated device only the default "
                             "stream (None, 1, 2) is known" % (name, s))
        stream = int(s)
    elif s == 2 and kind == _lib.DEVICE_CUDA:
        stream = 2  # cudaStreamPerThread
    return ptr, count, dt, stream


def _device_buffer(x, name, writable, comm):
    """A device buffer: a DeviceArray, a CUDA torch tensor or a __cuda_array_interface__
    object, checked against the communicator's device before its pointer is used."""
    if comm is None:
        from ._comm import default_comm
        comm = default_comm()
    L = _lib_()
    kind = L.device_kind(comm._handle())
    if kind == _lib.DEVICE_NONE:
        raise TypeError("%s: device memory (%s), but this communicator has no device: %s"
                        % (name, type(x).__name__, comm.device_describe()))
    stream = None
    if isinstance(x, DeviceArray):
        if x.freed:
            raise ValueError("%s: DeviceArray was freed" % name)
        if x.comm is not comm:
            raise ValueError("%s: DeviceArray of another communicator" % name)
        ptr, count, dt = x.ptr, x.count, x.dtype
    elif _is_torch_tensor(x):
        dt = check_tensor(x, name, writable)
        if kind != _lib.DEVICE_CUDA:
            raise TypeError("%s: CUDA tensor, but this communicator's device is %s"
                            % (name, comm.device_describe()))
        ptr, count = x.data_ptr(), x.numel()
        stream = _torch().cuda.current_stream(x.device).cuda_stream or None
    else:
        ptr, count, dt, stream = _interface_buffer(x, name, writable, kind)
    nbytes = count * _dtypes.ESIZE[dt]
    if nbytes and (not ptr or not L.device_is_device_ptr(comm._handle(), ptr)):
        raise ValueError("%s: pointer 0x%x is not device memory of this communicator's device "
                         "(%s)" % (name, ptr or 0, comm.device_describe()))
    return _Buf(ptr, count, dt, nbytes, x, _lib.MEM_CUDA, stream)


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
