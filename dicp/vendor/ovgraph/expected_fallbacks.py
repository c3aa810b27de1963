"""The ATen ops ovgraph knowingly runs as eager fallback, each with its reason.

Strict mode (DICP_STRICT=1) allows these and no other; the op test harness fails a test whose
graph falls back on an op not listed. Keys are fnmatch patterns over `aten.<op>.<overload>`.
"""
import torch

_RANDOM = "random numbers: OpenVINO's RandomUniform does not reproduce torch's generator"
_COMPLEX = "complex dtypes: OpenVINO has no complex element type"

EXPECTED_FALLBACKS = {
    "aten.view_as_complex.*": _COMPLEX,
    "aten.view_as_real.*": _COMPLEX,
    "aten.native_dropout.*": _RANDOM,
    "aten.bernoulli*": _RANDOM,
    "aten.rand*": _RANDOM,
    "aten.normal*": _RANDOM,
    "aten.uniform*": _RANDOM,
}

# Ops on these dtypes run eagerly whatever the op (Backend.dtype_fallbacks).
DTYPE_FALLBACKS = {
    torch.float64: "OpenVINO's CPU plugin computes float64 in float32 (checked on openvino "
                   "2026.4: 1.0 + 1e-10 == 1.0), a silent precision loss",
    torch.bfloat16: "numpy, through which ovgraph feeds OpenVINO, has no bfloat16",
    torch.complex64: "OpenVINO has no complex element type",
    torch.complex128: "OpenVINO has no complex element type",
}
