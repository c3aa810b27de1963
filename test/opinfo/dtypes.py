"""Which dtypes each mode tests: float32, and in static mode the half types, one signed and one
unsigned integer type and bool, where the OpInfo declares them for the CPU; the float64 mode
compiles as static does, in float64 (against eager's float64 to float64's tolerance, so a
kernel that computes a float64 op in float32 fails)."""

import torch

GRAD_DTYPE = torch.float32

# In order of preference; an OpInfo is tested in each it supports. int32 and uint8 stand for
# the integer types: int64 is the type indices take in eager, and the generated kernels treat
# every integer type alike (one C type per dtype, dicp/.../codegen/ctypes_map.py).
STATIC_DTYPES = (
    torch.float32,
    torch.float16,
    torch.bfloat16,
    torch.int64,
    torch.int32,
    torch.uint8,
    torch.bool,
)


def case_dtypes(opinfo, mode):
    supported = opinfo.supported_dtypes("cpu")
    if mode == "static":
        return [d for d in STATIC_DTYPES if d in supported]
    if mode == "float64":
        return [torch.float64] if torch.float64 in supported else []
    if mode == "grad":
        ok = opinfo.supports_autograd and GRAD_DTYPE in opinfo.supported_backward_dtypes("cpu")
        return [GRAD_DTYPE] if ok and GRAD_DTYPE in supported else []
    # dynamic: float32, or the first static dtype the op supports
    first = [d for d in STATIC_DTYPES if d in supported][:1]
    return first
