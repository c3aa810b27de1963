"""Bounds on the values of a vendor graph's nodes, for lowerings with a cheaper form on a
smaller domain: erf's central polynomial alone where |x| < 1 (GELU of a softmax, of a
sigmoid), instead of both of its branches (softmax+GELU over 512x1024: 306 -> 188 us).

An interval [lo, hi] bounds every value of a node's elements that is not NaN (NaN passes
through every rule, as it does through the ops). Bounds are computed in float64 and widened
by one epsilon of the node's dtype per op, outward, so an interval holds for the rounded
values the kernels compute. A node whose range is not known is unbounded: any op without a
rule, a non-float node, a view that may read memory beyond its source's values (AsStrided).

Two rules are about softmax, and relate a node to another rather than to its operands' ranges:
x - max(x) <= 0 where the max reduces x itself, and sum(exp(x - max(x))) >= 1 over the same
dims, since the row maximum contributes exp(0) = 1 exactly and every other term is >= 0.
"""

import math
from dataclasses import dataclass

import torch
import torch.fx as fx

INF = math.inf


@dataclass(frozen=True)
class Interval:
    lo: float = -INF
    hi: float = INF

    def inside(self, bound):
        """Whether every value lies strictly between -bound and bound."""
        return -bound < self.lo and self.hi < bound


UNBOUNDED = Interval()


def _interval(lo, hi):
    if math.isnan(lo) or math.isnan(hi):  # inf - inf, 0 * inf: nothing is known
        return UNBOUNDED
    return Interval(lo, hi)


def _hull(*intervals):
    return Interval(min(i.lo for i in intervals), max(i.hi for i in intervals))


def _monotone(fn, x):
    return _interval(fn(x.lo), fn(x.hi))


def _exp(v):
    return INF if v > 709 else math.exp(v)


def _sigmoid(v):
    return 1 / (1 + _exp(-v))


def _add(a, b):
    return _interval(a.lo + b.lo, a.hi + b.hi)


def _neg(a):
    return Interval(-a.hi, -a.lo)


def _mul(a, b):
    products = [x * y for x in (a.lo, a.hi) for y in (b.lo, b.hi)]
    if any(math.isnan(p) for p in products):
        return UNBOUNDED
    return Interval(min(products), max(products))


def _reciprocal(a):
    if a.lo > 0 or a.hi < 0:  # an interval holding 0 holds 1 / 0 = inf
        return Interval(1 / a.hi, 1 / a.lo)
    return UNBOUNDED


def _abs(a):
    if a.lo >= 0:
        return a
    if a.hi <= 0:
        return _neg(a)
    return Interval(0.0, max(-a.lo, a.hi))


def _sqrt(a):  # a negative value gives NaN, which an interval leaves out
    return Interval(math.sqrt(max(a.lo, 0.0)), math.sqrt(a.hi) if a.hi >= 0 else 0.0)


def _rsqrt(a):
    root = _sqrt(a)
    return _interval(1 / root.hi if root.hi else INF, 1 / root.lo if root.lo else INF)


UNIT = Interval(-1.0, 1.0)
UNARY = {
    "Exp": lambda a: _monotone(_exp, a),
    "Sigmoid": lambda a: _monotone(_sigmoid, a),
    "Tanh": lambda a: _monotone(math.tanh, a),
    "Erf": lambda a: _monotone(math.erf, a),
    "Relu": lambda a: Interval(max(a.lo, 0.0), max(a.hi, 0.0)),
    "Abs": _abs,
    "Neg": _neg,
    "Sqrt": _sqrt,
    "Rsqrt": _rsqrt,
    "Reciprocal": _reciprocal,
    "Sin": lambda a: UNIT,
    "Cos": lambda a: UNIT,
}
BINARY = {
    "Add": _add,
    "Sub": lambda a, b: _add(a, _neg(b)),
    "Mul": _mul,
    "Div": lambda a, b: _mul(a, _reciprocal(b)),
    "Maximum": lambda a, b: Interval(max(a.lo, b.lo), max(a.hi, b.hi)),
    "Minimum": lambda a, b: Interval(min(a.lo, b.lo), min(a.hi, b.hi)),
}
# Ops whose elements are some of their first operand's (or a fill value's).
SAME_VALUES = {
    "Reshape",
    "Permute",
    "Expand",
    "Slice",
    "Select",
    "Copy",
    "Convert",
    "ReduceMax",
    "ReduceMin",
}


class ValueRanges:
    """The interval of every node of `graph`, computed once in graph order."""

    def __init__(self, graph: fx.Graph):
        self._ranges = {}
        for node in graph.nodes:
            self._ranges[node] = _widened(self._rule(node), node)

    def of(self, arg) -> Interval:
        if isinstance(arg, fx.Node):
            return self._ranges.get(arg, UNBOUNDED)
        if isinstance(arg, (int, float)) and not isinstance(arg, bool):
            return Interval(float(arg), float(arg))
        return UNBOUNDED

    def _rule(self, node):
        name = getattr(node.target, "name", None)
        if node.op != "call_function" or not _is_float(node) or name is None:
            return UNBOUNDED
        args = node.args
        if name in UNARY:
            return UNARY[name](self.of(args[0]))
        if name in BINARY:
            interval = BINARY[name](self.of(args[0]), self.of(args[1]))
            if name == "Sub" and _is_max_of(args[1], args[0]):
                return Interval(interval.lo, min(interval.hi, 0.0))
            return interval
        if name in SAME_VALUES:
            return self.of(args[0])
        if name == "Full":
            return self.of(args[1])
        if name == "Where":
            return _hull(self.of(args[1]), self.of(args[2]))
        if name in ("Tril", "Triu"):
            return _hull(self.of(args[0]), Interval(0.0, 0.0))
        if name == "ReduceSum":
            return self._sum(node)
        return UNBOUNDED

    def _sum(self, node):
        """n terms in [lo, hi] sum to [n lo, n hi], give or take n roundings."""
        x, terms = self.of(node.args[0]), _reduced_count(node)
        if terms == 0:
            interval = Interval(0.0, 0.0)
        elif terms is None:
            interval = Interval(0.0 if x.lo >= 0 else -INF, 0.0 if x.hi <= 0 else INF)
        else:
            interval = _widened(_interval(x.lo * terms, x.hi * terms), node, terms)
        if _is_softmax_denominator(node):  # exactly: no rounding takes a sum of 1 + t below 1
            interval = Interval(max(interval.lo, 1.0), interval.hi)
        return interval


def _widened(interval, node, roundings=1):
    """`interval` grown outward by `roundings` epsilons of the node's dtype; a bound beyond
    the dtype's largest finite value becomes infinite (a conversion may overflow)."""
    if not _is_float(node):
        return interval
    finfo = torch.finfo(node.meta["val"].dtype)
    return Interval(
        _outward(interval.lo, -roundings * finfo.eps, finfo.max),
        _outward(interval.hi, roundings * finfo.eps, finfo.max),
    )


def _outward(bound, step, largest):
    if math.isinf(bound):
        return bound
    moved = bound + abs(bound) * step
    return moved if abs(moved) <= largest else math.copysign(INF, moved)


def _is_float(node):
    val = node.meta.get("val") if isinstance(node, fx.Node) else None
    return isinstance(val, torch.Tensor) and val.dtype.is_floating_point


def _target_name(arg):
    return getattr(arg.target, "name", None) if isinstance(arg, fx.Node) else None


def _argument(node, position, name):
    """A reduction's argument, passed by position or by name (None: not passed)."""
    return node.args[position] if len(node.args) > position else node.kwargs.get(name)


def _is_max_of(row_max, x):
    """Whether `row_max` is ReduceMax(x, dims, keepdim=True): broadcast back over x."""
    return (
        _target_name(row_max) == "ReduceMax"
        and row_max.args[0] is x
        and _argument(row_max, 2, "keepdim") is True
    )


def _is_softmax_denominator(row_sum):
    """ReduceSum(Exp(x - ReduceMax(x, dims)), dims): the row maximum's term is exp(0) = 1."""
    exp = row_sum.args[0]
    if _target_name(exp) != "Exp" or _target_name(exp.args[0]) != "Sub":
        return False
    x, row_max = exp.args[0].args[:2]
    if not _is_max_of(row_max, x):
        return False
    max_dims, sum_dims = _argument(row_max, 1, "dims"), _argument(row_sum, 1, "dims")
    return max_dims is not None and sum_dims is not None and sorted(max_dims) == sorted(sum_dims)


def _reduced_count(row_sum):
    """The number of terms each sum adds, or None where it is not a static number."""
    x, dims = row_sum.args[0], _argument(row_sum, 1, "dims")
    sizes = x.meta["val"].shape if isinstance(x, fx.Node) and "val" in x.meta else None
    if sizes is None:
        return None
    count = 1
    for dim in dims or range(len(sizes)):
        if not isinstance(sizes[dim], int):
            return None
        count *= sizes[dim]
    return count
