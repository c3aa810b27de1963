"""BACKEND_NAME's op vocabulary: elementwise ops. Each is a name, an `impl` in torch ops (its
meaning, and on fake tensors its shape rule) and the C++ expression its kernel computes."""

import torch

from dicp.api import Operator


class Elementwise(Operator):
    """An op applied element by element to same-shaped, same-dtype operands."""

    cpp = ""  # C++ expression over the loaded operands a, b (and the dtype T)


def _op(name, impl, cpp):
    return type(name, (Elementwise,), {"name": name, "cpp": cpp, "impl": staticmethod(impl)})()


# name -> (torch implementation, C++ expression)
UNARY = {
    "Neg": (torch.neg, "-a"),
    "Relu": (torch.relu, "std::max(a, T(0))"),  # max(NaN, 0) is NaN, as in torch
    "Exp": (torch.exp, "std::exp(a)"),
    "Sqrt": (torch.sqrt, "std::sqrt(a)"),
}
BINARY = {
    "Add": (torch.add, "a + b"),
    "Sub": (torch.sub, "a - b"),
    "Mul": (torch.mul, "a * b"),
    "Div": (torch.div, "a / b"),
}
OPS = {name: _op(name, impl, cpp) for name, (impl, cpp) in {**UNARY, **BINARY}.items()}
