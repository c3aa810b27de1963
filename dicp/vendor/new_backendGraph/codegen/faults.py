"""How DICP_INJECT_BUG_TESTING_ONLY's kernel faults look in new_backendgraph's C++.

A fault takes the IR value an op produced and returns the faulty one: `accuracy` adds 1 + |x|
(bool: not x), which moves every element by more than any tolerance; `compile_error` calls a
function that does not exist. Runtime errors, and faults on values the wrapper computes (eager
fallback, library calls), are the shared wrapper's (GraphCodegenBase.inject_fault).
"""
import torch

from .ctypes_map import compute_ctype
from .ir import Pointwise


def _cpp_value(expression):
    def fault(value):
        ctype = compute_ctype(value.dtype)
        return Pointwise(value.dtype, list(value.sizes), lambda k, index: k.emit(
            expression(value.load(k, index), ctype, value.dtype), ctype))
    return fault


def _cpp_wrong(x, ctype, dtype):
    return f"(!{x})" if dtype == torch.bool else f"({x} + {ctype}(1) + std::abs({x}))"


KERNEL_FAULTS = {
    "accuracy": _cpp_value(_cpp_wrong),
    "compile_error": _cpp_value(lambda x, ctype, dtype:
                                f"dicp_injected_compile_error_TESTING_ONLY({x})"),
}
