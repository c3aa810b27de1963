"""Sizes as sympy expressions.

torch exposes a symbolic size's expression only through `SymInt.node.expr`, a private
attribute; this module is the one place that reads it.
"""
import sympy
import torch


def to_sympy(value):
    """An int, SymInt or sympy expression as a sympy expression."""
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return sympy.sympify(value.node.expr)
    if isinstance(value, bool):
        return sympy.Integer(int(value))
    if isinstance(value, int):
        return sympy.Integer(value)
    if isinstance(value, float):
        return sympy.Float(value)
    if isinstance(value, sympy.Basic):
        return value
    raise TypeError(f"not a size: {value!r}")


def is_symbolic(value) -> bool:
    return isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool, sympy.Basic))


def shape_of(fake):
    return [to_sympy(s) for s in fake.shape]


def strides_of(fake):
    return [to_sympy(s) for s in fake.stride()]
