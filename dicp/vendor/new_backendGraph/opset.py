"""The vendor op vocabulary of new_backendgraph, grouped by family.

Each op is a name plus `impl`, its reference semantics in torch tensor ops: on fake tensors it
is the shape rule, on real tensors it is the op's Python kernel. Pointwise ops are
rows of pointwise.py (their conversion, lowering and renderings too); the loop-IR meaning of
each op lives in codegen/lowering*.py, keyed by the same name.
"""

import torch

from dicp.api import Operator

from . import convolution, gemm
from .pointwise import POINTWISE

OPS: dict[str, Operator] = {}


def _define(family, name, impl, kernel=None):
    op_class = type(
        name,
        (Operator,),
        {
            "name": name,
            "family": family,
            "mutates": family == "inplace",
            "fresh_result": name in FRESH_RESULTS,
            "writes_out": name in WRITES_OUT,
            "impl": staticmethod(impl),
            "kernel": kernel and staticmethod(kernel),
        },
    )
    OPS[name] = op_class()
    return OPS[name]


UNARY = {row.name: row.impl for row in POINTWISE if row.family == "unary"}
BINARY = {row.name: row.impl for row in POINTWISE if row.family == "binary"}
TERNARY = {row.name: row.impl for row in POINTWISE if row.family == "ternary"}

REDUCE = {
    # rounded_to: the type every use rounds the sum to (a variance's float), when that is
    # narrower than the sum's own: codegen may sum in it where it stays within its range
    "ReduceSum": lambda x, dims, keepdim, dtype=None, rounded_to=None: torch.sum(
        x, dims, keepdim, dtype=dtype
    ),
    "ReduceProd": lambda x, dims, keepdim, dtype=None: _reduce_each(
        torch.prod, x, dims, keepdim, dtype=dtype
    ),
    "ReduceMax": lambda x, dims, keepdim: torch.amax(x, dims, keepdim),
    "ReduceMin": lambda x, dims, keepdim: torch.amin(x, dims, keepdim),
    "ReduceAny": lambda x, dims, keepdim: _reduce_each(torch.any, x, dims, keepdim),
    "ReduceAll": lambda x, dims, keepdim: _reduce_each(torch.all, x, dims, keepdim),
    "ArgMax": lambda x, dim, keepdim: torch.argmax(x, dim, keepdim),
    "ArgMin": lambda x, dim, keepdim: torch.argmin(x, dim, keepdim),
}

# Python sees tensors as values; these views must not alias in the Python target either.
LAYOUT = {
    "Reshape": lambda x, shape: x.reshape(shape),
    "Permute": lambda x, dims: x.permute(dims),
    "Expand": lambda x, shape: x.expand(shape),
    "Slice": lambda x, dim, start, end, step: x[
        (slice(None),) * (dim % max(x.dim(), 1)) + (slice(start, end, step),)
    ],
    "Select": lambda x, dim, index: x.select(dim, index),
    "Diagonal": lambda x, offset, dim1, dim2: torch.diagonal(x, offset, dim1, dim2),
    "Unfold": lambda x, dim, size, step: x.unfold(dim, size, step),
    "DiagonalScatter": lambda x, src, offset, dim1, dim2: torch.diagonal_scatter(
        x, src, offset, dim1, dim2
    ),
    "SliceScatter": lambda x, src, dim, start, end, step: torch.slice_scatter(
        x, src, dim, start, end, step
    ),
    "AsStridedScatter": lambda x, src, size, stride, offset: torch.as_strided_scatter(
        x, src, size, stride, offset
    ),
    "AsStrided": lambda x, size, stride, offset, owner_strides=None: _relaid(
        x, owner_strides
    ).as_strided(size, stride, offset),
    "Cat": lambda xs, dim: torch.cat(xs, dim),
    "ConstantPad": lambda x, pad, value=0: torch.constant_pad_nd(x, pad, value),
    "Copy": lambda x: x.clone(memory_format=torch.contiguous_format),
    "Convert": lambda x, dtype: x.to(dtype, copy=True),
    # factories: `device` is where the ATen op put its result (the host's by default)
    "Full": lambda size, value, dtype, device=None: torch.full(
        size, value, dtype=dtype, device=device
    ),
    "Empty": lambda size, stride, dtype, device=None: torch.empty_strided(
        size, stride, dtype=dtype, device=device
    ),
    "Iota": lambda length, start, step, dtype, device=None: torch.arange(
        start, start + length * step, step, dtype=dtype, device=device
    )[:length],
    "CumSum": lambda x, dim, dtype=None: torch.cumsum(x, dim, dtype=dtype),
    "CumProd": lambda x, dim, dtype=None: torch.cumprod(x, dim, dtype=dtype),
    "Tril": lambda x, diagonal: torch.tril(x, diagonal),
    "Triu": lambda x, diagonal: torch.triu(x, diagonal),
}

INDEXING = {
    "Gather": lambda x, dim, index: torch.gather(x, dim, index),
    "ScatterSrc": lambda x, dim, index, src: torch.scatter(x, dim, index, src),
    "ScatterAdd": lambda x, dim, index, src: torch.scatter_add(x, dim, index, src),
    "IndexTensor": lambda x, indices: torch.ops.aten.index.Tensor(x, indices),
    "IndexPut": lambda x, indices, values, accumulate=False: torch.ops.aten.index_put.default(
        x, indices, values, accumulate
    ),
}


def _pools(nd):
    """Window reductions over the last `nd` (spatial) dims: ATen's ops, arguments as ATen's."""
    aten = torch.ops.aten
    return {
        f"MaxPool{nd}dWithIndices": getattr(aten, f"max_pool{nd}d_with_indices").default,
        f"MaxPool{nd}dWithIndicesBackward": getattr(
            aten, f"max_pool{nd}d_with_indices_backward"
        ).default,
        f"AvgPool{nd}d": getattr(aten, f"avg_pool{nd}d").default,
        f"AvgPool{nd}dBackward": getattr(aten, f"avg_pool{nd}d_backward").default,
        f"AdaptiveAvgPool{nd}d": getattr(aten, f"_adaptive_avg_pool{nd}d").default,
        f"AdaptiveAvgPool{nd}dBackward": getattr(aten, f"_adaptive_avg_pool{nd}d_backward").default,
        f"AdaptiveMaxPool{nd}d": getattr(aten, f"adaptive_max_pool{nd}d").default,
        f"AdaptiveMaxPool{nd}dBackward": getattr(aten, f"adaptive_max_pool{nd}d_backward").default,
    }


def _replication_pad_backward(grad, x, padding):
    aten = torch.ops.aten
    pad = {
        2: aten.replication_pad1d_backward,
        4: aten.replication_pad2d_backward,
        6: aten.replication_pad3d_backward,
    }[len(padding)]
    return pad.default(grad, x, padding)


POOL = {**_pools(2), **_pools(3), "ReplicationPadBackward": _replication_pad_backward}

# Library kernels: the backend's tuned kernel library, called from the wrapper.
LIBRARY = {
    "Mm": torch.ops.aten.mm.default,
    "Bmm": torch.ops.aten.bmm.default,
    "Addmm": torch.ops.aten.addmm.default,
    "Baddbmm": torch.ops.aten.baddbmm.default,
    "Convolution": torch.ops.aten.convolution.default,
    # oneDNN's fastest layout; its result is channels-last too, and so are the kernels after it
    "ConvolutionNHWC": lambda x, weight, bias, *rest: torch.ops.aten.convolution.default(
        *convolution.in_channels_last(x, weight), bias, *rest
    ),
    "ConvolutionBackward": torch.ops.aten.convolution_backward.default,
    # the same with a plain NCHW input and weight made channels-last, like the gradient
    "ConvolutionBackwardNHWC": lambda grad, x, weight, *rest: (
        torch.ops.aten.convolution_backward.default(
            grad, *convolution.in_channels_last(x, weight), *rest
        )
    ),
    # a convolution with its per-channel epilogue folded into weight and bias, and an optional
    # ReLU (conv_epilogue.py): (x, weight, bias, stride, padding, dilation, groups,
    # channels_last, relu)
    "FusedConvolution": convolution.fused_impl,
    "Sort": lambda x, dim=-1, descending=False, stable=False: torch.ops.aten.sort.stable(
        x, stable=bool(stable), dim=dim, descending=descending
    ),
    "Topk": torch.ops.aten.topk.default,
    "Bernoulli": torch.ops.aten.bernoulli.p,
    "Rand": torch.ops.aten.rand.default,
    "Randn": torch.ops.aten.randn.default,
    "FlashAttention": torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,
    "FlashAttentionBackward": (
        torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default
    ),
}

# Library ops whose result is always new memory, keeping no view of their arguments
# (Operator.fresh_result): the pointwise kernel after one (bias, batch norm, activation) may
# write into it in place; a tuple's elements are not taken over, but its arguments stay the
# wrapper's own (WrapperBuilder.keeps_no_views).
FRESH_RESULTS = {
    "Mm",
    "Bmm",
    "Addmm",
    "Baddbmm",
    "Convolution",
    "ConvolutionNHWC",
    "FusedConvolution",
    "FlashAttention",
    "FlashAttentionBackward",
    "ConvolutionBackward",
    "ConvolutionBackwardNHWC",
}
# Library ops whose kernel takes `out=` (Operator.writes_out): the wrapper gives them a dead
# buffer's memory to write their result into.
WRITES_OUT = {"Mm", "Addmm", "Bmm"}

# Library kernels that run other code than their `impl` on real tensors: the faster of two
# libraries' products (gemm.py), 1x1 convolutions as products (convolution.py).
LIBRARY_KERNELS = {
    "Convolution": convolution.convolution_kernel,
    "ConvolutionNHWC": convolution.convolution_nhwc_kernel,
    "ConvolutionBackward": convolution.convolution_backward_kernel,
    "ConvolutionBackwardNHWC": convolution.convolution_backward_nhwc_kernel,
    "Mm": gemm.mm,
    "Addmm": gemm.addmm,
    "Bmm": gemm.bmm,
    "FusedConvolution": convolution.fused,
}

# Writes into an existing buffer (graph-input mutation that AOTAutograd leaves in place).
INPLACE = {
    "CopyInto": lambda dst, src: dst.copy_(src),
}


def _relaid(x, strides):
    """x in a fresh tensor with `strides` (None: x as it is), so that strides addressing that
    layout's storage read what eager's would."""
    if strides is None:
        return x
    return torch.empty_strided(x.shape, strides, dtype=x.dtype, device=x.device).copy_(x)


def _reduce_each(fn, x, dims, keepdim, **kwargs):
    if x.dim() == 0:  # no dims to name: reduce the one element (any/all still give bool)
        return fn(x, **kwargs)
    result = x
    for dim in sorted((d % max(x.dim(), 1) for d in dims), reverse=True):
        result = fn(result, dim, keepdim=keepdim, **kwargs)
        kwargs = {}
    return result


FAMILIES = {
    "unary": UNARY,
    "binary": BINARY,
    "ternary": TERNARY,
    "reduce": REDUCE,
    "layout": LAYOUT,
    "indexing": INDEXING,
    "pool": POOL,
    "library": LIBRARY,
    "inplace": INPLACE,
}
for _family, _table in FAMILIES.items():
    for _name, _impl in _table.items():
        _define(_family, _name, _impl, LIBRARY_KERNELS.get(_name))


class _Namespace:
    """`ops.Add` style access to the vocabulary."""

    def __getattr__(self, name):
        try:
            return OPS[name]
        except KeyError:
            raise AttributeError(f"new_backendgraph has no vendor op {name!r}") from None


ops = _Namespace()
