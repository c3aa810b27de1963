"""DICP_INJECT_BUG_TESTING_ONLY=<op pattern>:<kind>: make the generated code of matching ATen ops
wrong on purpose, so the debugging tools can be tested against a known culprit (like Inductor's
`cpp.inject_relu_bug_TESTING_ONLY`). Kinds: accuracy (a wrong value), compile_error (the
generated source does not build), runtime_error (the generated code raises when run).

`fault_for` is the pipeline's fault hook (pipeline/hooks.py): a backend's codegen asks it in one
place and renders the fault its own way.
"""

from dicp import config

from ..pipeline.conversion import is_aten
from ..pipeline.provenance import origin_of
from ..pipeline.utils import matches_any


def fault_for(node):
    """The fault kind to inject into the vendor node holding a matching ATen op's value
    (vendor ops only: an op left to eager fallback runs torch's code, not generated code)."""
    spec = config.inject_bug_testing_only
    origin = origin_of(node) if spec else None
    if origin is None or not origin.result or is_aten(node.target):
        return None  # eager fallback runs torch's own code, which has no injected fault
    pattern, kind = spec
    return kind if matches_any(origin.op, (pattern,)) else None
