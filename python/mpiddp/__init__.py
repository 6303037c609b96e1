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

The package's modules, one concern each: _lib (the C prototypes), _core (the loaded library,
MpiddpError), _dtypes (the one dtype table), _buffers (what may reach C), _memory
(SharedBuffer, DeviceArray), _coll (the collectives, Request), _comm (Comm, init, finalize),
_hooks (the comm hooks' names); sampler, datasets and torch on top.
"""
# buffer, _check, _lib_, _exit_hooks: for the package's own modules (mpiddp.torch) and tests
from . import _lib  # noqa: F401
from ._buffers import buffer  # noqa: F401
from ._coll import Request
from ._comm import Comm, _exit_hooks, default_comm, finalize, init  # noqa: F401
from ._core import MpiddpError, _check, _lib_, library_path, version  # noqa: F401
from ._memory import DeviceArray, SharedBuffer
from .sampler import DistributedSampler

__all__ = ["MpiddpError", "Comm", "Request", "SharedBuffer", "DeviceArray", "DistributedSampler", "init",
           "finalize", "default_comm", "library_path", "version"]
