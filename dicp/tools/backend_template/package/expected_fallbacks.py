"""The ATen ops BACKEND_NAME knowingly leaves to eager fallback: {op pattern: reason}.

DICP_STRICT=1 and dicp's op test harness allow these fallbacks and no other. A new backend
declares every op to begin with; narrow the patterns as ops become native (an op whose
converter runs is native whatever this table says)."""

EXPECTED_FALLBACKS = {
    "*": "not implemented by BACKEND_NAME yet: add a row in conversion.py, an op in opset.py "
    "and its kernel, then narrow this pattern",
}
