"""mpiddp's gradient hooks for the Python side: the reducer's ddp_hook_t
(runtime/reducer/ddp_reducer.h: DDP_HOOK_NONE, DDP_HOOK_FP16, DDP_HOOK_BF16) in enum order.
The names come from the C library (ddp_hook_name / ddp_hook_parse), so they are spelled once;
what stays here is the torch dtype each hook sends."""
import ctypes

from ._core import _lib_

NONE, FP16, BF16 = range(3)  # ddp_hook_t

# code -> the torch dtype name the hook sends (None: the bucket's own)
_WIRE = {NONE: None, FP16: "float16", BF16: "bfloat16"}


def hook_name(code):
    """The name of hook `code` (ddp_hook_name: "none", "fp16", "bf16"); ValueError otherwise."""
    ok = isinstance(code, int) and not isinstance(code, bool) and -2 ** 31 <= code < 2 ** 31
    name = _lib_().hook_name(code).decode() if ok else "?"
    if name == "?":
        raise ValueError("hook %r: expected one of %s" % (code, codes()))
    return name


def hook_parse(name):
    """The code of the hook called `name` (ddp_hook_parse); ValueError with the library's
    message (naming the value and the choices) otherwise."""
    if not isinstance(name, str):
        raise ValueError("hook %r: expected a name (str)" % (name,))
    L = _lib_()
    out = ctypes.c_int(-1)
    if L.hook_parse(name.encode(), ctypes.byref(out)) != 0:
        raise ValueError(L.last_error().decode(errors="replace"))
    return out.value


def wire_dtype(code):
    """The dtype name hook `code` sends (None: the bucket's own)."""
    hook_name(code)
    return _WIRE[code]


def codes():
    return list(_WIRE)
