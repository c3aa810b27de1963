"""Decompositions that replace torch's where torch's disagree with eager PyTorch.

A decomposition is meant to compute what the op computes. These ones of torch's do not, for
every backend (Inductor included); `build_decompositions` puts the rows of FIXED in their place.
Each wraps torch's own and changes only what differs, so they follow torch's changes.

EAGER_DTYPE holds ops whose fake (meta) kernel infers another result dtype than eager's for some
arguments: the graph AOTAutograd traces carries the meta dtype, which every backend trusts. Their
rows rewrite those arguments' calls into ops whose meta agrees, and return NotImplemented for the
rest (the op stays as it is).
"""

import functools

import torch

from .torch_compat import get_decompositions
from .utils import opmath_dtype

aten = torch.ops.aten


def _torch_decomposition(op):
    return get_decompositions([op])[op]


def linspace(start, end, steps, *, dtype=None, **kwargs):
    """Eager's integer linspace converts start and end to the integer type first (4.3 -> 4),
    then steps in double and truncates; torch's decomposition steps from 4.3 in float, so
    linspace(4.3, 50, 50, dtype=int64)[1] was 5 where eager gives 4."""
    decomposed = _torch_decomposition(aten.linspace.default)
    dtype = dtype or torch.get_default_dtype()
    if dtype.is_floating_point or dtype.is_complex:
        return decomposed(start, end, steps, dtype=dtype, **kwargs)
    values = decomposed(
        _truncated(start, dtype), _truncated(end, dtype), steps, dtype=torch.float64, **kwargs
    )
    return values.to(dtype)


def _truncated(value, dtype):
    """`value` converted to integer `dtype` as eager converts a Scalar (toward zero)."""
    if isinstance(value, torch.Tensor):
        return value.to(dtype)
    return int(value)


HALF_TYPES = (torch.float16, torch.bfloat16)


def index_add(x, dim, index, source, *, alpha=1):
    """Eager's index_add of a float16/bfloat16 tensor of 2 or more dims with alpha 1 adds in
    float32 and rounds once (with another alpha, or into 1 dim, it adds row by row in the half
    type); torch's decomposition becomes index_put(accumulate=True), which rounds after every
    add (3.5 off in bfloat16 for 151 adds onto 2 rows). index_select's backward is this op."""
    decomposed = _torch_decomposition(aten.index_add.default)
    if x.dtype not in HALF_TYPES or alpha != 1 or x.dim() < 2:
        return decomposed(x, dim, index, source, alpha=alpha)
    return decomposed(x.float(), dim, index, source.float(), alpha=alpha).to(x.dtype)


def pow_tensor_scalar(x, exponent):
    """Eager's pow of a bool tensor by a bool exponent is bool (True: x, False: all True); the
    meta kernel says int64 (found by the fuzzer: `(a >= b) ** True` came back int64)."""
    if x.dtype != torch.bool or not isinstance(exponent, bool):
        return NotImplemented
    return x.clone() if exponent else torch.ones_like(x)


def tanh_backward(out_grad, y):
    """torch's decomposition computes 1 - y * y, which cancels where |y| nears 1 (|x| > 4):
    the rounding of y * y, 6e-8, was 1e-4 of the result there, while eager's kernel fuses the
    product into one multiply-add. (1 - y) (1 + y) is right to a rounding or two at any y
    (found by the fuzzer: the gradient of log1p(tanh(x)) at x = -4.4 was 4e-5 off)."""
    if y.is_complex() or out_grad.is_complex():
        return _torch_decomposition(aten.tanh_backward.default)(out_grad, y)
    dtype = torch.promote_types(out_grad.dtype, y.dtype)
    opmath = opmath_dtype(dtype)  # as torch's, in float for halves
    y = y.to(opmath)
    return (out_grad.to(opmath) * ((1 - y) * (1 + y))).to(dtype)


def native_layer_norm_backward(
    grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask
):
    """Eager saves a float16/bfloat16 layer norm's mean and rstd in the input's type, and
    torch's decomposition of the backward computes rstd / N in it, where eager's kernel computes
    in float. Over many elements that quotient is subnormal in float16 (rstd 0.27 over N = 50176:
    5.4e-6, 0.4% off), and every input gradient was scaled by its error (found by the fuzzer: a
    layer norm over a 224x224 product, 10x eager's error against float64). The statistics go in
    in the computation type, as eager's kernel reads them."""
    decomposed = _torch_decomposition(aten.native_layer_norm_backward.default)
    opmath = opmath_dtype(input.dtype)
    return decomposed(
        grad_out,
        input,
        normalized_shape,
        mean.to(opmath),
        rstd.to(opmath),
        weight,
        bias,
        output_mask,
    )


def native_group_norm_backward(
    grad_output, input, mean, rstd, gamma, N, C, HxW, group, output_mask
):
    """torch's decomposition (and eager's kernel) forms the input gradient as dy c1 + x c2 + c3,
    c2 = (db mean - ds) rstd^3 / M: two sums of products that cancel, scaled by rstd cubed.
    Over a group of one element the gradient is exactly 0, and with eps 1e-6 (rstd 1000) the
    roundings of those products came out 2e-5 (fuzzer, seed 7242: eager happened to round to 0
    there; on other inputs its error is 2e-4). This is layer norm's form, which torch's layer
    norm backward uses: rstd (g - mean(g) - xhat mean(g xhat)) with g = dy w over the group,
    exactly 0 over one element and with no cubed scale; the weight's gradient sums dy xhat,
    where ds - db mean cancels for a mean far from 0."""
    tensors = [t for t in (grad_output, input, mean, rstd, gamma) if t is not None]
    result_dtype = functools.reduce(torch.promote_types, [t.dtype for t in tensors])
    opmath = opmath_dtype(result_dtype)
    cpg, spatial = C // group, list(range(2, input.dim()))
    ones = [1] * len(spatial)

    def per_channel(stat):  # (N, group) -> (N, C, 1, ...): elementwise in the input's layout
        stat = stat.to(opmath).reshape(N, group, 1).expand(N, group, cpg)
        return stat.reshape(N, C, *ones)

    def over_image(t):  # (N, C, ...) -> (N, C)
        if isinstance(HxW, int):  # one loop over H W: g++ vectorizes 1024 better than 32 x 32
            return t.reshape(N, C, HxW).sum(2)
        return t.sum(spatial) if spatial else t  # H W of dynamic sizes merged divide by W

    dy, rstd_c = grad_output.to(opmath), per_channel(rstd)
    xhat = (input.to(opmath) - per_channel(mean)) * rstd_c
    dy_xhat, dy_sum = over_image(dy * xhat), over_image(dy)  # (N, C)
    d_input = d_gamma = d_bias = None
    if output_mask[0]:
        weight = torch.ones_like(dy_sum[0]) if gamma is None else gamma.to(opmath)
        share = 1.0 / (cpg * HxW)

        def group_mean(per_sample):  # (N, C) -> its mean over each group, per channel
            return per_channel((per_sample * weight).reshape(N, group, cpg).sum(2) * share)

        g = dy * weight.reshape(1, C, *ones)
        d_input = rstd_c * (g - group_mean(dy_sum) - xhat * group_mean(dy_xhat))
        d_input = d_input.to(result_dtype)
    if output_mask[1]:
        d_gamma = dy_xhat.sum(0).to(result_dtype)
    if output_mask[2]:
        d_bias = dy_sum.sum(0).to(result_dtype)
    return d_input, d_gamma, d_bias


def repeat(x, repeats):
    """Eager's repeat returns a contiguous tensor. torch's decomposition clones the expanded
    input in the input's layout, so a permuted input gave a permuted result, and a `view`
    after it, legal in eager, failed to trace (Hugging Face WavLM permutes its position bias,
    repeats it over the batch and views it)."""
    return _torch_decomposition(aten.repeat.default)(x, repeats).contiguous()


FIXED = {
    aten.index_add.default: index_add,
    aten.tanh_backward.default: tanh_backward,
    aten.repeat.default: repeat,
    aten.native_layer_norm_backward.default: native_layer_norm_backward,
    aten.native_group_norm_backward.default: native_group_norm_backward,
}
FIXED |= {
    overload: linspace
    for overload in (
        aten.linspace.default,
        aten.linspace.Tensor_Tensor,
        aten.linspace.Tensor_Scalar,
        aten.linspace.Scalar_Tensor,
    )
}
EAGER_DTYPE = {aten.pow.Tensor_Scalar: pow_tensor_scalar}
