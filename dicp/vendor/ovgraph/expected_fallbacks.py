"""The ATen ops ovgraph knowingly runs as eager fallback, each with its reason.

Strict mode (DICP_STRICT=1) allows these and no other; the op test harness fails a test whose
graph falls back on an op not listed. Keys are fnmatch patterns over `aten.<op>.<overload>`.
"""
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
