"""ctypes view of libmpiddp: finding the library, the C prototypes, the MPI handle ABI.

Everything that knows a C signature or a C struct layout lives in this file, so a change of
the C API is one edit here.

Where the library comes from (first match wins):
  1. $MPIDDP_LIBRARY, a path to libmpiddp.so (ctest sets it to the build tree's library);
  2. the path `cmake --install` wrote into mpiddp/_install.py beside this file;
  3. the dynamic loader's search (LD_LIBRARY_PATH, ldconfig's cache): libmpiddp.so.<major>,
     then libmpiddp.so, e.g. after `pip install ./python` over a library installed in /usr/local.
"""
import ctypes
import ctypes.util
import os

_SOVERSIONS = ("libmpiddp.so.0", "libmpiddp.so")

# ddp_status_t codes (runtime/core/ddp_types.h, DDP_STATUS_MAP)
STATUS_NAMES = {
    0: "DDP_OK", -1: "DDP_EINVAL", -2: "DDP_ENOMEM", -3: "DDP_EMPI", -4: "DDP_EBUSY",
    -5: "DDP_ENOTSUP", -6: "DDP_EIO", -7: "DDP_ETIMEDOUT", -8: "DDP_EMISMATCH",
    -9: "DDP_ESTATE", -10: "DDP_ECUDA", -11: "DDP_ENCCL", -12: "DDP_EFORMAT",
    -13: "DDP_ECONFIG", -14: "DDP_EINTERNAL",
}
EINVAL = -1

# ddp_dtype_t, ddp_op_t
F32, F64, F16, BF16, I32, I64, U8 = range(7)
OPS = {"sum": 0, "avg": 1, "min": 2, "max": 3, "prod": 4}

IN_PLACE = ctypes.c_void_p(2 ** (8 * ctypes.sizeof(ctypes.c_void_p)) - 1)  # (void *)-1


class CommInfo(ctypes.Structure):
    """ddp_comm_info_t (runtime/core/ddp_comm.h)."""
    _fields_ = [(n, ctypes.c_int) for n in (
        "rank", "size", "local_rank", "local_size", "node", "nodes", "virtual_nodes",
        "thread_level", "mpi_owned", "gpu_count", "device", "cuda_aware", "nccl", "shm")] + [
        ("host", ctypes.c_char * 64), ("cuda_aware_reason", ctypes.c_char * 128)]


MEM_HOST, MEM_CUDA = 0, 1  # ddp_mem_t
DEVICE_NONE, DEVICE_CUDA, DEVICE_EMULATED = 0, 1, 2  # ddp_device_kind_t


class CollOpts(ctypes.Structure):
    """ddp_coll_opts_t (collectives/ddp_collectives.h); filled by ddp_coll_opts_default."""
    _fields_ = [("algo", ctypes.c_int), ("mem", ctypes.c_int), ("stream", ctypes.c_void_p),
                ("tag", ctypes.c_int)]


class SamplerOpts(ctypes.Structure):
    """ddp_sampler_opts_t (samplers/ddp_sampler.h). Every field is set by the caller, so
    ddp_sampler_opts_default is not needed."""
    _fields_ = [("dataset_size", ctypes.c_uint64), ("num_replicas", ctypes.c_int),
                ("rank", ctypes.c_int), ("shuffle", ctypes.c_int), ("seed", ctypes.c_uint64),
                ("drop_last", ctypes.c_int)]


DATASET_MAX_DIMS = 4


class DatasetInfo(ctypes.Structure):
    """ddp_dataset_info_t (samplers/ddp_sampler.h)."""
    _fields_ = [("count", ctypes.c_uint64), ("sample_elems", ctypes.c_size_t),
                ("ndim", ctypes.c_int), ("dims", ctypes.c_size_t * DATASET_MAX_DIMS),
                ("classes", ctypes.c_int)]


class LibraryNotFound(ImportError):
    pass


def _candidates():
    env = os.environ.get("MPIDDP_LIBRARY")
    if env:
        return [env], "MPIDDP_LIBRARY=" + env
    out = []
    try:
        from . import _install  # written by cmake --install
        out.append(_install.LIBRARY)
    except ImportError:
        pass
    out.extend(_SOVERSIONS)
    found = ctypes.util.find_library("mpiddp")
    if found:
        out.append(found)
    return out, "the installed path, LD_LIBRARY_PATH and the loader cache"


def load():
    paths, where = _candidates()
    errors = []
    for p in paths:
        try:
            # RTLD_GLOBAL: Open MPI's plugins resolve libmpi's symbols in the global scope.
            return ctypes.CDLL(p, mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            errors.append(str(e))
    raise LibraryNotFound(
        "mpiddp: cannot load libmpiddp (looked in %s): %s. Set MPIDDP_LIBRARY to the path of "
        "libmpiddp.so, or install the library (cmake --install build)" % (where, "; ".join(errors)))


class MpiAbi:
    """How MPI_Comm travels through ctypes. The two ABIs in use: Open MPI's MPI_Comm is a
    pointer to a predefined object (MPI_COMM_NULL = &ompi_mpi_comm_null); the MPICH family's
    (MPICH, Intel MPI, MVAPICH, Cray) is an int with fixed values. Told apart by the symbol
    ompi_mpi_comm_null, which only Open MPI's libmpi defines."""

    def __init__(self, lib):
        try:
            null = ctypes.c_char.in_dll(lib, "ompi_mpi_comm_null")
            self.kind = "openmpi"
            self.ctype = ctypes.c_void_p
            self.comm_null = ctypes.addressof(null)
        except ValueError:
            self.kind = "mpich"
            self.ctype = ctypes.c_int
            self.comm_null = 0x04000000  # MPICH's mpi.h: #define MPI_COMM_NULL ((MPI_Comm)0x04000000)


def _proto(lib, name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _file_of(lib, symbol):
    """The file a loaded library came from (dladdr), or its load name where dladdr is absent."""
    try:
        dladdr = ctypes.CDLL(None).dladdr
        dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
        info = _DlInfo()
        if dladdr(ctypes.cast(getattr(lib, symbol), ctypes.c_void_p), ctypes.byref(info)):
            return os.path.realpath(info.dli_fname.decode())
    except (AttributeError, OSError):
        pass
    return lib._name


class Lib:
    """The loaded library with its prototypes."""

    def __init__(self):
        lib = load()
        self.handle = lib
        self.path = _file_of(lib, "ddp_version")
        self.abi = MpiAbi(lib)
        P, I, S, C = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_char_p
        PP = ctypes.POINTER(ctypes.c_void_p)
        st = ctypes.c_int
        comm = self.abi.ctype
        self.strerror = _proto(lib, "ddp_strerror", C, I)
        self.last_error = _proto(lib, "ddp_last_error", C)
        self.clear_error = _proto(lib, "ddp_clear_error", None)
        self.version = _proto(lib, "ddp_version", C)
        self.mpi_library_version = _proto(lib, "ddp_mpi_library_version", st, C, S)
        # reducer's hook names (ddp_hook_t)
        self.hook_name = _proto(lib, "ddp_hook_name", C, I)
        self.hook_parse = _proto(lib, "ddp_hook_parse", st, C, ctypes.POINTER(I))
        # communicator: opaque ddp_comm_t *, created into a ddp_comm_t ** and destroyed from one
        self.init = _proto(lib, "ddp_init", st, P, P, comm, PP)
        self.finalize = _proto(lib, "ddp_finalize", st, PP)
        self.comm_create = _proto(lib, "ddp_comm_create", st, comm, PP)
        self.comm_destroy = _proto(lib, "ddp_comm_destroy", st, PP)
        self.comm_info = _proto(lib, "ddp_comm_info", st, P, ctypes.POINTER(CommInfo))
        # collectives; per-call options NULL for host buffers (defaults; DDP_* variables
        # choose), a CollOpts with mem = MEM_CUDA and the data's stream for device buffers
        self.coll_opts_default = _proto(lib, "ddp_coll_opts_default", st, ctypes.POINTER(CollOpts))
        self.allreduce = _proto(lib, "ddp_allreduce", st, P, P, P, S, I, I, P)
        self.broadcast = _proto(lib, "ddp_broadcast", st, P, P, S, I, I, P)
        self.allgather = _proto(lib, "ddp_allgather", st, P, P, P, S, I, P)
        self.reduce_scatter = _proto(lib, "ddp_reduce_scatter", st, P, P, P, S, I, I, P)
        self.barrier = _proto(lib, "ddp_barrier", st, P)
        self.iallreduce = _proto(lib, "ddp_iallreduce", st, P, P, P, S, I, I, P, PP)
        self.ibroadcast = _proto(lib, "ddp_ibroadcast", st, P, P, S, I, I, P, PP)
        self.iallgather = _proto(lib, "ddp_iallgather", st, P, P, P, S, I, P, PP)
        self.ireduce_scatter = _proto(lib, "ddp_ireduce_scatter", st, P, P, P, S, I, I, P, PP)
        self.ibarrier = _proto(lib, "ddp_ibarrier", st, P, PP)
        self.test = _proto(lib, "ddp_test", st, PP, ctypes.POINTER(I))
        self.wait = _proto(lib, "ddp_wait", st, PP)
        self.alloc = _proto(lib, "ddp_alloc", st, P, S, PP)
        self.free = _proto(lib, "ddp_free", st, P, P)
        # device layer: device memory and copies (CUDA, or DDP_DEVICE_EMULATE=1)
        self.device_kind = _proto(lib, "ddp_device_kind", I, P)
        self.device_describe = _proto(lib, "ddp_device_describe", st, P, C, S)
        self.device_malloc = _proto(lib, "ddp_device_malloc", st, P, S, PP)
        self.device_free = _proto(lib, "ddp_device_free", st, P, P)
        self.device_is_device_ptr = _proto(lib, "ddp_device_is_device_ptr", I, P, P)
        self.memcpy_async = _proto(lib, "ddp_memcpy_async", st, P, P, P, S, P)
        self.stream_synchronize = _proto(lib, "ddp_stream_synchronize", st, P, P)
        # sampler
        self.sampler_create = _proto(lib, "ddp_sampler_create", st, ctypes.POINTER(SamplerOpts), PP)
        self.sampler_destroy = _proto(lib, "ddp_sampler_destroy", st, PP)
        self.sampler_set_epoch = _proto(lib, "ddp_sampler_set_epoch", st, P, ctypes.c_uint64)
        self.sampler_length = _proto(lib, "ddp_sampler_length", st, P, ctypes.POINTER(S))
        self.sampler_indices = _proto(lib, "ddp_sampler_indices", st, P, P, S, ctypes.POINTER(S))
        # datasets
        self.dataset_open_idx = _proto(lib, "ddp_dataset_open_idx", st, C, C, ctypes.c_float,
                                       ctypes.c_float, PP)
        self.dataset_destroy = _proto(lib, "ddp_dataset_destroy", st, PP)
        self.dataset_info = _proto(lib, "ddp_dataset_info", st, P, ctypes.POINTER(DatasetInfo))
        self.dataset_get = _proto(lib, "ddp_dataset_get", st, P, ctypes.c_uint64, P, S,
                                  ctypes.POINTER(ctypes.c_int32))
