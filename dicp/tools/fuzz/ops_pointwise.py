"""Catalog: pointwise ops (unary, binary with broadcasting and type promotion, where, clamp,
comparisons, casts). Each entry proposes an expression over the generator's values; eager
decides at every size whether it is a valid program (see generate.py)."""

import torch

from .inputs import ALL_DTYPES, FLOAT_DTYPES, INT_DTYPES

UNARY = (
    "abs",
    "neg",
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "sin",
    "cos",
    "tanh",
    "sigmoid",
    "relu",
    "erf",
    "reciprocal",
    "floor",
    "ceil",
    "round",
    "trunc",
    "sign",
    "log1p",
    "expm1",
    "atan",
    "square",
    "logical_not",
    "bitwise_not",
    "isnan",
    "isinf",
    "frac",
    "exp2",
    "log2",
    "sinh",
    "cosh",
    "asin",
    "acos",
    "nan_to_num",
)
ACTIVATIONS = (
    "F.gelu({x})",
    "F.silu({x})",
    "F.softplus({x})",
    "F.leaky_relu({x}, 0.1)",
    "F.elu({x})",
    "F.hardtanh({x})",
    "F.hardswish({x})",
    "F.relu6({x})",
)
BINARY_FUNCTIONS = (
    "add",
    "sub",
    "mul",
    "div",
    "floor_divide",
    "remainder",
    "fmod",
    "maximum",
    "minimum",
    "pow",
    "atan2",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "logical_and",
    "logical_or",
    "logical_xor",
)
BINARY_OPERATORS = ("+", "-", "*", "/", "//", "%", "**", "&", "|", "^")
COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")
CAST_METHODS = {
    torch.float32: ".float()",
    torch.float16: ".half()",
    torch.bfloat16: ".bfloat16()",
    torch.float64: ".double()",
    torch.int64: ".long()",
    torch.int32: ".int()",
    torch.bool: ".bool()",
}


def unary(g):
    x = g.pick()
    if g.rng.random() < 0.2:
        return g.rng.choice(ACTIVATIONS).format(x=x)
    name = g.rng.choice(UNARY)
    return f"torch.{name}({x})" if g.rng.random() < 0.6 else f"{x}.{name}()"


def scalar_literal(g, kind=None):
    kind = kind or g.rng.choice(("float", "int", "int", "bool", "float"))
    if kind == "bool":
        return g.rng.choice(("True", "False"))
    if kind == "int":
        return str(g.rng.choice((-3, -1, 0, 1, 2, 3, 5)))
    return repr(g.rng.choice((-2.5, -1.0, -0.5, 0.0, 0.5, 1.5, 2.0, 3.25)))


# Python numbers computed from a size. Under dynamic shapes each is a symbolic expression
# the backend prints into its kernels (kornia's blur sigma, max(0.001, (h / 11 - 1) / 2),
# printed as an integer max, was 0).
SIZE_NUMBERS = (
    "({n} / 3 - 0.5)",
    "max({n} / 7, 0.25)",
    "min({n} * 0.3, 2.0)",
    "round({n} / 2)",
    "(({n} * 1.0) % 2.5)",
    "({n} % 3)",
    "({n} // 2 - 1)",
    "int({n} * 0.7)",
    "-({n} ** 0.5)",
)


def size_number(g, x):
    """A number computed from one of `x`'s sizes (a literal for a 0-d `x`)."""
    rank = len(g.dims(x))
    if not rank:
        return scalar_literal(g)
    return g.rng.choice(SIZE_NUMBERS).format(n=f"{x}.shape[{g.rng.randrange(rank)}]")


def broadcast_dims(g, dims):
    """Dims that broadcast with `dims`: a suffix of them, some set to 1, or some of their 1s
    widened, maybe with a new leading dim."""
    dims = list(dims)
    roll = g.rng.random()
    if roll < 0.25 and dims:
        dims = dims[g.rng.randrange(len(dims)) :]
    ones = (1,) * g.configs
    dims = [ones if g.rng.random() < 0.25 else d for d in dims]
    dims = [g.random_size(one=0) if d == ones and g.rng.random() < 0.3 else d for d in dims]
    if roll > 0.85 and len(dims) < 4:
        dims = [g.random_size()] + dims
    return tuple(dims)


def broadcastable(g, a, b):
    """Whether values a and b broadcast together at every configuration."""
    da, db = g.dims(a)[::-1], g.dims(b)[::-1]
    return all(x == y or set(x) == {1} or set(y) == {1} for x, y in zip(da, db))


def other_operand(g, a, dtypes=ALL_DTYPES):
    """A second operand for `a`: a Python scalar, a 0-d tensor, an existing value that
    broadcasts with `a`, or a new input of broadcast-compatible shape (any dtype)."""
    roll = g.rng.random()
    if roll < 0.04:
        return size_number(g, a)
    if roll < 0.25:
        return scalar_literal(g)
    if roll < 0.35:
        return g.new_input((), g.random_dtype(dtypes))
    if roll < 0.6:
        other = g.pick(lambda n: n != a and broadcastable(g, a, n), recent=0)
        if other is not None:
            return other
    return g.new_input(broadcast_dims(g, g.dims(a)), g.random_dtype(dtypes))


def binary(g, dtypes=ALL_DTYPES):
    a = g.pick()
    b = other_operand(g, a, dtypes)
    if g.rng.random() < 0.3:
        a, b = b, a
    if g.rng.random() < 0.5:
        name = g.rng.choice(BINARY_FUNCTIONS)
        extra = ""
        if name in ("add", "sub") and g.rng.random() < 0.3:
            extra = f", alpha={g.rng.choice((2, -1, 3))}"
        elif name == "div" and g.rng.random() < 0.4:
            extra = f", rounding_mode={g.rng.choice(('floor', 'trunc'))!r}"
        return f"torch.{name}({a}, {b}{extra})"
    return f"({a} {g.rng.choice(BINARY_OPERATORS)} {b})"


def promotion(g):
    """A binary op whose operands come from different dtype categories or widths."""
    a = g.pick()
    kind = g.dtype(a)
    others = [d for d in ALL_DTYPES if d != kind]
    return binary_with(g, a, other_operand(g, a, others))


def binary_with(g, a, b):
    op = g.rng.choice(("+", "-", "*", "/", "torch.maximum", "torch.where", "torch.lerp"))
    if op == "torch.where":
        return (
            f"torch.where({a} > 0, {a}, {b})"
            if g.rng.random() < 0.5
            else f"torch.where({b} != 0, {b}, {a})"
        )
    if op == "torch.lerp":
        return f"torch.lerp({a}, {b}, 0.25)"
    if op.startswith("torch."):
        return f"{op}({a}, {b})"
    return f"({a} {op} {b})"


def comparison(g):
    a = g.pick()
    b = other_operand(g, a)
    if g.rng.random() < 0.3:
        names = ("eq", "ne", "lt", "le", "gt", "ge")
        return f"torch.{g.rng.choice(names)}({a}, {b})"
    return f"({a} {g.rng.choice(COMPARISONS)} {b})"


def where(g):
    a = g.pick()
    roll = g.rng.random()
    if roll < 0.4:
        condition = f"({g.pick(recent=0)} > {scalar_literal(g, 'float')})"
    elif roll < 0.7:
        condition = g.new_input(broadcast_dims(g, g.dims(a)), torch.bool)
    else:
        condition = g.pick(lambda n: g.dtype(n) == torch.bool and broadcastable(g, a, n))
        condition = condition or g.new_input(g.dims(a), torch.bool)
    b = other_operand(g, a)
    if g.rng.random() < 0.5:
        a, b = b, a
    return f"torch.where({condition}, {a}, {b})"


def clamp(g):
    x = g.pick(lambda n: g.dtype(n) != torch.bool)
    if x is None:
        return None
    integer = not g.dtype(x).is_floating_point
    low, high = (
        sorted(g.rng.sample((-2, -1, 0, 1, 2, 3), 2))
        if integer
        else sorted(g.rng.sample((-1.5, -0.5, 0.0, 0.25, 1.0, 2.5), 2))
    )
    roll = g.rng.random()
    if roll < 0.2:
        return f"{x}.clamp_min({low})"
    if roll < 0.3:
        return f"{x}.clamp_max({high})"
    if roll < 0.45:
        bound = g.new_input(broadcast_dims(g, g.dims(x)), g.dtype(x))
        return (
            f"torch.clamp({x}, min={bound})"
            if g.rng.random() < 0.5
            else f"torch.clamp({x}, max={bound})"
        )
    if roll < 0.5:  # min above max: every element becomes max
        return f"torch.clamp({x}, min={high}, max={low})"
    return f"torch.clamp({x}, min={low}, max={high})"


def cast(g):
    x = g.pick()
    target = g.random_dtype()
    if g.rng.random() < 0.5:
        return f"{x}{CAST_METHODS[target]}"
    return f"{x}.to({target})"


CATALOG = {
    unary: ("pointwise", 6),
    binary: ("pointwise", 8),
    comparison: ("pointwise", 3),
    where: ("pointwise", 3),
    clamp: ("pointwise", 2),
    cast: ("promotion", 3),
    promotion: ("promotion", 4),
}

__all__ = [
    "CATALOG",
    "FLOAT_DTYPES",
    "INT_DTYPES",
    "broadcast_dims",
    "other_operand",
    "scalar_literal",
]
