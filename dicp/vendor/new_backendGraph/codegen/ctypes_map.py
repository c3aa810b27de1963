"""dtype tables for the C++ renderer: storage type, compute type and literal handling."""
import math

import torch

STORAGE_CTYPE = {
    torch.float32: "float", torch.float64: "double", torch.float16: "dicp::half_t",
    torch.bfloat16: "dicp::bf16_t", torch.int64: "int64_t", torch.int32: "int32_t",
    torch.int16: "int16_t", torch.int8: "int8_t", torch.uint8: "uint8_t", torch.bool: "bool",
}

# Half types compute in float: they load and store through it.
COMPUTE_CTYPE = {**STORAGE_CTYPE, torch.float16: "float", torch.bfloat16: "float"}

SUPPORTED_DTYPES = frozenset(STORAGE_CTYPE)
INTEGER_CTYPES = frozenset({"int64_t", "int32_t", "int16_t", "int8_t", "uint8_t"})


class UnsupportedDtype(TypeError):
    pass


def storage_ctype(dtype):
    try:
        return STORAGE_CTYPE[dtype]
    except KeyError:
        raise UnsupportedDtype(f"new_backendgraph kernels do not support {dtype}; "
                               f"supported: {sorted(str(d) for d in STORAGE_CTYPE)}") from None


def compute_ctype(dtype):
    storage_ctype(dtype)
    return COMPUTE_CTYPE[dtype]


def literal(value, ctype):
    """A Python number as a C++ literal of `ctype` (never a symbolic size: int() on one
    would specialize it and make dynamo recompile for every new size)."""
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        raise TypeError(f"symbolic value {value} reached a C++ literal; pass it as sympy")
    if isinstance(value, bool) or ctype == "bool":
        return "true" if value else "false"
    if isinstance(value, float) and ctype in INTEGER_CTYPES and math.isfinite(value):
        # C++ leaves a float outside the target's range undefined (g++ folds -4.0 into
        # uint8_t to 0); eager converts through int64, truncating, then wraps
        value = int(value)
    if isinstance(value, float):
        if math.isnan(value):
            return f"std::numeric_limits<{ctype}>::quiet_NaN()"
        if math.isinf(value):
            sign = "-" if value < 0 else ""
            return f"{sign}std::numeric_limits<{ctype}>::infinity()"
        return f"static_cast<{ctype}>({value!r})"
    return f"static_cast<{ctype}>({int(value)}LL)"


def lowest(ctype):
    return f"std::numeric_limits<{ctype}>::lowest()"


def highest(ctype):
    return f"std::numeric_limits<{ctype}>::max()"


def infinity_or_limit(ctype, negative):
    if ctype in ("float", "double"):
        return f"{'-' if negative else ''}std::numeric_limits<{ctype}>::infinity()"
    return lowest(ctype) if negative else highest(ctype)
