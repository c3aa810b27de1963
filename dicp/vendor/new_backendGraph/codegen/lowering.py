"""Vendor op -> kernel IR, one row per op name: the loop-IR meaning of the vocabulary (its
C++ is cpp_render's, its Python py_render's).

A lowering gets the codegen context `g`, the vendor node and its arguments as IR values
(Buffer / Pointwise), Python scalars, sympy sizes or lists of those.
"""

import torch

from dicp.api import is_dense, shape_of, strides_of

from ..pointwise import POINTWISE
from .ctypes_map import compute_ctype
from .sym import contiguous_strides
from .values import Buffer, Pointwise, cast_value, load_broadcast

LOWERINGS = {}


def lowering(*names):
    def decorator(fn):
        for name in names:
            LOWERINGS[name] = fn
        return fn

    return decorator


def arg_dtype(arg):
    """dtype of a graph argument (node or Python scalar), for type promotion."""
    val = arg.meta["val"] if hasattr(arg, "meta") else arg
    return val.dtype if isinstance(val, torch.Tensor) else None


def promoted_dtype(node):
    vals = [a.meta["val"] if hasattr(a, "meta") else a for a in node.args]
    vals = [v if isinstance(v, (torch.Tensor, bool, int, float)) else 1 for v in vals]
    return torch.result_type(*vals) if len(vals) > 1 else vals[0].dtype


# Pointwise vendor ops that are one loop IR op of the same name (their rows in pointwise.py):
# the others have a lowering function of their own below.
UNARY = tuple(row.name for row in POINTWISE if row.family == "unary" and row.compute != "custom")
BINARY = tuple(row.name for row in POINTWISE if row.family == "binary" and row.compute != "custom")
# Integer-valued ops that are identities on integers (std:: versions return double).
INTEGER_IDENTITY = {row.name for row in POINTWISE if row.integer_identity}
# These compute in the promoted input type; the rest compute in the output type.
COMPUTE_IN_INPUT_TYPE = {row.name for row in POINTWISE if row.compute == "input"}


HALF_TYPES = (torch.float16, torch.bfloat16)
# Eager's CPU kernels of these read a scalar second operand (a Python number or a 0-d tensor)
# in float when they compute in a half type; other ops round it to the half type first, except
# that pow reads a Python exponent in float too (pow_tensor_scalar).
SCALAR_AT_OPMATH = {"Mul", "Div", "FloorDiv", "TruncDiv"}
NUMBER_AT_OPMATH = SCALAR_AT_OPMATH | {"Pow"}


def load_operand(k, value, index, dtype, out_sizes, second_of=None):
    """Operand `value` for math in `dtype`, with a scalar operand as precise as eager has it in
    half types (`second_of`: the op's name when `value` is its second operand): rounded to the
    half type (x_bf16 % 1.1237 is x % 1.125), or where eager reads it in float, in float (x_bf16
    // y for a float32 0-d y floors x / y, not x / bf16(y)). Found by the fuzzer: up to 1 in 4
    elements of bfloat16 floor_divide, remainder and fmod by a scalar differed from eager."""
    if dtype in HALF_TYPES:
        if isinstance(value, (bool, int, float)) and second_of not in NUMBER_AT_OPMATH:
            value = torch.tensor(value, dtype=torch.float64).to(dtype).item()
        elif (
            second_of in SCALAR_AT_OPMATH
            and isinstance(value, (Buffer, Pointwise))
            and not value.sizes
            and value.dtype in (torch.float32, torch.float64)
        ):
            return cast_value(k, value.load(k, []), value.dtype, torch.float32)
    return load_broadcast(k, value, index, dtype, out_sizes)


def new_buffer(g, fake, strides=None, dtype=None):
    """A fresh buffer shaped like `fake` (of its dtype unless `dtype` is given): contiguous
    unless `strides` are given."""
    sizes, dtype = shape_of(fake), dtype or fake.dtype
    strides = strides if strides is not None else contiguous_strides(sizes)
    return Buffer(g.wrapper.allocate(dtype, sizes, strides), dtype, sizes, strides)


def dense_strides(fake):
    """`fake`'s strides when its layout is dense (a channels-last value), else None (which
    new_buffer and realize read as contiguous)."""
    strides = strides_of(fake)
    return strides if is_dense(shape_of(fake), strides) else None


def buffer_in_layout_of(g, fake, dtype=None):
    """A fresh buffer for `fake` in `fake`'s own layout when that is dense (a channels-last
    value stays channels-last, so its readers take it without a copy), contiguous otherwise."""
    return new_buffer(g, fake, dense_strides(fake), dtype)


def _pointwise(g, node, op):
    """A lazy value computing loop IR op `op` on broadcast operands, or `op(k, T, operands)`
    when `op` is a function (T: the compute type of the op's dtype)."""
    out_dtype = node.meta["val"].dtype
    name = node.target.name
    dtype = promoted_dtype(node) if name in COMPUTE_IN_INPUT_TYPE else out_dtype
    operands = node.args
    result_type = compute_ctype(out_dtype)
    sizes = shape_of(node.meta["val"])

    def fn(k, index):
        loaded = [
            load_operand(k, g.value(a), index, dtype, sizes, name if position == 1 else None)
            for position, a in enumerate(operands)
        ]
        if callable(op):
            return op(k, compute_ctype(dtype), loaded)
        return in_range_of(k, k.op(op, result_type, *loaded), out_dtype)

    return Pointwise(out_dtype, sizes, fn)


def in_range_of(k, value, dtype):
    """A float16 op's `value`, computed in float, rounded to float16 as eager stores it: past
    65504 it is inf, as eager's is, and every later use sees that (the fuzzer, seed 5151: an
    unrounded 66051 divided by its own norm, rounded to inf, gave 0 where eager gives NaN).
    bfloat16 has float's range; its ops keep float's precision until stored."""
    if dtype != torch.float16:
        return value
    return cast_value(k, value, torch.float32, dtype)


@lowering(*UNARY)
def unary(g, node, x):
    name = node.target.name
    if name in INTEGER_IDENTITY and not node.meta["val"].is_floating_point():
        return _pointwise(g, node, lambda k, T, v: v[0])
    if name == "Erf" and g.value_range(node.args[0]).inside(1.0):
        name = "ErfCentral"  # the same values there, without the tail's exp
    return _pointwise(g, node, name)


@lowering("BitwiseNot")
def bitwise_not(g, node, x):
    return _pointwise(
        g, node, "LogicalNot" if node.meta["val"].dtype == torch.bool else "BitwiseNot"
    )


@lowering(*BINARY)
def binary(g, node, a, b):
    return _pointwise(g, node, node.target.name)


# Eager's pow by a number special-cases these exponents for float, double and bfloat16
# (ATen's PowKernel.cpp), which rounds otherwise than std::pow (x ** 3 is (x * x) * x) and
# differs at -0 and -inf: x ** 0.5 is sqrt(x), -0 at -0 and NaN at -inf, where std::pow gives
# +0 and +inf. bfloat16 rounds x * x to bfloat16 before using it again. float16 goes to pow.
POW_BY_NUMBER_DTYPES = (torch.float32, torch.float64, torch.bfloat16)
POW_BY_NUMBER = (0.5, -0.5, -1.0, 2.0, 3.0, -2.0)


def _pow_by_number(k, x, exponent, dtype):
    T = compute_ctype(dtype)
    if exponent in (0.5, -0.5, -1):
        return k.op({0.5: "Sqrt", -0.5: "Rsqrt", -1: "Reciprocal"}[exponent], T, x)
    square = cast_value(k, k.op("Mul", T, x, x), torch.float32, dtype)  # rounded if bf16
    if exponent == 2:
        return square
    return k.op("Mul", T, square, x) if exponent == 3 else k.op("Reciprocal", T, square)


@lowering("Pow")
def pow_(g, node, a, b):
    dtype = node.meta["val"].dtype
    number = isinstance(b, (int, float)) and not isinstance(b, bool)
    if number and b < 0 and not dtype.is_floating_point and not dtype.is_complex:
        raise RuntimeError("Integers to negative integer powers are not allowed.")  # as eager
    if number and dtype in POW_BY_NUMBER_DTYPES and float(b) in POW_BY_NUMBER:
        x, sizes = g.value(a), shape_of(node.meta["val"])
        return Pointwise(
            dtype,
            sizes,
            lambda k, index: _pow_by_number(
                k, load_operand(k, x, index, dtype, sizes), float(b), dtype
            ),
        )
    return _pointwise(g, node, "Pow" if node.meta["val"].is_floating_point() else "IPow")


@lowering("Fmod")
def fmod(g, node, a, b):
    return _pointwise(g, node, "Fmod" if node.meta["val"].is_floating_point() else "IMod")


@lowering("Where")
def where(g, node, cond, a, b):
    out_dtype = node.meta["val"].dtype
    cond, a, b = g.value(cond), g.value(a), g.value(b)

    sizes = shape_of(node.meta["val"])

    def fn(k, index):
        c = load_broadcast(k, cond, index, torch.bool, sizes)
        x = load_broadcast(k, a, index, out_dtype, sizes)
        y = load_broadcast(k, b, index, out_dtype, sizes)
        return k.op("Where", compute_ctype(out_dtype), c, x, y)

    return Pointwise(out_dtype, sizes, fn)


@lowering("Convert")
def convert(g, node, x, dtype):
    x = g.value(x)
    return Pointwise(
        dtype, list(x.sizes), lambda k, index: cast_value(k, x.load(k, index), x.dtype, dtype)
    )


@lowering("Copy")
def copy(g, node, x):
    x = g.value(x)
    return Pointwise(x.dtype, list(x.sizes), x.load)


@lowering("Full")
def full(g, node, size, value, dtype, device=None):
    sizes = shape_of(node.meta["val"])
    return Pointwise(dtype, sizes, lambda k, index: load_broadcast(k, value, index, dtype, sizes))


@lowering("Iota")
def iota(g, node, length, start, step, dtype, device=None):
    ctype = compute_ctype(dtype)
    sizes = shape_of(node.meta["val"])

    def fn(k, index):
        first = load_broadcast(k, start, index, dtype, sizes)
        stride = load_broadcast(k, step, index, dtype, sizes)
        return k.op("Iota", ctype, first, k.index(index[0]), stride)

    return Pointwise(dtype, sizes, fn)


@lowering("Tril", "Triu")
def triangle(g, node, x, diagonal=0):
    x = g.value(x)
    ctype = compute_ctype(x.dtype)

    def fn(k, index):
        value = x.load(k, index)
        return k.op(
            node.target.name,
            ctype,
            k.index(index[-2]),
            k.index(index[-1]),
            k.index(diagonal),
            value,
        )

    return Pointwise(x.dtype, list(x.sizes), fn)
