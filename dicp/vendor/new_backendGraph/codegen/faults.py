"""How DICP_INJECT_BUG_TESTING_ONLY's kernel faults look in new_backendgraph's C++.

A fault takes the IR value an op produced and returns the faulty one: `accuracy` adds 1 + |x|
(bool: not x), which moves every element by more than any tolerance; `compile_error` calls a
function that does not exist. Runtime errors, and faults on values the wrapper computes (eager
fallback, library calls), are the shared wrapper's (GraphCodegenBase.inject_fault).
"""

import torch

from .ctypes_map import compute_ctype
from .values import Pointwise
from .loop_ir import Const


def _accuracy(value):
    """Every element moved by 1 + |x| (bool: negated)."""
    ctype = compute_ctype(value.dtype)

    def load(k, index):
        x = value.load(k, index)
        if value.dtype == torch.bool:
            return k.op("LogicalNot", "bool", x)
        return k.op("Add", ctype, k.op("Add", ctype, x, Const(1, ctype)), k.op("Abs", ctype, x))

    return Pointwise(value.dtype, list(value.sizes), load)


def _compile_error(value):
    """A call of a function no header declares."""
    ctype = compute_ctype(value.dtype)
    return Pointwise(
        value.dtype,
        list(value.sizes),
        lambda k, index: k.op("InjectedCompileError", ctype, value.load(k, index)),
    )


KERNEL_FAULTS = {"accuracy": _accuracy, "compile_error": _compile_error}
