"""ATen -> OpenVINO opset ops: elementwise, comparisons, reductions and matmul.

A converter gets the ATen node's arguments (tensors already converted) and returns OpenVINO op
nodes. OpenVINO broadcasts like numpy but does not promote types, so every converter casts its
operands to the dtype torch computes in (`cast`). Layout, indexing and creation ops are in
conversion_layout.py, which adds its rows to CONVERSIONS (the package imports both).
"""

import math

import torch

from dicp.api import Unsupported, is_symbolic, opmath_dtype, register_conversion, to_sympy

from .opset import OPS

aten = torch.ops.aten
prims = torch.ops.prims
CONVERSIONS = {}


def op(ctx, name, *args):
    return ctx.op(OPS[name], *args)


def is_tensor(ctx, arg):
    return isinstance(ctx.val(arg), torch.Tensor)


def scalar(ctx, arg):
    """A Python or symbolic number argument (SymInt nodes become their SymInt)."""
    value = ctx.val(arg)
    if isinstance(value, torch.Tensor):
        raise Unsupported("a tensor where a number was expected")
    return value


def cast(ctx, arg, dtype):
    """`arg` (a tensor node or a number) as an OpenVINO value of `dtype`."""
    if not is_tensor(ctx, arg):
        return op(ctx, "Constant", scalar(ctx, arg), dtype)
    return arg if ctx.val(arg).dtype == dtype else op(ctx, "Convert", arg, dtype)


def promoted(ctx, *args):
    """The dtype torch computes `args` in (numbers take part as Python numbers)."""
    values = [ctx.val(a) for a in args]
    values = [v if isinstance(v, torch.Tensor) else _as_python_number(v) for v in values]
    return torch.result_type(*values) if len(values) > 1 else values[0].dtype


def _as_python_number(value):
    if isinstance(value, (bool, torch.SymBool)):
        return True
    if isinstance(value, (int, torch.SymInt)):
        return 1
    return 1.0


def broadcast_to_out(ctx, x):
    """`x` broadcast to the result's shape. A 0-d result is a Reshape: OpenVINO's CPU plugin
    (2026.4) segfaults compiling a Broadcast to an empty shape of a non-constant value, such as
    a scalar_tensor of a symbolic size under dynamic=True. A result with no elements is an
    empty slice of `x` reshaped: a Broadcast to it divides by a zero size (SIGFPE) from an
    empty input and keeps the input's shape ((1, 3) to (0, 3) gave (1, 3)) from another."""
    if ctx.out.dim() == 0:
        return op(ctx, "Reshape", x, [], False)
    if _no_elements(ctx.out):
        flat = op(ctx, "Reshape", x, [-1], False)
        return op(
            ctx, "Reshape", op(ctx, "Slice", flat, [0], [0], [1], [0]), list(ctx.out.shape), False
        )
    return op(ctx, "Broadcast", x, list(ctx.out.shape))


def _no_elements(value) -> bool:
    return any(isinstance(size, int) and size == 0 for size in value.shape)


def all_axes(ctx, x):
    return list(range(ctx.val(x).dim()))


# ---- elementwise ----
UNARY_ROWS = {
    aten.abs: "Abs",
    aten.neg: "Negative",
    aten.exp: "Exp",
    aten.log: "Log",
    aten.sqrt: "Sqrt",
    aten.sin: "Sin",
    aten.cos: "Cos",
    aten.tan: "Tan",
    aten.tanh: "Tanh",
    aten.sigmoid: "Sigmoid",
    aten.relu: "Relu",
    aten.erf: "Erf",
    aten.sign: "Sign",
    aten.asin: "Asin",
    aten.acos: "Acos",
    aten.atan: "Atan",
    aten.sinh: "Sinh",
    aten.cosh: "Cosh",
}
INTEGER_IDENTITY = {aten.floor: "Floor", aten.ceil: "Ceiling"}  # exact on integers
PREDICATES = {aten.isnan: "IsNaN", aten.isinf: "IsInf"}
BINARY_ROWS = {
    aten.mul: "Multiply",
    aten.remainder: "FloorMod",
    aten.fmod: "Mod",
}
COMPARISONS = {
    aten.eq: "Equal",
    aten.ne: "NotEqual",
    aten.lt: "Less",
    aten.le: "LessEqual",
    aten.gt: "Greater",
    aten.ge: "GreaterEqual",
}
LOGICAL = {
    aten.logical_and: "LogicalAnd",
    aten.logical_or: "LogicalOr",
    aten.logical_xor: "LogicalXor",
}
BITWISE = {
    aten.bitwise_and: ("BitwiseAnd", "LogicalAnd"),
    aten.bitwise_or: ("BitwiseOr", "LogicalOr"),
    aten.bitwise_xor: ("BitwiseXor", "LogicalXor"),
}


def unary(name):
    def convert(ctx, x, *rest):
        return op(ctx, name, cast(ctx, x, ctx.out.dtype))

    return convert


def integer_identity(name):
    def convert(ctx, x):
        return op(ctx, name, x) if ctx.out.dtype.is_floating_point else x

    return convert


def predicate(name):
    def convert(ctx, x):
        if not ctx.val(x).dtype.is_floating_point:
            return broadcast_to_out(ctx, op(ctx, "Constant", False, torch.bool))
        return op(ctx, name, x)

    return convert


def binary(name):
    def convert(ctx, a, b):
        return in_arithmetic_type(ctx, name, ctx.out.dtype, a, b)

    return convert


def in_arithmetic_type(ctx, name, dtype, *args, leading=()):
    """OpenVINO op `name` on `leading` as they are and `args` as `dtype`. Its arithmetic has no
    boolean element type (a bool mul, maximum or where did not compile), so a bool result is
    computed in u8: on 0 and 1 that is exact, and Convert reads any nonzero as true."""
    compute = torch.uint8 if dtype == torch.bool else dtype
    result = op(ctx, name, *leading, *(cast(ctx, a, compute) for a in args))
    return result if compute == dtype else op(ctx, "Convert", result, dtype)


def comparison(name):
    def convert(ctx, a, b):
        dtype = promoted(ctx, a, b)
        return op(ctx, name, cast(ctx, a, dtype), cast(ctx, b, dtype))

    return convert


def logical(name):
    def convert(ctx, a, b):
        return op(ctx, name, cast(ctx, a, torch.bool), cast(ctx, b, torch.bool))

    return convert


def bitwise(names):
    def convert(ctx, a, b):
        if ctx.out.dtype == torch.bool:
            return logical(names[1])(ctx, a, b)
        return binary(names[0])(ctx, a, b)

    return convert


for table, make in (
    (UNARY_ROWS, unary),
    (INTEGER_IDENTITY, integer_identity),
    (PREDICATES, predicate),
    (BINARY_ROWS, binary),
    (COMPARISONS, comparison),
    (LOGICAL, logical),
    (BITWISE, bitwise),
):
    for aten_op, vendor in table.items():
        register_conversion(CONVERSIONS, aten_op)(make(vendor))


@register_conversion(CONVERSIONS, [aten.add, aten.sub])
def add_sub(ctx, a, b, alpha=1):
    dtype = ctx.out.dtype
    b = cast(ctx, b, dtype)
    if dtype == torch.bool:  # no boolean Add in OpenVINO; a + alpha * b is a | (b & alpha)
        if not alpha:
            b = op(ctx, "LogicalAnd", b, cast(ctx, False, dtype))
        return op(ctx, "LogicalOr", cast(ctx, a, dtype), b)
    if alpha != 1:
        b = op(ctx, "Multiply", b, cast(ctx, alpha, dtype))
    name = "Add" if ctx.node.target.overloadpacket is aten.add else "Subtract"
    return op(ctx, name, cast(ctx, a, dtype), b)


# A name: torch defines the op only when dynamo first writes it (new_backendgraph's row).
@register_conversion(CONVERSIONS, "prims.fma.default")
def fma(ctx, a, b, c):
    """`a * b + c`, dynamo's form of addcmul_/addcdiv_ with a value and add_ with a tensor
    alpha; half types in f32, rounded once, as eager's addcmul."""
    dtype = ctx.out.dtype
    compute = opmath_dtype(dtype)
    product = in_arithmetic_type(ctx, "Multiply", compute, a, b)
    return cast(ctx, in_arithmetic_type(ctx, "Add", compute, product, c), dtype)


@register_conversion(CONVERSIONS, [aten.maximum, aten.minimum])
def maximum_minimum(ctx, a, b):
    """torch propagates NaN through maximum/minimum; OpenVINO's Maximum may not."""
    name = "Maximum" if ctx.node.target.overloadpacket is aten.maximum else "Minimum"
    dtype = ctx.out.dtype
    if not dtype.is_floating_point:
        return in_arithmetic_type(ctx, name, dtype, a, b)
    a, b = cast(ctx, a, dtype), cast(ctx, b, dtype)
    result = op(ctx, name, a, b)
    either_nan = op(ctx, "LogicalOr", op(ctx, "IsNaN", a), op(ctx, "IsNaN", b))
    return op(ctx, "Select", either_nan, op(ctx, "Add", a, b), result)


@register_conversion(CONVERSIONS, aten.pow)
def power(ctx, a, b):
    """OpenVINO's Power by 0.5 or -0.5 is (r)sqrt's: -0 at -0 and NaN at -inf. Eager's is too
    for float32, float64 and bfloat16, but float16 goes to std::pow (ATen's PowKernel.cpp),
    whose answer at +-0 and -inf for an exponent that is no odd integer is |x|'s."""
    if ctx.out.dtype == torch.float16 and b in (0.5, -0.5):
        x = cast(ctx, a, torch.float16)
        edge = op(
            ctx, "LogicalOr", op(ctx, "Equal", x, cast(ctx, 0, torch.float16)), op(ctx, "IsInf", x)
        )
        a = op(ctx, "Select", edge, op(ctx, "Abs", x), x)
    return binary("Power")(ctx, a, b)


@register_conversion(CONVERSIONS, aten.log1p)
def log1p(ctx, x):
    """log(1 + x) accurate for small x: log(u) * x / (u - 1) with u = 1 + x (u == 1: x)."""
    dtype = ctx.out.dtype
    x = cast(ctx, x, dtype)
    u = op(ctx, "Add", x, cast(ctx, 1, dtype))
    u_minus_1 = op(ctx, "Subtract", u, cast(ctx, 1, dtype))
    scaled = op(ctx, "Divide", op(ctx, "Multiply", op(ctx, "Log", u), x), u_minus_1)
    exact = op(ctx, "Equal", u, cast(ctx, 1, dtype))
    return op(ctx, "Select", exact, x, op(ctx, "Select", op(ctx, "IsInf", u), u, scaled))


@register_conversion(CONVERSIONS, aten.expm1)
def expm1(ctx, x):
    """exp(x) - 1 accurate for small x: (u - 1) * x / log(u) with u = exp(x)."""
    dtype = ctx.out.dtype
    x = cast(ctx, x, dtype)
    u = op(ctx, "Exp", x)
    u_minus_1 = op(ctx, "Subtract", u, cast(ctx, 1, dtype))
    scaled = op(ctx, "Divide", op(ctx, "Multiply", u_minus_1, x), op(ctx, "Log", u))
    exact = op(ctx, "Equal", u, cast(ctx, 1, dtype))
    saturated = op(
        ctx, "LogicalOr", op(ctx, "IsInf", u), op(ctx, "Equal", u_minus_1, cast(ctx, -1, dtype))
    )
    return op(ctx, "Select", exact, x, op(ctx, "Select", saturated, u_minus_1, scaled))


@register_conversion(CONVERSIONS, aten.rsqrt)
def rsqrt(ctx, x):
    dtype = ctx.out.dtype
    return op(ctx, "Divide", cast(ctx, 1, dtype), op(ctx, "Sqrt", cast(ctx, x, dtype)))


@register_conversion(CONVERSIONS, aten.reciprocal)
def reciprocal(ctx, x):
    dtype = ctx.out.dtype
    return op(ctx, "Divide", cast(ctx, 1, dtype), cast(ctx, x, dtype))


@register_conversion(CONVERSIONS, [aten.logical_not, aten.bitwise_not])
def logical_not(ctx, x):
    if ctx.out.dtype == torch.bool:
        return op(ctx, "LogicalNot", cast(ctx, x, torch.bool))
    return op(ctx, "BitwiseNot", x)


@register_conversion(CONVERSIONS, aten.round)
def round_half_even(ctx, x, decimals=0):
    if not ctx.out.dtype.is_floating_point:
        return x
    if decimals == 0:
        return op(ctx, "Round", x, "half_to_even")
    # as torch: nearbyint(x * 10^d) / 10^d, or nearbyint(x / 10^-d) * 10^-d for d < 0
    scale = cast(ctx, 10.0 ** abs(decimals), ctx.out.dtype)
    inward, outward = ("Multiply", "Divide") if decimals > 0 else ("Divide", "Multiply")
    return op(ctx, outward, op(ctx, "Round", op(ctx, inward, x, scale), "half_to_even"), scale)


@register_conversion(CONVERSIONS, aten.silu)
def silu(ctx, x):
    """Swish with beta 1 given in x's type: the opset function's default beta is an f32
    constant, which Swish refuses next to f16 data (LLaMA in float16 failed to compile)."""
    dtype = ctx.out.dtype
    return op(ctx, "Swish", cast(ctx, x, dtype), cast(ctx, 1, dtype))


@register_conversion(CONVERSIONS, aten.gelu)
def gelu(ctx, x, approximate="none"):
    return op(ctx, "Gelu", x, "erf" if approximate == "none" else "tanh")


def trunc_value(ctx, x):
    """Rounding toward zero: sign(x) * floor(|x|)."""
    return op(ctx, "Multiply", op(ctx, "Sign", x), op(ctx, "Floor", op(ctx, "Abs", x)))


def integer_floor_divide(ctx, a, b):
    """(a - floor_mod(a, b)) / b: exact, and OpenVINO's integer Divide truncates."""
    return op(ctx, "Divide", op(ctx, "Subtract", a, op(ctx, "FloorMod", a, b)), b)


def float_floor_divide(ctx, a, b, dtype):
    """As torch's div_floor: (a - fmod(a, b)) / b, one less where the remainder's sign
    differs from b's, rounded to the integer it stands for; plain a / b where b == 0."""
    mod = op(ctx, "Mod", a, b)
    quotient = op(ctx, "Divide", op(ctx, "Subtract", a, mod), b)
    zero = cast(ctx, 0, dtype)
    signs_differ = op(ctx, "NotEqual", op(ctx, "Less", b, zero), op(ctx, "Less", mod, zero))
    adjust = op(ctx, "LogicalAnd", op(ctx, "NotEqual", mod, zero), signs_differ)
    quotient = op(
        ctx, "Select", adjust, op(ctx, "Subtract", quotient, cast(ctx, 1, dtype)), quotient
    )
    rounded = op(ctx, "Round", quotient, "half_to_even")
    plain = op(ctx, "Floor", op(ctx, "Divide", a, b))
    return op(ctx, "Select", op(ctx, "Equal", b, zero), plain, rounded)


@register_conversion(CONVERSIONS, [aten.div, aten.true_divide])
def div(ctx, a, b, rounding_mode=None):
    dtype = ctx.out.dtype
    a, b = cast(ctx, a, dtype), cast(ctx, b, dtype)
    if rounding_mode == "floor":
        return (
            float_floor_divide(ctx, a, b, dtype)
            if dtype.is_floating_point
            else integer_floor_divide(ctx, a, b)
        )
    quotient = op(ctx, "Divide", a, b)
    if not dtype.is_floating_point or rounding_mode is None:
        return quotient
    return trunc_value(ctx, quotient)


@register_conversion(CONVERSIONS, aten.trunc)
def trunc(ctx, x):
    return trunc_value(ctx, x) if ctx.out.dtype.is_floating_point else x


@register_conversion(CONVERSIONS, aten.where.self)
def where(ctx, condition, a, b):
    return in_arithmetic_type(
        ctx, "Select", ctx.out.dtype, a, b, leading=(cast(ctx, condition, torch.bool),)
    )


@register_conversion(
    CONVERSIONS, [aten.clamp.default, aten.clamp.Tensor, aten.clamp_min, aten.clamp_max]
)
def clamp(ctx, x, low=None, high=None):
    if ctx.node.target.overloadpacket is aten.clamp_max:
        low, high = None, low
    dtype = ctx.out.dtype
    x = cast(ctx, x, dtype)
    if low is not None:
        x = op(ctx, "Maximum", x, cast(ctx, low, dtype))
    if high is not None:
        x = op(ctx, "Minimum", x, cast(ctx, high, dtype))
    return x


# ---- reductions ----
REDUCTIONS = {
    aten.sum: "ReduceSum",
    aten.mean: "ReduceMean",
    aten.amax: "ReduceMax",
    aten.amin: "ReduceMin",
    aten.any: "ReduceLogicalOr",
    aten.all: "ReduceLogicalAnd",
}


def reduction(name):
    def convert(ctx, x, dims=None, keepdim=False, dtype=None):
        if isinstance(dims, int):
            dims = [dims]
        axes = list(dims) if dims else all_axes(ctx, x)
        out_dtype = ctx.out.dtype
        source = cast(ctx, x, torch.bool if out_dtype == torch.bool else out_dtype)
        return op(ctx, name, source, axes, keepdim)

    return convert


for aten_op, vendor in REDUCTIONS.items():
    register_conversion(CONVERSIONS, aten_op)(reduction(vendor))


@register_conversion(CONVERSIONS, aten.prod)
def prod(ctx, x, dim=None, keepdim=False, dtype=None):
    if isinstance(dim, torch.dtype):  # prod.default(x, dtype)
        dim = None  # the result's dtype (ctx.out) is the one asked for
    axes = [dim] if dim is not None else all_axes(ctx, x)
    return op(ctx, "ReduceProd", cast(ctx, x, ctx.out.dtype), axes, keepdim)


@register_conversion(CONVERSIONS, [aten.var.correction, aten.var_mean.correction])
def var(ctx, x, dims=None, correction=None, keepdim=False):
    """sum(((x - mean) / sqrt(D))^2), D = max(0, N - correction), N the number of reduced
    elements: the deviations are scaled before they are squared and summed, since
    sum((x - mean)^2) passes float's range where the variance does not (values of 1.5e19:
    inf against eager's 5.6e36, whose Welford sums in double)."""
    dtype = ctx.val(x).dtype
    if not dtype.is_floating_point:
        raise Unsupported("an integer input")
    axes = list(dims) if dims else all_axes(ctx, x)
    count = 1
    for axis in axes:
        count = count * ctx.val(x).shape[axis]
    mean = op(ctx, "ReduceMean", x, axes, True)
    diff = op(ctx, "Subtract", x, mean)
    divisor = max(0, count - (1 if correction is None else correction))
    scaled = op(ctx, "Multiply", diff, cast(ctx, divisor**-0.5 if divisor else math.inf, dtype))
    variance = op(ctx, "ReduceSum", op(ctx, "Multiply", scaled, scaled), axes, keepdim)
    if ctx.node.target is aten.var.correction:
        return variance
    return variance, mean if keepdim else op(ctx, "Reshape", mean, list(ctx.out[1].shape), False)


@register_conversion(CONVERSIONS, [aten.argmax, aten.argmin])
def argmax(ctx, x, dim=None, keepdim=False):
    """The first index of the extreme value (of the first NaN, as torch, when there is one)."""
    if (
        not ctx.val(x).dtype.is_floating_point
        and ctx.val(x).dtype != torch.int64
        and ctx.val(x).dtype != torch.int32
    ):
        raise Unsupported(f"dtype {ctx.val(x).dtype}")
    if dim is None or ctx.val(x).dim() == 0:
        x, dim = op(ctx, "Reshape", x, [-1], False), 0
    extreme = "ReduceMax" if ctx.node.target.overloadpacket is aten.argmax else "ReduceMin"
    hits = op(ctx, "Equal", x, op(ctx, extreme, x, [dim], True))
    if ctx.val(x).dtype.is_floating_point:
        nans = op(ctx, "IsNaN", x)
        hits = op(ctx, "Select", op(ctx, "ReduceLogicalOr", nans, [dim], True), nans, hits)
    size = ctx.val(x).shape[dim]
    rank = ctx.val(x).dim()
    positions = op(
        ctx,
        "Reshape",
        op(ctx, "Range", 0, size, 1, torch.int64),
        [-1] + [1] * (rank - 1 - dim % rank),
        False,
    )
    candidates = op(ctx, "Select", hits, positions, cast(ctx, size, torch.int64))
    return op(
        ctx, "Reshape", op(ctx, "ReduceMin", candidates, [dim], True), list(ctx.out.shape), False
    )


@register_conversion(CONVERSIONS, aten.cumsum)
def cumsum(ctx, x, dim, dtype=None):
    return op(ctx, "CumSum", cast(ctx, x, ctx.out.dtype), dim)


# ---- matmul family and softmax ----
@register_conversion(CONVERSIONS, [aten.mm, aten.bmm])
def matmul(ctx, a, b):
    dtype = ctx.out.dtype
    return op(ctx, "MatMul", cast(ctx, a, dtype), cast(ctx, b, dtype), False, False)


@register_conversion(CONVERSIONS, [aten.addmm, aten.baddbmm])
def addmm(ctx, bias, a, b, beta=1, alpha=1):
    dtype = ctx.out.dtype
    product = op(ctx, "MatMul", cast(ctx, a, dtype), cast(ctx, b, dtype), False, False)
    if alpha != 1:
        product = op(ctx, "Multiply", product, cast(ctx, alpha, dtype))
    if beta == 0:  # torch ignores bias (NaN included) when beta is 0
        return broadcast_to_out(ctx, product)
    bias = cast(ctx, bias, dtype)
    if beta != 1:
        bias = op(ctx, "Multiply", bias, cast(ctx, beta, dtype))
    return op(ctx, "Add", product, bias)


@register_conversion(CONVERSIONS, [aten._softmax, aten._log_softmax])
def softmax(ctx, x, dim, half_to_float):
    name = "Softmax" if ctx.node.target.overloadpacket is aten._softmax else "LogSoftmax"
    if ctx.val(x).dim() == 0:
        raise Unsupported("a 0-d input (OpenVINO's Softmax needs an axis)")
    return op(ctx, name, cast(ctx, x, ctx.out.dtype), dim)


@register_conversion(CONVERSIONS, aten._scaled_dot_product_flash_attention_for_cpu.default)
def attention(ctx, q, k, v, dropout_p=0.0, is_causal=False, *, attn_mask=None, scale=None):
    """softmax(q @ k^T * scale + mask) @ v and each row's logsumexp (the backward's input), in
    float32 as torch's CPU kernel accumulates; a fully masked row gives 0 and logsumexp 0, as
    there."""
    if dropout_p:
        raise Unsupported("dropout (random numbers)")
    f32 = torch.float32
    heads = ctx.val(q).shape[1]
    q, k, v = (cast(ctx, t, f32) for t in (q, k, v))
    k, v = kv_heads(ctx, k, heads), kv_heads(ctx, v, heads)
    scores = op(
        ctx, "Multiply", op(ctx, "MatMul", q, k, False, True), attention_scale(ctx, q, scale)
    )
    if attn_mask is not None:
        scores = masked_scores(ctx, scores, attn_mask)
    if is_causal:
        rows = op(ctx, "Unsqueeze", op(ctx, "Range", 0, ctx.val(q).shape[-2], 1, torch.int64), [1])
        cols = op(ctx, "Range", 0, ctx.val(k).shape[-2], 1, torch.int64)
        scores = op(
            ctx, "Select", op(ctx, "LessEqual", cols, rows), scores, cast(ctx, float("-inf"), f32)
        )
    top = op(ctx, "ReduceMax", scores, [-1], True)
    top = op(ctx, "Select", op(ctx, "IsInf", top), cast(ctx, 0, f32), top)  # no finite score
    exps = op(ctx, "Exp", op(ctx, "Subtract", scores, top))
    total = op(ctx, "ReduceSum", exps, [-1], True)
    empty = op(ctx, "Equal", total, cast(ctx, 0, f32))
    probs = op(ctx, "Divide", exps, op(ctx, "Select", empty, cast(ctx, 1, f32), total))
    out = cast(ctx, op(ctx, "MatMul", probs, v, False, False), ctx.out[0].dtype)
    logsumexp = op(
        ctx, "Select", empty, cast(ctx, 0, f32), op(ctx, "Add", op(ctx, "Log", total), top)
    )
    return out, op(ctx, "Squeeze", logsumexp, [-1])


def kv_heads(ctx, t, heads):
    """Keys or values with one head per query head: under grouped-query attention each of
    the H_kv heads serves H / H_kv consecutive query heads."""
    batch, kv, length, size = ctx.val(t).shape
    if to_sympy(kv) == to_sympy(heads):
        return t
    wide = op(
        ctx, "Broadcast", op(ctx, "Unsqueeze", t, [2]), [batch, kv, heads // kv, length, size]
    )
    return op(ctx, "Reshape", wide, [batch, heads, length, size], False)


def attention_scale(ctx, q, scale):
    """`scale`, or 1 / sqrt(head size) as torch computes it (in double for a static size)."""
    if scale is not None:
        return cast(ctx, scale, torch.float32)
    head = ctx.val(q).shape[-1]
    if not is_symbolic(head):
        return cast(ctx, 1.0 / math.sqrt(head), torch.float32)
    one = cast(ctx, 1, torch.float32)
    return op(ctx, "Divide", one, op(ctx, "Sqrt", cast(ctx, head, torch.float32)))


def masked_scores(ctx, scores, mask):
    if ctx.val(mask).dtype == torch.bool:
        return op(ctx, "Select", mask, scores, cast(ctx, float("-inf"), torch.float32))
    return op(ctx, "Add", scores, cast(ctx, mask, torch.float32))
