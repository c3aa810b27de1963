"""dtypes as the loop IR's element types: the type an element is stored as, and the type it is
computed in (half types compute in float)."""

import torch

STORAGE_CTYPE = {
    torch.float32: "float",
    torch.float64: "double",
    torch.float16: "dicp::half_t",
    torch.bfloat16: "dicp::bf16_t",
    torch.int64: "int64_t",
    torch.int32: "int32_t",
    torch.int16: "int16_t",
    torch.int8: "int8_t",
    torch.uint8: "uint8_t",
    # bools are stored as bytes and computed as bool: g++ vectorizes no load of a C++ bool
    # ("no vectype"), so every loop reading a mask (a ReLU's or dropout's saved mask, an
    # attention mask) ran scalar; a byte load converts to bool with a vector compare. A byte
    # other than 0 and 1 also reads as true, where loading it as a bool is undefined.
    torch.bool: "uint8_t",
}

# Half types compute in float: they load and store through it; bools compute as bool.
COMPUTE_CTYPE = {
    **STORAGE_CTYPE,
    torch.float16: "float",
    torch.bfloat16: "float",
    torch.bool: "bool",
}

SUPPORTED_DTYPES = frozenset(STORAGE_CTYPE)
INTEGER_CTYPES = frozenset({"int64_t", "int32_t", "int16_t", "int8_t", "uint8_t"})


class UnsupportedDtype(TypeError):
    pass


def storage_ctype(dtype):
    try:
        return STORAGE_CTYPE[dtype]
    except KeyError:
        raise UnsupportedDtype(
            f"new_backendgraph kernels do not support {dtype}; "
            f"supported: {sorted(str(d) for d in STORAGE_CTYPE)}"
        ) from None


def compute_ctype(dtype):
    storage_ctype(dtype)
    return COMPUTE_CTYPE[dtype]
