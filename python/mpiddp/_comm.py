"""The communicator (ddp_comm_t) and the process's default one: init(), default_comm(),
finalize()."""
import atexit
import ctypes
import threading

from . import _lib
from ._coll import Collectives
from ._core import MpiddpError, _check, _lib_
from ._memory import DeviceArray, SharedBuffer


class Comm(Collectives):
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
