"""The names of mpiddp's gradient hooks, spelled once for the Python side: the reducer's
ddp_hook_t (runtime/reducer/ddp_reducer.h: DDP_HOOK_NONE, DDP_HOOK_FP16, DDP_HOOK_BF16) in enum
order, each with the dtype it sends. hook_name / hook_parse mirror the C library's
ddp_hook_name / ddp_hook_parse; once libmpiddp exports those, these two become calls into it
(prototypes in _lib.py) and nothing else changes."""
NONE, FP16, BF16 = range(3)  # ddp_hook_t

# code -> (name as the C library and the apps spell it, dtype on the wire: None = the bucket's)
_HOOKS = {NONE: ("none", None), FP16: ("fp16", "float16"), BF16: ("bf16", "bfloat16")}


def hook_name(code):
    """The name of hook `code` ("none", "fp16", "bf16")."""
    try:
        return _HOOKS[code][0]
    except (KeyError, TypeError):
        raise ValueError("hook %r: expected one of %s" % (code, sorted(_HOOKS))) from None


def hook_parse(name):
    """The code of the hook called `name`; ValueError naming the choices otherwise."""
    for code, (n, _) in _HOOKS.items():
        if n == name:
            return code
    raise ValueError("hook %r: expected one of %s"
                     % (name, ", ".join(n for n, _ in _HOOKS.values())))


def wire_dtype(code):
    """The dtype name hook `code` sends (None: the bucket's own)."""
    hook_name(code)
    return _HOOKS[code][1]


def codes():
    return list(_HOOKS)
