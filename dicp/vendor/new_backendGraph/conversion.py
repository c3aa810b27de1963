"""ATen -> new_backendgraph vendor ops: the conversion table.

One-to-one rows are data (the dicts below); converters with logic get a body. A converter
gets a ConversionContext and the ATen node's arguments (already converted) and returns the
vendor node(s). `raise Unsupported(reason)` sends the node to eager fallback.
"""

import math
import operator

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true

from dicp.api import Unsupported, opmath_dtype, register_conversion, traced_value

from .convolution import aten_takes_onednn, channels_last_only
from .opset import ops
from .pointwise import POINTWISE

aten = torch.ops.aten
prims = torch.ops.prims
CONVERSIONS = {}


def conversion(aten_ops):
    return register_conversion(CONVERSIONS, aten_ops)


def _same_args(vendor_op):
    def convert(ctx, *args, **kwargs):
        return ctx.op(vendor_op, *args, **kwargs)

    convert.__name__ = f"to_{vendor_op.name}"
    return convert


# Pointwise ops take theirs from their rows (pointwise.py).
ONE_TO_ONE = {
    **{aten_op: getattr(ops, row.name) for row in POINTWISE for aten_op in row.aten},
    aten.permute: ops.Permute,
    aten.expand: ops.Expand,
    aten.select.int: ops.Select,
    aten.gather: ops.Gather,
    aten.scatter_add: ops.ScatterAdd,
    aten.index.Tensor: ops.IndexTensor,
    aten.index_put: ops.IndexPut,
    aten.mm: ops.Mm,
    aten.bmm: ops.Bmm,
    aten.addmm: ops.Addmm,
    aten.baddbmm: ops.Baddbmm,
    aten.topk: ops.Topk,
    aten.tril: ops.Tril,
    aten.triu: ops.Triu,
    aten.constant_pad_nd: ops.ConstantPad,
    aten._scaled_dot_product_flash_attention_for_cpu: ops.FlashAttention,
    aten._scaled_dot_product_flash_attention_for_cpu_backward: ops.FlashAttentionBackward,
}
for _aten_op, _vendor_op in ONE_TO_ONE.items():
    conversion(_aten_op)(_same_args(_vendor_op))


@conversion(aten.convolution)
def convolution(ctx, x, weight, bias, stride, padding, dilation, transposed, *rest):
    """A plain NCHW float batch of static size runs channels-last (NHWC), where oneDNN is
    fastest (bench_workloads' conv net: 5.0 ms per convolution in NCHW, 3.2 ms in NHWC).
    Its result is channels-last, as eager's is for a channels-last input, and the kernels
    after it write channels-last too (CppCodegen.realize), so the next convolution gets NHWC
    without a copy. A problem ATen runs with its own direct algorithm rather than oneDNN's
    (a small one: convolution.aten_takes_onednn) stays NCHW, where that algorithm runs, and
    gets a channels-last input NCHW from our kernels (_nchw_for_aten)."""
    groups = rest[1] if len(rest) > 1 else 1
    nhwc = _nhwc_pays(x.meta["val"], weight.meta["val"], stride, dilation, transposed, groups)
    if nhwc:
        op = ops.ConvolutionNHWC
    else:
        op = ops.Convolution
        x = _nchw_for_aten(ctx, x, x, weight, stride, dilation, transposed, groups)
    return ctx.op(op, x, weight, bias, stride, padding, dilation, transposed, *rest)


@conversion(aten.convolution_backward)
def convolution_backward(ctx, grad, x, weight, bias_sizes, stride, padding, dilation, *rest):
    """A convolution whose input is a plain NCHW batch (the model's images) and whose
    gradient comes channels-last (the kernels after it ran channels-last) runs its backward
    with the input made channels-last too: given the NCHW input, ATen runs it NCHW and
    converts the gradient, an activation's size (0.26 ms per step for the ResNet-style CNN's
    stem, 16x16x32x32), where the input is a fraction of that (3 channels)."""
    transposed, groups = rest[0], rest[2]
    grad_val, x_val = grad.meta["val"], x.meta["val"]
    op = ops.ConvolutionBackward
    if _nhwc_pays(x_val, weight.meta["val"], stride, dilation, transposed, groups) and (
        channels_last_only(grad_val)
    ):
        op = ops.ConvolutionBackwardNHWC
    elif channels_last_only(x_val) and _nhwc_shapes(
        x_val, weight.meta["val"], stride, dilation, transposed, groups
    ):
        # ATen runs it channels-last as its input is; the NCHW gradient of a compiled
        # module's output is converted by a kernel of ours (CppCodegen._in_channels_last)
        # rather than ATen's strided copy
        op = ops.ConvolutionBackwardNHWC
    else:
        grad, x = (
            _nchw_for_aten(ctx, t, x, weight, stride, dilation, transposed, groups)
            for t in (grad, x)
        )
    return ctx.op(op, grad, x, weight, bias_sizes, stride, padding, dilation, *rest)


def _nchw_for_aten(ctx, t, x, weight, stride, dilation, transposed, groups):
    """Operand `t` of a convolution of input `x`, copied NCHW by a kernel of ours where it is
    channels-last and ATen runs the convolution with its own algorithm rather than oneDNN's
    (convolution.aten_takes_onednn: a 1x1 convolution of a small batch on one thread): that
    algorithm makes every operand NCHW with a strided copy (0.5 ms for an 8x32x32x32 input
    after a channels-last depthwise block, three such copies a training step), and its
    result is NCHW for the kernels after it to read."""
    x_val = x.meta["val"]
    if (
        transposed
        or not channels_last_only(t.meta["val"])
        or not _static_4d(x_val)
        or aten_takes_onednn(x_val, weight.meta["val"], stride, dilation, groups)
    ):
        return t
    return ctx.op(ops.Copy, t)


def _static_4d(val):
    return val.dim() == 4 and all(type(size) is int for size in val.shape)


def _nhwc_pays(x, weight, stride, dilation, transposed, groups):
    """Whether a convolution of a plain NCHW batch `x` runs faster channels-last."""
    return x.is_contiguous() and _nhwc_shapes(x, weight, stride, dilation, transposed, groups)


def _nhwc_shapes(x, weight, stride, dilation, transposed, groups):
    """Whether a convolution of these shapes and dtype runs faster channels-last, whatever
    `x`'s layout: oneDNN runs it, and NCHW and NHWC differ (more than one channel and pixel)."""
    return (
        not transposed
        and x.dtype in (torch.float32, torch.bfloat16)
        and _static_4d(x)
        and x.shape[1] > 1
        and x.shape[2] * x.shape[3] > 1
        and aten_takes_onednn(x, weight, stride, dilation, groups)
    )


# --- pointwise with logic -------------------------------------------------------------


@conversion([aten.add.Tensor, aten.add.Scalar])
def add(ctx, a, b, alpha=1):
    return _with_alpha(ctx, ops.Add, a, b, alpha)


@conversion([aten.sub.Tensor, aten.sub.Scalar])
def sub(ctx, a, b, alpha=1):
    return _with_alpha(ctx, ops.Sub, a, b, alpha)


def _with_alpha(ctx, vendor_op, a, b, alpha):
    """`a op alpha * b` as eager computes it: in the result's type (int8 + alpha * bool was
    int64; a bool result reads -1 as True, and was an int64 `a - b`), float16/bfloat16 in
    float32 and rounded once (rounding `alpha * b` first was 1 ulp off in 1 of 10 elements)."""
    dtype = ctx.out.dtype
    alpha = bool(alpha) if dtype == torch.bool else alpha
    if alpha == 1:
        return ctx.op(vendor_op, a, b)
    compute, number = dtype, lambda x: x
    if dtype in (torch.float16, torch.bfloat16):  # eager rounds its numbers to the half type
        compute, number = torch.float32, lambda x: _rounded(x, dtype)
    alpha = number(alpha)
    a, b = (_cast(ctx, x, compute) if _is_tensor(ctx, x) else number(x) for x in (a, b))
    return _cast(ctx, ctx.op(vendor_op, a, ctx.op(ops.Mul, b, alpha)), dtype)


def _rounded(number, dtype):
    """A Python number as `dtype` holds it (symbolic sizes as they are)."""
    if not isinstance(number, (bool, int, float)):
        return number
    return type(number)(torch.tensor(number, dtype=torch.float64).to(dtype).item())


def _is_tensor(ctx, x):
    return isinstance(ctx.val(x), torch.Tensor)


def _same_device(requested, device):
    """Whether a `device=` argument (None: unchanged; "emu": the current one) names `device`."""
    if requested is None:
        return True
    requested = torch.device(requested)
    return requested.type == device.type and requested.index in (None, device.index)


def _device(ctx):
    """The device of the ATen node's (first) result: where a factory op's tensor belongs (a
    device backend's graph makes its constants there, not on the host)."""
    out = ctx.out if isinstance(ctx.out, (tuple, list)) else [ctx.out]
    return next(v.device for v in out if isinstance(v, torch.Tensor))


# A name, not the overload: torch._inductor.inductor_prims defines the op when dynamo first
# writes it, and importing that module here would cost every start 2.5 s.
@conversion("prims.fma.default")
def fma(ctx, a, b, c):
    """`a * b + c`. Dynamo writes `addcmul_` and `addcdiv_` with a value, and `add_` with a
    tensor alpha, as this prim (`enable_dynamo_decompositions`): every optimizer's step has
    it. Half types compute in float32 and round once, as eager's addcmul does (the prim's
    own eager kernel rounds `a * b` to the half type first)."""
    dtype = ctx.out.dtype
    compute = opmath_dtype(dtype)
    a, b, c = (_cast(ctx, x, compute) if _is_tensor(ctx, x) else x for x in (a, b, c))
    return _cast(ctx, ctx.op(ops.Add, ctx.op(ops.Mul, a, b), c), dtype)


@conversion([aten.rsub.Tensor, aten.rsub.Scalar])
def rsub(ctx, a, b, alpha=1):
    return sub(ctx, b, a, alpha)


_DIV_MODES = {None: ops.Div, "floor": ops.FloorDiv, "trunc": ops.TruncDiv}


@conversion(
    [
        aten.div.Tensor,
        aten.div.Scalar,
        aten.div.Tensor_mode,
        aten.div.Scalar_mode,
        aten.true_divide.Tensor,
        aten.true_divide.Scalar,
    ]
)
def div(ctx, a, b, rounding_mode=None):
    return ctx.op(_DIV_MODES[rounding_mode], a, b)


@conversion([aten.clamp.default, aten.clamp.Tensor])
def clamp(ctx, x, min=None, max=None):
    x = _cast(ctx, x, ctx.out.dtype)  # in the result type: an integer x clamped to 1.5 is float
    if min is not None:
        x = ctx.op(ops.Maximum, x, _bound(ctx, x, min))
    if max is not None:
        x = ctx.op(ops.Minimum, x, _bound(ctx, x, max))
    return _cast(ctx, x, ctx.out.dtype)


def _bound(ctx, x, bound):
    """A tensor bound as is; a number or symbolic size as a 0-d tensor of x's dtype."""
    return bound if _is_tensor(ctx, bound) else _full_like_scalar(ctx, x, bound)


@conversion(
    [aten.clamp_min.default, aten.clamp_min.Tensor, aten.clamp_max.default, aten.clamp_max.Tensor]
)
def clamp_bound(ctx, x, bound):
    if ctx.node.target in (aten.clamp_min.default, aten.clamp_min.Tensor):
        return clamp(ctx, x, min=bound)
    return clamp(ctx, x, max=bound)


def _full_like_scalar(ctx, x, value):
    """A 0-d tensor of x's dtype, so maximum/minimum keep x's dtype as clamp does."""
    return ctx.op(ops.Full, [], value, ctx.val(x).dtype, device=_device(ctx))


@conversion([aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar])
def where_scalar(ctx, cond, a, b):
    return ctx.op(ops.Where, cond, a, b)


@conversion([aten._to_copy.default, prims.convert_element_type.default])
def to_dtype(ctx, x, dtype=None, **kwargs):
    if kwargs.get("memory_format") not in (None, torch.preserve_format, torch.contiguous_format):
        raise Unsupported(f"memory_format={kwargs['memory_format']}")
    if not _same_device(kwargs.get("device"), ctx.val(x).device):  # a copy between devices
        raise Unsupported(f"device={kwargs['device']}")
    return ctx.op(ops.Convert, x, dtype or ctx.val(x).dtype)


# prims.copy_strided(x, stride): a copy laid out with `stride`, which torch's decompositions
# of lerp and index_fill emit to restore eager's strides (an AdamW step's exp_avg.lerp_ on a
# depthwise convolution's [c, 1, k, k] weight). A Copy too: every value takes its node's
# traced layout where it is written (copy_strided's stride comes as `memory_format`, unused
# alike).
@conversion([aten.clone.default, aten.lift_fresh_copy.default, prims.copy_strided.default])
def clone(ctx, x, memory_format=None):
    return ctx.op(ops.Copy, x)


@conversion([aten.alias.default, aten.detach.default])
def alias(ctx, x):
    return x


@conversion(aten.copy.default)
def copy(ctx, dst, src, non_blocking=False):
    """Functional copy: src, broadcast and cast to dst's shape and dtype."""
    dst_val = ctx.val(dst)
    src = ctx.op(ops.Expand, src, list(dst_val.shape))
    return ctx.op(ops.Convert, src, dst_val.dtype)


@conversion(aten.copy_.default)
def copy_(ctx, dst, src, non_blocking=False):
    return ctx.op(ops.CopyInto, dst, src)


# --- creation -------------------------------------------------------------------------


@conversion(aten.full.default)
def full(ctx, size, value, dtype=None, **kwargs):
    return ctx.op(ops.Full, list(size), value, ctx.out.dtype, device=_device(ctx))


@conversion([aten.empty.memory_format, aten.empty_strided.default, aten.empty_permuted.default])
def empty(ctx, *args, **kwargs):
    """Uninitialized memory: an allocation in the traced layout, no kernel."""
    return ctx.op(
        ops.Empty, list(ctx.out.shape), list(ctx.out.stride()), ctx.out.dtype, device=_device(ctx)
    )


@conversion(aten.scalar_tensor.default)
def scalar_tensor(ctx, value, dtype=None, **kwargs):
    return ctx.op(ops.Full, [], value, ctx.out.dtype, device=_device(ctx))


@conversion([aten.full_like.default, aten.zeros_like.default, aten.ones_like.default])
def full_like(ctx, x, *args, **kwargs):
    value = {aten.zeros_like.default: 0, aten.ones_like.default: 1}.get(ctx.node.target)
    value = args[0] if value is None else value
    return ctx.op(ops.Full, list(ctx.out.shape), value, ctx.out.dtype, device=_device(ctx))


@conversion(
    [
        aten.zeros.default,
        aten.ones.default,
        aten.new_zeros.default,
        aten.new_ones.default,
        aten.new_full.default,
    ]
)
def filled(ctx, *args, **kwargs):
    value = {aten.new_full.default: args[-1] if len(args) > 2 else kwargs.get("fill_value")}
    value = value.get(ctx.node.target, 1 if "ones" in str(ctx.node.target) else 0)
    return ctx.op(ops.Full, list(ctx.out.shape), value, ctx.out.dtype, device=_device(ctx))


@conversion([aten.arange.start_step, aten.arange.start, aten.arange.default])
def arange(ctx, *args, **kwargs):
    start, end, step = _arange_bounds(args)
    length = ctx.out.shape[0]
    return ctx.op(ops.Iota, length, start, step, ctx.out.dtype, device=_device(ctx))


def _arange_bounds(args):
    numbers = [a for a in args if not isinstance(a, torch.dtype)]
    if len(numbers) == 1:
        return 0, numbers[0], 1
    return numbers[0], numbers[1], numbers[2] if len(numbers) > 2 else 1


# torch decomposes hann_window from 2.13 on; 2.11 has no decomposition. Converted here on every
# release (config.KEEP drops torch's), as eager computes it: 0.5 - 0.5 cos(2 pi n / (N - 1)),
# N = length + 1 when periodic, in float32 at least, the first `length` values.
@conversion([aten.hann_window.default, aten.hann_window.periodic])
def hann_window(ctx, length, periodic=True, **kwargs):
    if length <= 1:
        return ctx.op(ops.Full, [length], 1, ctx.out.dtype, device=_device(ctx))
    compute = torch.promote_types(ctx.out.dtype, torch.float32)
    n = ctx.op(ops.Iota, length, 0, 1, compute, device=_device(ctx))
    angle = ctx.op(ops.Mul, n, 2 * math.pi / (length if periodic else length - 1))
    window = ctx.op(ops.Add, ctx.op(ops.Mul, ctx.op(ops.Cos, angle), -0.5), 0.5)
    return _cast(ctx, window, ctx.out.dtype)


@conversion(prims.iota.default)
def iota(ctx, length, *, start, step, dtype, **kwargs):
    return ctx.op(ops.Iota, length, start, step, dtype, device=_device(ctx))


# --- reductions -----------------------------------------------------------------------


def _dims(ctx, x, dims):
    rank = ctx.val(x).dim()
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(rank))
    dims = [dims] if isinstance(dims, int) else dims
    return sorted({d % max(rank, 1) for d in dims}) if rank else []


@conversion([aten.sum.dim_IntList, aten.sum.default])
def sum_(ctx, x, dims=None, keepdim=False, dtype=None):
    return ctx.op(ops.ReduceSum, x, _dims(ctx, x, dims), keepdim, ctx.out.dtype)


@conversion([aten.prod.dim_int, aten.prod.default])
def prod(ctx, x, dim=None, keepdim=False, dtype=None):
    return ctx.op(ops.ReduceProd, x, _dims(ctx, x, dim), keepdim, ctx.out.dtype)


@conversion([aten.amax.default, aten.amin.default])
def amax(ctx, x, dims=(), keepdim=False):
    vendor_op = ops.ReduceMax if ctx.node.target is aten.amax.default else ops.ReduceMin
    return ctx.op(vendor_op, x, _dims(ctx, x, dims), keepdim)


@conversion([aten.any.dim, aten.any.dims, aten.any.default])
def any_(ctx, x, dims=None, keepdim=False):
    return ctx.op(ops.ReduceAny, x, _dims(ctx, x, dims), keepdim)


@conversion([aten.argmax.default, aten.argmin.default])
def argmax(ctx, x, dim=None, keepdim=False):
    vendor_op = ops.ArgMax if ctx.node.target is aten.argmax.default else ops.ArgMin
    return ctx.op(vendor_op, x, dim, keepdim)


@conversion([aten.max.dim, aten.min.dim])
def max_dim(ctx, x, dim, keepdim=False):
    """(values, indices) of torch.max(x, dim): the reduction and the index of its first
    occurrence (a NaN counts as the extreme), as eager's kernel pairs them."""
    is_max = ctx.node.target is aten.max.dim
    values = ctx.op(ops.ReduceMax if is_max else ops.ReduceMin, x, _dims(ctx, x, [dim]), keepdim)
    ranked = _cast(ctx, x, torch.uint8) if ctx.val(x).dtype == torch.bool else x  # no bool argmax
    return values, ctx.op(ops.ArgMax if is_max else ops.ArgMin, ranked, dim, keepdim)


@conversion([aten.max.default, aten.min.default])
def max_all(ctx, x):
    vendor_op = ops.ReduceMax if ctx.node.target is aten.max.default else ops.ReduceMin
    return ctx.op(vendor_op, x, _dims(ctx, x, None), False)


@conversion([aten.mean.dim, aten.mean.default])
def mean(ctx, x, dims=None, keepdim=False, dtype=None):
    dims = _dims(ctx, x, dims)
    total = ctx.op(ops.ReduceSum, x, dims, keepdim, ctx.out.dtype)
    return ctx.op(ops.Div, total, _count(ctx, x, dims))


def _count(ctx, x, dims):
    count = 1
    for d in dims:
        count = count * ctx.val(x).shape[d]
    return count


def _channel_moments(ctx, x, dims):
    """A batch norm's statistics over every dim but the channels': (mean, x - mean, sum of
    squared deviations in double), dims kept. A float32 x takes one pass (_shifted_moments);
    a float64 x, which has no wider type to sum in, two. (Over a row's last dims, as a layer norm's,
    the two passes are phases of one kernel already.)"""
    shape = ctx.val(x).shape
    if ctx.val(x).dtype != torch.float32 or any(shape[d] == 0 for d in dims):
        return _moments(ctx, x, dims, keepdim=True)
    return _shifted_moments(ctx, x, dims)


def _shifted_moments(ctx, x, dims):
    """One pass, as Inductor's Welford reduction takes: sums in double of d = x - k and of d^2,
    k being each row's first element, read in the same kernel (the column sums of a batch
    norm over a channels-last activation share one; two passes read the activation twice).
    mean = k + sum(d) / n, and the squared deviations sum(d^2) - sum(d)^2 / n cancel at most
    by a factor n, since (k - mean)^2 <= n * var for a k among the values: relative error
    about n * 1e-16 in double. A row of one repeated value has d = 0: exactly its mean and a
    variance of exactly 0, as eager's Welford gives. The sum of squares stays in double (see
    _moments)."""
    wide, count = torch.float64, _count(ctx, x, dims)
    shift = x
    for d in dims:
        shift = ctx.op(ops.Slice, shift, d, 0, 1, 1)
    shift = _cast(ctx, shift, wide)
    deviation = ctx.op(ops.Sub, _cast(ctx, x, wide), shift)
    total = ctx.op(ops.ReduceSum, deviation, dims, True, wide)
    total_squares = ctx.op(ops.ReduceSum, ctx.op(ops.Mul, deviation, deviation), dims, True, wide)
    mean_wide = ctx.op(ops.Add, shift, ctx.op(ops.Div, total, count))
    mean = _cast(ctx, mean_wide, torch.float32)
    squares = ctx.op(
        ops.Maximum,
        ctx.op(ops.Sub, total_squares, ctx.op(ops.Div, ctx.op(ops.Mul, total, total), count)),
        _full_like_scalar(ctx, total_squares, 0),
    )
    return mean, ctx.op(ops.Sub, x, mean), squares


def _moments(ctx, x, dims, keepdim):
    """Two-pass statistics over `dims`: the mean (dims kept), x - mean, and the sum of squared
    deviations. Two passes, because E[x^2] - E[x]^2 cancels badly for a mean far from 0. The
    sum is divided in double before the mean is rounded to x's type: a row of one repeated
    value then has exactly that mean and a variance of exactly 0, as eager's Welford gives
    (rounding the sum first left a deviation of an ulp, and std's gradient, masked only where
    std is exactly 0, came out as 1.2 instead of 0). A double x has no wider type: its mean
    takes one step of refinement instead, mean + sum(x - mean) / n, which for a repeated
    value lands on it exactly (x - mean is exact there, and the step's own error is far
    below half an ulp of x).
    The sum of squared deviations is returned in double, for the caller to divide there: it
    passes float's range where the variance does not (values of 1.5e19 square to 2.3e38, and
    a few of them sum past 3.4e38), and rounded to float first it made the variance inf where
    eager's Welford, summing in double, gives it (torch.var: inf against 5.5e36; a batch norm's
    weight gradient: -0 against -0.99; fuzzer, seed 7231). The sum is marked as rounded to
    x's type (ReduceSum's rounded_to), so it may still add chunks in float at the full vector
    width, summed again in double where a chunk overflows (loop_ir.exact_pass)."""
    dtype = ctx.val(x).dtype
    wide = torch.float64 if dtype.is_floating_point else dtype
    total = ctx.op(ops.ReduceSum, x, dims, True, wide)
    mean = _cast(ctx, ctx.op(ops.Div, total, _count(ctx, x, dims)), dtype)
    if dtype == torch.float64:
        residual = ctx.op(ops.ReduceSum, ctx.op(ops.Sub, x, mean), dims, True)
        mean = ctx.op(ops.Add, mean, ctx.op(ops.Div, residual, _count(ctx, x, dims)))
    centered = ctx.op(ops.Sub, x, mean)
    squares = ctx.op(ops.ReduceSum, ctx.op(ops.Mul, centered, centered), dims, keepdim, wide, dtype)
    return mean, centered, squares


@conversion([aten.var.correction, aten.var_mean.correction])
def var(ctx, x, dims=None, *, correction=None, keepdim=False):
    """Two-pass variance, computed in float32 for half types as eager does."""
    out_dtype = ctx.val(x).dtype
    x = _cast(ctx, x, opmath_dtype(out_dtype))
    dims = _dims(ctx, x, dims)
    count = _count(ctx, x, dims)
    correction = 1 if correction is None else correction  # ATen's default: Bessel's
    mean_, _, squares = _moments(ctx, x, dims, keepdim)
    divisor = ctx.op(
        ops.Maximum,
        _full_like_scalar(ctx, squares, 0),
        ctx.op(ops.Sub, _full_like_scalar(ctx, squares, count), correction),
    )
    variance = _cast(ctx, ctx.op(ops.Div, squares, divisor), out_dtype)
    if ctx.node.target is aten.var.correction:
        return variance
    if not keepdim:
        mean_ = ctx.op(ops.Reshape, mean_, list(variance.meta["val"].shape))
    return variance, _cast(ctx, mean_, out_dtype)


def _cast(ctx, x, dtype):
    return x if ctx.val(x).dtype == dtype else ctx.op(ops.Convert, x, dtype)


@conversion(aten.cumsum.default)
def cumsum(ctx, x, dim, dtype=None):
    return ctx.op(ops.CumSum, x, dim, ctx.out.dtype)


@conversion(aten.cumprod.default)
def cumprod(ctx, x, dim, dtype=None):
    return ctx.op(ops.CumProd, x, dim, ctx.out.dtype)


# --- layout ---------------------------------------------------------------------------


@conversion([aten.view.default, aten._unsafe_view.default, aten.reshape.default])
def view(ctx, x, shape):
    squeezed = _reduction_without_kept_dims(ctx, x)
    if squeezed is not None:
        return squeezed
    return ctx.op(ops.Reshape, x, list(ctx.out.shape))


_KEEPDIM_REDUCTIONS = (ops.ReduceSum, ops.ReduceProd, ops.ReduceMax, ops.ReduceMin)


def _reduction_without_kept_dims(ctx, x):
    """A view that only drops the size-1 dims a keepdim reduction kept, of that reduction's
    only use, is the reduction without keepdim. A Linear's bias gradient is
    sum(0, keepdim=True).view(-1): the column sums are then written where they belong, not
    into a (1, n) buffer that a second kernel copies. Sizes compare as expressions, so a
    symbolic size adds no guard."""
    if getattr(x, "target", None) not in _KEEPDIM_REDUCTIONS or x.args[2] is not True:
        return None
    if len(ctx.node.args[0].users) != 1:
        return None
    dims = x.args[1]
    dropped = [size for i, size in enumerate(ctx.val(x).shape) if i not in dims]
    if list(map(str, dropped)) != list(map(str, ctx.out.shape)):
        return None
    return ctx.op(x.target, x.args[0], dims, False, *x.args[3:])


@conversion([aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default, aten.unsqueeze.default])
def squeeze(ctx, x, *dims):
    return ctx.op(ops.Reshape, x, list(ctx.out.shape))


@conversion([aten.t.default, aten.transpose.int])
def transpose(ctx, x, dim0=0, dim1=1):
    rank = ctx.val(x).dim()
    if rank < 2:
        return x
    order = list(range(rank))
    order[dim0 % rank], order[dim1 % rank] = order[dim1 % rank], order[dim0 % rank]
    return ctx.op(ops.Permute, x, order)


@conversion(aten.slice.Tensor)
def slice_(ctx, x, dim=0, start=None, end=None, step=1):
    size = ctx.val(x).shape[dim]
    start = 0 if start is None else start
    end = size if end is None else end
    start, end = _clamp_slice(start, size), _clamp_slice(end, size)
    return ctx.op(ops.Slice, x, dim % ctx.val(x).dim(), start, end, step)


@conversion(aten.diagonal.default)
def diagonal(ctx, x, offset=0, dim1=0, dim2=1):
    rank = max(ctx.val(x).dim(), 1)
    return ctx.op(ops.Diagonal, x, offset, dim1 % rank, dim2 % rank)


@conversion(aten.unfold.default)
def unfold(ctx, x, dimension, size, step):
    """Tensor.unfold, and the index arithmetic of its backward (arange(n).unfold(...))."""
    if ctx.val(x).dim() == 0:  # eager's one window of a 0-d tensor
        return ctx.op(ops.Reshape, x, [1])
    return ctx.op(ops.Unfold, x, dimension % ctx.val(x).dim(), size, step)


@conversion(aten.diagonal_scatter.default)
def diagonal_scatter(ctx, x, src, offset=0, dim1=0, dim2=1):
    """diagonal's backward (into zeros) and its in-place writes (x.diagonal().fill_())."""
    rank = max(ctx.val(x).dim(), 1)
    return ctx.op(ops.DiagonalScatter, x, src, offset, dim1 % rank, dim2 % rank)


@conversion(aten.slice_scatter.default)
def slice_scatter(ctx, x, src, dim=0, start=None, end=None, step=1):
    """A lowering of its own rather than torch's decomposition, which compares the bounds with
    the dim's size in Python: under dynamic shapes that guards on the traced size, and a
    narrow(x, 0, 1, 1)'s backward built at size 2 was rebuilt at size 3."""
    size = ctx.val(x).shape[dim]
    start = _clamp_slice(0 if start is None else start, size)
    end = _clamp_slice(size if end is None else end, size)
    return ctx.op(ops.SliceScatter, x, src, dim % ctx.val(x).dim(), start, end, step)


def _clamp_slice(bound, size):
    if isinstance(bound, int) and not isinstance(size, int):
        return bound if bound >= 0 else size + bound  # symbolic size: trust in-range bounds
    if isinstance(bound, int):
        bound = bound + size if bound < 0 else bound
        return min(max(bound, 0), size)
    return bound


@conversion(aten.cat.default)
def cat(ctx, tensors, dim=0):
    rank = ctx.out.dim()
    tensors = [t for t in tensors if ctx.val(t).numel() != 0 or ctx.val(t).dim() == rank]
    return ctx.op(ops.Cat, tensors, dim % rank)


def _storage_owner(node):
    """The ATen node whose storage `node` views: itself, or the value it is a (chain of) view(s)
    of, by the ops' schemas (a split's pieces through their getitem)."""
    while node.op == "call_function":
        view = node.args[0] if node.target is operator.getitem else node
        if not getattr(view.target, "is_view", False):
            break
        node = view.args[0]
    return node


@conversion(aten.as_strided.default)
def as_strided(ctx, x, size, stride, storage_offset=None):
    """Strides address storage in eager's layout, so the owner of that storage is read in the
    layout the ATen graph gives it (a converter may have laid the value out otherwise). An
    input is read in place; a computed owner comes with its eager strides."""
    owner = _storage_owner(ctx.node.args[0])
    traced = traced_value(owner)  # a backward's saved input may have come in another layout
    in_place = owner.op == "placeholder" and traced is owner.meta["val"]
    layout = () if in_place else (list(traced.stride()),)
    return ctx.op(
        ops.AsStrided, ctx.converted(owner), list(size), list(stride), storage_offset or 0, *layout
    )


@conversion(aten.as_strided_scatter.default)
def as_strided_scatter(ctx, x, src, size, stride, storage_offset=None):
    """x with src written through x.as_strided(size, stride, storage_offset), whose strides
    address x's storage in eager's layout (as_strided's backward, and functionalization's
    write through a view it cannot replay). Converted where that layout is dense from offset
    0, so our result's buffer is that storage, and where the sizes show without a guard that
    the view's elements are apart and inside it; otherwise eager, which checks both."""
    offset = storage_offset or 0
    if not _contiguous_from_zero(ctx.out):
        raise Unsupported("a result whose eager layout is not contiguous from offset 0")
    reach = [ctx.val(n) for n in size], [ctx.val(s) for s in stride], ctx.val(offset)
    if not _apart_and_inside(*reach, ctx.out.numel()):
        raise Unsupported("a view not shown to write each element of the storage once")
    return ctx.op(ops.AsStridedScatter, x, src, list(size), list(stride), offset)


def _contiguous_from_zero(fake) -> bool:
    """Whether `fake`'s strides are the contiguous ones (a dim of size 1 takes any) from
    storage offset 0."""
    expected, contiguous = 1, _known(fake.storage_offset() == 0)
    for n, s in reversed(list(zip(fake.shape, fake.stride()))):
        contiguous = contiguous and (_known(n == 1) or _known(s == expected))
        expected = expected * n
    return contiguous


def _known(condition) -> bool:
    """Whether `condition` (on ints, or on the graph's symbolic sizes) holds for every size,
    decided without a guard: a false answer only sends a node to eager."""
    return statically_known_true(condition)


def _apart_and_inside(size, stride, offset, numel) -> bool:
    """Whether the view of `size` and `stride` at `offset` addresses distinct elements, all in
    [0, numel): taken from the smallest stride up, each dim's stride passes the furthest
    element the dims before it reach."""
    dims = [(n, s) for n, s in zip(size, stride) if not _known(n == 1)]
    furthest = 0
    while dims:
        smallest = next((d for d in dims if all(_known(d[1] <= e[1]) for e in dims)), None)
        if smallest is None or not _known(smallest[1] > furthest):
            return False
        dims.remove(smallest)
        furthest = furthest + smallest[1] * (smallest[0] - 1)
    return _known(offset >= 0) and _known(offset + furthest < numel)


@conversion(aten.flip.default)
def flip(ctx, x, dims):
    """Each flipped dim read through the indices -1, -2, ..., -n, which wrap to n-1, ..., 0 as
    eager indexing does: no size arithmetic, so one build serves every size. Flipping no dim
    (dims empty, or a 0-d x) still gives a new tensor, as eager's does."""
    dims = _dims(ctx, x, dims) if dims else []  # _dims reads no dims as every dim
    for dim in dims:
        reversed_positions = ctx.op(
            ops.Iota, ctx.val(x).shape[dim], -1, -1, torch.int64, device=_device(ctx)
        )
        x = ctx.op(ops.IndexTensor, x, [None] * dim + [reversed_positions])
    return x if dims else ctx.op(ops.Copy, x)


@conversion(aten.index_select.default)
def index_select(ctx, x, dim, index):
    if ctx.val(x).dim() == 0:  # eager takes a 0-d input as one element along dim 0 or -1
        one = ctx.op(ops.IndexTensor, ctx.op(ops.Reshape, x, [1]), [index])
        return ctx.op(ops.Reshape, one, list(ctx.out.shape))
    if ctx.val(index).dim() == 0:  # index_select keeps the dim; indexing by a 0-d drops it
        index = ctx.op(ops.Reshape, index, [1])
    dim = dim % ctx.val(x).dim()
    return ctx.op(ops.IndexTensor, x, [None] * dim + [index])


@conversion([aten.scatter.src, aten.scatter.value])
def scatter(ctx, x, dim, index, src):
    if not hasattr(src, "meta"):
        src = ctx.op(
            ops.Expand,
            ctx.op(ops.Full, [], src, ctx.val(x).dtype, device=_device(ctx)),
            list(ctx.val(index).shape),
        )
    return ctx.op(ops.ScatterSrc, x, dim % max(ctx.val(x).dim(), 1), index, src)


# --- normalization ----------------------------------------------------------------------


@conversion(aten._native_batch_norm_legit_no_training.default)
def batch_norm_inference(ctx, x, weight, bias, running_mean, running_var, momentum, eps):
    """(x - mean) / sqrt(var + eps) * weight + bias with per-channel statistics."""
    rank = ctx.val(x).dim()
    per_channel = [ctx.val(x).shape[1]] + [1] * (rank - 2)  # broadcasts against (N, C, ...)

    def channel(t):
        return ctx.op(ops.Reshape, t, per_channel)

    inv_std = ctx.op(ops.Rsqrt, ctx.op(ops.Add, channel(running_var), eps))
    out = ctx.op(ops.Mul, ctx.op(ops.Sub, x, channel(running_mean)), inv_std)
    if weight is not None:
        out = ctx.op(ops.Mul, out, channel(weight))
    if bias is not None:
        out = ctx.op(ops.Add, out, channel(bias))
    out = _cast(ctx, out, ctx.out[0].dtype)
    empty = [ctx.op(ops.Full, list(v.shape), 0, v.dtype, device=v.device) for v in ctx.out[1:]]
    return (out, *empty)


@conversion(aten._native_batch_norm_legit_functional.default)
def batch_norm_functional(ctx, x, weight, bias, running_mean, running_var, training, momentum, eps):
    """Training: batch statistics (in float32 for half types, as eager's; float64 stays
    float64), plus updated running statistics."""
    out_vals = ctx.out
    if not training:
        out, *_ = batch_norm_inference(
            ctx, x, weight, bias, running_mean, running_var, momentum, eps
        )
        empty = [
            ctx.op(ops.Full, list(v.shape), 0, v.dtype, device=v.device) for v in out_vals[1:3]
        ]
        return (out, *empty, ctx.op(ops.Copy, running_mean), ctx.op(ops.Copy, running_var))
    rank = ctx.val(x).dim()
    dims = [0] + list(range(2, rank))
    count = _count(ctx, x, dims)
    xf = _cast(ctx, x, opmath_dtype(ctx.val(x).dtype))
    mean, centered, squares = _channel_moments(ctx, xf, dims)
    var = _cast(ctx, ctx.op(ops.Div, squares, count), ctx.val(xf).dtype)
    inv_std = ctx.op(ops.Rsqrt, ctx.op(ops.Add, var, eps))
    out = ctx.op(ops.Mul, centered, inv_std)
    per_channel = [ctx.val(x).shape[1]] + [1] * (rank - 2)
    if weight is not None:
        out = ctx.op(ops.Mul, out, ctx.op(ops.Reshape, weight, per_channel))
    if bias is not None:
        out = ctx.op(ops.Add, out, ctx.op(ops.Reshape, bias, per_channel))
    channels = [ctx.val(x).shape[1]]
    mean, var, inv_std = (ctx.op(ops.Reshape, t, channels) for t in (mean, var, inv_std))
    unbiased = ctx.op(
        ops.Mul,
        var,
        ctx.op(
            ops.Div,
            count,
            ctx.op(
                ops.Maximum,
                _full_like_scalar(ctx, var, 1),
                ctx.op(ops.Sub, _full_like_scalar(ctx, var, count), 1),
            ),
        ),
    )
    new_mean = _running_update(ctx, running_mean, mean, momentum)
    new_var = _running_update(ctx, running_var, unbiased, momentum)
    results = (out, mean, inv_std, new_mean, new_var)
    return tuple(_cast(ctx, r, v.dtype) for r, v in zip(results, out_vals))


def _running_update(ctx, running, batch, momentum):
    kept = ctx.op(ops.Mul, running, 1 - momentum)
    return ctx.op(ops.Add, kept, ctx.op(ops.Mul, batch, momentum))


# --- pooling ----------------------------------------------------------------------------


def _spatial(value, nd, default=None):
    """A pool argument as one value per spatial dim (ATen accepts one for all)."""
    value = default if value is None or (isinstance(value, (list, tuple)) and not value) else value
    value = list(value) if isinstance(value, (list, tuple)) else [value]
    return value * nd if len(value) == 1 else value


def _pool_conversions(nd):
    """Window reductions over `nd` spatial dims, each to its vendor op with one kernel size,
    stride, padding and dilation per dim."""

    def aten_op(name):
        return getattr(aten, name.format(nd)).default

    def vendor_op(name):
        return getattr(ops, name.format(nd))

    @conversion(aten_op("max_pool{}d_with_indices"))
    def max_pool(ctx, x, kernel, stride=(), padding=0, dilation=1, ceil_mode=False):
        return ctx.op(
            vendor_op("MaxPool{}dWithIndices"),
            x,
            _spatial(kernel, nd),
            _spatial(stride, nd, kernel),
            _spatial(padding, nd),
            _spatial(dilation, nd),
            ceil_mode,
        )

    # Native, not torch's decomposition: that exists from torch 2.13 only and is skipped in
    # deterministic mode. The lowering adds in ATen's order, one plane per thread.
    @conversion(aten_op("max_pool{}d_with_indices_backward"))
    def max_pool_backward(ctx, grad, x, kernel, stride, padding, dilation, ceil_mode, indices):
        return ctx.op(
            vendor_op("MaxPool{}dWithIndicesBackward"),
            grad,
            x,
            _spatial(kernel, nd),
            _spatial(stride, nd, kernel),
            _spatial(padding, nd),
            _spatial(dilation, nd),
            ceil_mode,
            indices,
        )

    @conversion(aten_op("avg_pool{}d"))
    def avg_pool(
        ctx,
        x,
        kernel,
        stride=(),
        padding=0,
        ceil_mode=False,
        count_include_pad=True,
        divisor_override=None,
    ):
        return ctx.op(
            vendor_op("AvgPool{}d"),
            x,
            _spatial(kernel, nd),
            _spatial(stride, nd, kernel),
            _spatial(padding, nd),
            ceil_mode,
            count_include_pad,
            divisor_override,
        )

    @conversion(aten_op("avg_pool{}d_backward"))
    def avg_pool_backward(
        ctx, grad, x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override
    ):
        return ctx.op(
            vendor_op("AvgPool{}dBackward"),
            grad,
            x,
            _spatial(kernel, nd),
            _spatial(stride, nd, kernel),
            _spatial(padding, nd),
            ceil_mode,
            count_include_pad,
            divisor_override,
        )

    @conversion(aten_op("_adaptive_avg_pool{}d"))
    def adaptive_avg_pool(ctx, x, output_size):
        return ctx.op(vendor_op("AdaptiveAvgPool{}d"), x, list(output_size))

    @conversion(aten_op("_adaptive_avg_pool{}d_backward"))
    def adaptive_avg_pool_backward(ctx, grad, x):
        return ctx.op(vendor_op("AdaptiveAvgPool{}dBackward"), grad, x)

    @conversion(aten_op("adaptive_max_pool{}d"))
    def adaptive_max_pool(ctx, x, output_size):
        return ctx.op(vendor_op("AdaptiveMaxPool{}d"), x, list(output_size))

    @conversion(aten_op("adaptive_max_pool{}d_backward"))
    def adaptive_max_pool_backward(ctx, grad, x, indices):
        return ctx.op(vendor_op("AdaptiveMaxPool{}dBackward"), grad, x, indices)


_pool_conversions(2)
_pool_conversions(3)


@conversion(
    [
        aten.replication_pad1d_backward.default,
        aten.replication_pad2d_backward.default,
        aten.replication_pad3d_backward.default,
    ]
)
def replication_pad_backward(ctx, grad, x, padding):
    return ctx.op(ops.ReplicationPadBackward, grad, x, list(padding))


# --- library kernels with argument handling -------------------------------------------


@conversion([aten.sort.default, aten.sort.stable])
def sort(ctx, x, *args, stable=False, dim=-1, descending=False):
    if args:  # sort.default(self, dim, descending)
        dim, descending = (list(args) + [descending])[:2]
    return ctx.op(ops.Sort, x, dim, descending, bool(stable))


@conversion([aten.round.decimals])
def round_decimals(ctx, x, *, decimals=0):
    """ATen's rule: scale by 10^decimals, round half to even, scale back."""
    scale = 10.0 ** abs(decimals)
    if decimals >= 0:
        return ctx.op(ops.Div, ctx.op(ops.Round, ctx.op(ops.Mul, x, scale)), scale)
    return ctx.op(ops.Mul, ctx.op(ops.Round, ctx.op(ops.Div, x, scale)), scale)


@conversion([aten.rand_like.default, aten.randn_like.default])
def random_like(ctx, x, **kwargs):
    vendor_op = ops.Rand if ctx.node.target is aten.rand_like.default else ops.Randn
    # on x's device: a device backend's generator draws them there (emugraph)
    return ctx.op(vendor_op, list(ctx.out.shape), dtype=ctx.out.dtype, device=ctx.out.device)


@conversion(aten.repeat_interleave.Tensor)
def repeat_interleave(ctx, repeats, *, output_size=None):
    """Indices i repeated repeats[i] times: out[j] = #{k : cumsum(repeats)[k] <= j}."""
    length = ctx.out.shape[0]
    ends = ctx.op(ops.CumSum, repeats, 0, ctx.out.dtype)
    positions = ctx.op(ops.Iota, length, 0, 1, ctx.out.dtype, device=_device(ctx))
    passed = ctx.op(
        ops.Le,
        ctx.op(ops.Reshape, ends, [1, ctx.val(repeats).shape[0]]),
        ctx.op(ops.Reshape, positions, [length, 1]),
    )
    return ctx.op(ops.ReduceSum, passed, [1], False, ctx.out.dtype)


@conversion([aten.bernoulli.p, aten.rand.default, aten.randn.default])
def random(ctx, *args, **kwargs):
    vendor_op = {
        aten.bernoulli.p: ops.Bernoulli,
        aten.rand.default: ops.Rand,
        aten.randn.default: ops.Randn,
    }[ctx.node.target]
    return ctx.op(vendor_op, *args, **kwargs)


# --- prims that torch's reference decompositions leave behind ----------------------------


@conversion([prims.squeeze.default, prims.collapse_view.default, prims.reshape.default])
def prims_reshape(ctx, x, *args):
    return ctx.op(ops.Reshape, x, list(ctx.out.shape))


@conversion(prims.broadcast_in_dim.default)
def broadcast_in_dim(ctx, x, shape, broadcast_dimensions):
    kept = [1] * len(shape)
    for source_dim, target_dim in enumerate(broadcast_dimensions):
        kept[target_dim] = ctx.val(x).shape[source_dim]
    return ctx.op(ops.Expand, ctx.op(ops.Reshape, x, kept), list(shape))


@conversion(prims.view_of.default)
def view_of(ctx, x):
    return x
