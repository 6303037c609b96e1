"""The one dtype table of the package: each ddp_dtype_t with its element size and how NumPy,
torch and __cuda_array_interface__ spell it. Every lookup and every "supported: ..." message
is derived from DTYPES, so a new dtype is one row here (and one constant in _lib.py)."""
from . import _lib

# code, name (also NumPy's and torch's), element size, NumPy has it, interface typestrs (the
# first is the one mpiddp writes; one-byte types are also accepted without a byte order)
DTYPES = (
    (_lib.F32, "float32", 4, True, ("<f4",)),
    (_lib.F64, "float64", 8, True, ("<f8",)),
    (_lib.F16, "float16", 2, True, ("<f2",)),
    (_lib.BF16, "bfloat16", 2, False, ()),
    (_lib.I32, "int32", 4, True, ("<i4",)),
    (_lib.I64, "int64", 8, True, ("<i8",)),
    (_lib.U8, "uint8", 1, True, ("|u1", "<u1")),
)

NAME = {code: name for code, name, _, _, _ in DTYPES}
ESIZE = {code: size for code, _, size, _, _ in DTYPES}
# NumPy dtype name -> code (NumPy has no bfloat16)
BY_NUMPY = {name: code for code, name, _, np_ok, _ in DTYPES if np_ok}
# str(torch.dtype) -> code
BY_TORCH = {"torch." + name: code for code, name, _, _, _ in DTYPES}
# __cuda_array_interface__ typestr -> code; code -> the typestr mpiddp's DeviceArray shows
BY_TYPESTR = {ts: code for code, _, _, _, tss in DTYPES for ts in tss}
TYPESTR = {code: tss[0] for code, _, _, _, tss in DTYPES if tss}

TORCH_NAMES = ", ".join(name for _, name, _, _, _ in DTYPES)
NUMPY_NAMES = ", ".join(BY_NUMPY)
TYPESTR_NAMES = ", ".join(sorted(BY_TYPESTR))
