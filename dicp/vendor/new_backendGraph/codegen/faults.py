"""How each DICP_INJECT_BUG_TESTING_ONLY fault looks in new_backendgraph's generated code.

`inject(g, node, value, kind)` takes the codegen, the vendor node and the value it produced and
returns the faulty value. The accuracy fault adds 1 + |x| (bool: not x), which moves every
element by more than any tolerance.
"""
import torch

from dicp.dynamo_bridge.fault_injection import runtime_error_message

from .ctypes_map import compute_ctype
from .ir import Buffer, Pointwise
from .wrapper import Var


def _cpp_value(expression):
    def fault(g, node, value):
        ctype = compute_ctype(value.dtype)
        return Pointwise(value.dtype, list(value.sizes), lambda k, index: k.emit(
            expression(value.load(k, index), ctype, value.dtype), ctype))
    return fault


def _cpp_wrong(x, ctype, dtype):
    return f"(!{x})" if dtype == torch.bool else f"({x} + {ctype}(1) + std::abs({x}))"


def _python_wrong(g, node, value):
    dtype = _first_tensor_val(node.meta["val"]).dtype
    name = Var(g.wrapper.fresh())
    wrong = (f"torch.logical_not({value})" if dtype == torch.bool
             else f"{value} + 1 + {value}.abs()")
    g.wrapper.lines.append(f"{name} = {wrong}")
    return name


def _python_compile_error(g, node, value):
    g.wrapper.lines.append("dicp injected compile error")  # not Python: the wrapper won't build
    return value


def _runtime_error(g, node, value):
    g.wrapper.lines.append(f"raise RuntimeError({runtime_error_message(node)!r})")
    return value


FAULTS = {
    "cpp": {
        "accuracy": _cpp_value(_cpp_wrong),
        "compile_error": _cpp_value(lambda x, ctype, dtype:
                                    f"dicp_injected_compile_error_TESTING_ONLY({x})"),
        "runtime_error": _runtime_error,
    },
    "python": {
        "accuracy": _python_wrong,
        "compile_error": _python_compile_error,
        "runtime_error": _runtime_error,
    },
}


def inject(g, node, value, kind):
    """`value` with fault `kind` (for a tuple, in its first tensor)."""
    fault = FAULTS[g.target][kind]
    if isinstance(value, (tuple, list)):
        first = next(i for i, v in enumerate(value) if _is_tensor_value(v))
        return type(value)(fault(g, node, v) if i == first else v for i, v in enumerate(value))
    return fault(g, node, value)


def _is_tensor_value(value):
    return isinstance(value, (Buffer, Pointwise, Var))


def _first_tensor_val(val):
    return val if isinstance(val, torch.Tensor) else next(
        v for v in val if isinstance(v, torch.Tensor))
