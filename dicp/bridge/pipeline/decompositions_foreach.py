"""The `_foreach_*` ops as one ATen op per list element.

Optimizer steps (`foreach=True`, torch's default) and `clip_grad_norm_` are written with these
ops, and torch's decomposition tables have none of them (Inductor lowers them itself). Each
`_foreach_<op>` applies `<op>` to the elements of its lists, so a row calls that op on each
element: list arguments (`Tensor[]`, `Scalar[]`) are indexed, the others passed as they are.
The result is then converted like any other op, in the element's own dtype and layout.
"""

import torch

from .utils import opmath_dtype

aten = torch.ops.aten

PREFIX = "_foreach_"
# Element ops named otherwise than their foreach op, or taking their arguments otherwise.
# Eager runs `_foreach_maximum` and `_foreach_minimum` with clamp_min and clamp_max kernels.
OTHER_ELEMENT_OP = {
    "_foreach_norm": lambda x, ord=2, dtype=None: aten.linalg_vector_norm(x, ord, dtype=dtype),
    "_foreach_max": lambda x: aten.max.default(x),
    "_foreach_zero": lambda x: aten.zeros_like(x),
    "_foreach_maximum": lambda x, bound: aten.clamp_min(x, bound),
    "_foreach_minimum": lambda x, bound: aten.clamp_max(x, bound),
    "_foreach_addcmul": lambda x, a, b, value=1: aten.addcmul(x, a, b, value=value),
    "_foreach_addcdiv": lambda x, a, b, value=1: aten.addcdiv(x, a, b, value=value),
}
# The `.Tensor` overloads of these take each element's value as an element of a 1-d tensor
# (`scalars`), which eager reads as a number. Here that 0-d tensor scales the term, in eager's
# order (value * a * b) and compute type (float32 for half types, rounded once), so the
# decomposition stays traceable (no .item()).
TENSOR_SCALARS = {
    "_foreach_addcmul": lambda x, a, b, value: _in_opmath(aten.mul, x, a, b, value),
    "_foreach_addcdiv": lambda x, a, b, value: _in_opmath(aten.div, x, a, b, value),
}


def _in_opmath(combine, x, a, b, value):
    dtype, opmath = x.dtype, opmath_dtype(x.dtype)
    x, a, b = (t.to(opmath) for t in (x, a, b))
    return aten.add(x, combine(aten.mul(a, value.to(opmath)), b)).to(dtype)


LIST_TYPES = ("List[Tensor]", "List[number]")  # Tensor[] and Scalar[]
# The functional `_foreach_*` ops of torch 2.13, by name: torch has no public list of its ops
# (enumerating its schemas cost the first compile 2-5 s), and a release without one of them
# skips it. `_foreach_powsum` is left out: no elementwise loop of one ATen op.
FOREACH_OPS = (
    "abs",
    "acos",
    "asin",
    "atan",
    "ceil",
    "cos",
    "cosh",
    "erf",
    "erfc",
    "exp",
    "expm1",
    "floor",
    "frac",
    "lgamma",
    "log",
    "log10",
    "log1p",
    "log2",
    "neg",
    "reciprocal",
    "round",
    "rsqrt",
    "sigmoid",
    "sign",
    "sin",
    "sinh",
    "sqrt",
    "tan",
    "tanh",
    "trunc",
    "zero",
    "clone",
    "copy",
    "max",
    "norm",
    "mm",
    "add",
    "sub",
    "mul",
    "div",
    "clamp_min",
    "clamp_max",
    "maximum",
    "minimum",
    "pow",
    "addcmul",
    "addcdiv",
    "lerp",
)


def foreach_decompositions() -> dict:
    """overload -> decomposition, for every functional overload of FOREACH_OPS in this torch."""
    table = {}
    for name in (PREFIX + op for op in FOREACH_OPS):
        packet = getattr(aten, name, None)
        for overload_name in packet.overloads() if packet is not None else ():
            if not overload_name.endswith("out"):
                overload = getattr(packet, overload_name)
                table[overload] = _per_element(name, overload, overload_name)
    return table


def _per_element(name, overload, overload_name):
    """A decomposition calling the element op once per element of `overload`'s lists."""
    arguments = overload._schema.arguments
    tensor_scalars = name in TENSOR_SCALARS and overload_name == "Tensor"
    indexed = [
        str(a.type) in LIST_TYPES or (tensor_scalars and a.name == "scalars") for a in arguments
    ]
    element_op = TENSOR_SCALARS[name] if tensor_scalars else _element_op(name)

    def decomposition(*args, **kwargs):
        args, keywords = _bound(arguments, args, kwargs)
        length = next(len(arg) for arg, is_list in zip(args, indexed) if is_list)
        return [
            element_op(
                *(arg[i] if is_list else arg for arg, is_list in zip(args, indexed)), **keywords
            )
            for i in range(length)
        ]

    decomposition.__name__ = f"{name}_per_element"
    return decomposition


def _element_op(name):
    return OTHER_ELEMENT_OP.get(name) or getattr(aten, name.removeprefix(PREFIX))


def _bound(arguments, args, kwargs):
    """(positional, keyword-only) arguments: the positional ones in schema order up to the last
    one given, an omitted one before it as its default."""
    names = [a for a in arguments if not a.kwarg_only]
    given = [i for i, a in enumerate(names) if i < len(args) or a.name in kwargs]
    positional = [
        args[i] if i < len(args) else kwargs.get(a.name, a.default_value)
        for i, a in enumerate(names[: max(given, default=-1) + 1])
    ]
    keywords = {a.name: kwargs[a.name] for a in arguments if a.kwarg_only and a.name in kwargs}
    return positional, keywords
