"""The loaded library (one per process), its errors as MpiddpError, and the status check
every call goes through."""
import threading

from . import _lib

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
