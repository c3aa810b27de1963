"""The ATen ops new_backendgraph knowingly runs as eager fallback, each with its reason.

`Backend.expected_fallbacks`: strict mode (DICP_STRICT=1) allows these fallbacks, and the op
test harness fails a test whose graph falls back on any op not listed here. Keys are fnmatch
patterns over `aten.<op>.<overload>`. The list may only shrink: an entry leaves when the op
runs natively.
"""

_COMPLEX = (
    "its result or input is complex, and the generated kernels hold real and integer "
    "dtypes only (docs/ops.md, Gaps)"
)

EXPECTED_FALLBACKS = {
    "aten.view_as_complex.*": _COMPLEX,
    "aten.view_as_real.*": _COMPLEX,
}
