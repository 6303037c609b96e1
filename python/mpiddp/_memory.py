"""Memory the library owns: node-shared buffers (ddp_alloc) and device arrays
(ddp_device_malloc), with NumPy / torch / __cuda_array_interface__ views."""
import ctypes

from . import _dtypes
from ._core import _check, _lib_


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
        if self.np_dtype.name not in _dtypes.BY_NUMPY or not self.np_dtype.isnative:
            raise TypeError("dtype %s is not supported (%s, native byte order)"
                            % (self.np_dtype, _dtypes.NUMPY_NAMES))
        self.dtype = _dtypes.BY_NUMPY[self.np_dtype.name]
        self._typestr = _dtypes.TYPESTR[self.dtype]
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
