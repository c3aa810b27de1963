"""ATen -> OpenVINO opset ops: views and layout, indexing, creation, casts and convolution.

OpenVINO values have no strides: a view is a new value (Reshape, Transpose, Slice...), which is
exact because AOTAutograd hands dicp functional graphs. Target shapes come from the ATen node's
fake result, so a symbolic size is a sympy expression the wrapper computes at run time.
"""

import torch

from dicp.api import Unsupported, is_symbolic, register_conversion, to_sympy

from .conversion import CONVERSIONS, broadcast_to_out, cast, is_tensor, op, scalar

aten = torch.ops.aten
prims = torch.ops.prims
INT64_MAX = 2**63 - 1


def reshape_to_out(ctx, x):
    return op(ctx, "Reshape", x, list(ctx.out.shape), False)


def statically_empty_result(convert):
    """A converter whose result has no elements at compile time returns a filled value of the
    result's shape instead: OpenVINO's CPU plugin (2026.4) dies of SIGFPE compiling a Gather
    with static empty indices (repeat_interleave with all-zero repeats gave one)."""

    def converter(ctx, *args, **kwargs):
        if any(not is_symbolic(size) and size == 0 for size in ctx.out.shape):
            return broadcast_to_out(ctx, op(ctx, "Constant", 0, ctx.out.dtype))
        return convert(ctx, *args, **kwargs)

    return converter


# Element order kept, shape changed: one Reshape to the result's shape. clone and alias become a
# Reshape too: a new value, never the input itself (an output must not alias an input that the
# ATen graph did not alias).
RESHAPES = [
    aten.view.default,
    aten._unsafe_view,
    aten.reshape,
    aten.squeeze,
    aten.unsqueeze,
    aten.clone,
    aten.alias,
    aten.lift_fresh_copy,
    aten.view.dtype,
    prims.copy_strided.default,  # a copy laid out otherwise: decomposed lerp and index_fill
]
for aten_op in RESHAPES:
    register_conversion(CONVERSIONS, aten_op)(
        lambda ctx, x, *rest, **kwargs: _same_dtype_reshape(ctx, x)
    )


def _same_dtype_reshape(ctx, x):
    if ctx.val(x).dtype != ctx.out.dtype:
        raise Unsupported("a view as another dtype (a bit reinterpretation)")
    return reshape_to_out(ctx, x)


@register_conversion(CONVERSIONS, aten.permute)
def permute(ctx, x, dims):
    rank = max(ctx.val(x).dim(), 1)
    return op(ctx, "Transpose", x, [d % rank for d in dims])


@register_conversion(CONVERSIONS, aten.t)
def transpose_2d(ctx, x):
    return op(ctx, "Transpose", x, list(range(ctx.val(x).dim()))[::-1])


@register_conversion(CONVERSIONS, aten.transpose.int)
def transpose(ctx, x, dim0, dim1):
    order = list(range(ctx.val(x).dim()))
    if order:
        order[dim0], order[dim1] = order[dim1], order[dim0]
    return op(ctx, "Transpose", x, order)


@register_conversion(CONVERSIONS, aten.expand.default)
def expand(ctx, x, sizes, implicit=False):
    return broadcast_to_out(ctx, x)


@register_conversion(CONVERSIONS, aten.slice.Tensor)
def slice_(ctx, x, dim=0, start=None, end=None, step=1):
    start = 0 if start is None else scalar(ctx, start)
    end = INT64_MAX if end is None else scalar(ctx, end)
    if ctx.val(x).dim() == 0:
        raise Unsupported("a 0-d input")
    return op(ctx, "Slice", x, [start], [end], [scalar(ctx, step)], [dim])


@register_conversion(CONVERSIONS, aten.select.int)
@statically_empty_result
def select(ctx, x, dim, index):
    index = op(ctx, "Constant", scalar(ctx, index), torch.int64)
    return op(ctx, "Gather", x, index, dim)


@register_conversion(CONVERSIONS, aten.cat)
def cat(ctx, tensors, dim=0):
    dtype = ctx.out.dtype
    # torch skips 1-d empty tensors in cat whatever their rank (legacy behaviour)
    kept = [t for t in tensors if not (ctx.val(t).dim() == 1 and ctx.val(t).shape[0] == 0)]
    if not kept:
        raise Unsupported("only empty inputs")
    rank = ctx.out.dim()
    return op(ctx, "Concat", [cast(ctx, t, dtype) for t in kept], dim % rank)


@register_conversion(CONVERSIONS, aten.constant_pad_nd)
def constant_pad(ctx, x, pad, value=0):
    rank = ctx.val(x).dim()
    begins, ends = [0] * rank, [0] * rank
    for i in range(len(pad) // 2):
        begins[rank - 1 - i], ends[rank - 1 - i] = pad[2 * i], pad[2 * i + 1]
    return op(ctx, "Pad", x, begins, ends, "constant", cast(ctx, value, ctx.out.dtype))


# ---- indexing ----
@register_conversion(CONVERSIONS, aten.index_select)
@statically_empty_result
def index_select(ctx, x, dim, index):
    if ctx.val(index).dim() == 0:  # torch takes a 0-d index as one index, keeping the dim
        index = op(ctx, "Reshape", index, [1], False)
    if ctx.val(x).dim() == 0:
        return op(
            ctx,
            "Reshape",
            op(ctx, "Gather", op(ctx, "Reshape", x, [1], False), index, 0),
            [],
            False,
        )
    return op(ctx, "Gather", x, index, dim)


@register_conversion(CONVERSIONS, aten.embedding.default)
@statically_empty_result
def embedding(ctx, weight, indices, *rest):
    return op(ctx, "Gather", weight, indices, 0)


@register_conversion(CONVERSIONS, aten.gather.default)
@statically_empty_result
def gather(ctx, x, dim, index, sparse_grad=False):
    if ctx.val(x).dim() == 0:  # OpenVINO's GatherElements wants a dim to gather along
        flat = op(
            ctx,
            "GatherElements",
            op(ctx, "Reshape", x, [1], False),
            op(ctx, "Reshape", index, [1], False),
            0,
        )
        return op(ctx, "Reshape", flat, [], False)
    return op(ctx, "GatherElements", x, index, dim)


@register_conversion(CONVERSIONS, aten.index.Tensor)
@statically_empty_result
def index(ctx, x, indices):
    """x[i0, None, i2, ...] with integer index tensors: one GatherND over the indexed dims
    moved first, its result dims then put where torch puts them (at the first indexed dim when
    the indexed dims are adjacent, else first)."""
    positions = [d for d, t in enumerate(indices) if t is not None]
    if any(ctx.val(indices[d]).dtype in (torch.bool, torch.uint8) for d in positions):
        raise Unsupported("a boolean index (a data-dependent shape)")
    rank, sizes = ctx.val(x).dim(), ctx.val(x).shape
    rest = [d for d in range(rank) if d not in positions]
    grid = torch.broadcast_shapes(*(ctx.val(indices[d]).shape for d in positions))
    coords = [
        op(ctx, "Unsqueeze", index_grid(ctx, indices[d], sizes[d], grid), [len(grid)])
        for d in positions
    ]
    moved = (
        x if positions == list(range(len(positions))) else op(ctx, "Transpose", x, positions + rest)
    )
    gathered = op(ctx, "GatherND", moved, op(ctx, "Concat", coords, len(grid)), 0)
    first = positions[0]
    if positions != list(range(first, first + len(positions))) or first == 0:
        return gathered
    batch = len(grid)
    order = (
        [batch + i for i in range(first)]
        + list(range(batch))
        + [batch + i for i in range(first, len(rest))]
    )
    return op(ctx, "Transpose", gathered, order)


def index_grid(ctx, index, size, grid):
    """One index tensor as int64, negatives counted from the end of a dim of `size`,
    broadcast to the common `grid` shape of all the indices."""
    index = cast(ctx, index, torch.int64)
    wrapped = op(ctx, "Add", index, cast(ctx, size, torch.int64))
    index = op(ctx, "Select", op(ctx, "Less", index, cast(ctx, 0, torch.int64)), wrapped, index)
    same = [to_sympy(s) for s in ctx.val(index).shape] == [to_sympy(s) for s in grid]
    return index if same else op(ctx, "Broadcast", index, list(grid))


@register_conversion(CONVERSIONS, aten.as_strided.default)
@statically_empty_result
def as_strided(ctx, x, size, stride, storage_offset=None):
    """A strided read of a tensor that is its own storage in ATen's graph (contiguous from
    offset 0) within its elements: a Gather over the flattened value (GPT-2's split of its
    fused qkv projection). Any other read reaches storage the engine's values do not have."""
    source = ctx.node.args[0].meta["val"]
    offset = storage_offset or 0
    if any(is_symbolic(n) for n in (*size, *stride, offset, *source.shape)):
        raise Unsupported("symbolic sizes, strides or offset")
    if not source.is_contiguous() or source.storage_offset() != 0:
        raise Unsupported("a tensor whose storage is not its value (a view or a layout with gaps)")
    if offset + sum((n - 1) * s for n, s in zip(size, stride)) >= source.numel():
        raise Unsupported("strides reaching past the tensor's elements")
    positions = op(ctx, "Constant", offset, torch.int64)
    for dim, (n, step) in enumerate(zip(size, stride)):
        along = op(
            ctx,
            "Multiply",
            op(ctx, "Range", 0, n, 1, torch.int64),
            op(ctx, "Constant", step, torch.int64),
        )
        shape = [1] * len(size)
        shape[dim] = n
        positions = op(ctx, "Add", positions, op(ctx, "Reshape", along, shape, False))
    return op(ctx, "Gather", op(ctx, "Reshape", x, [-1], False), positions, 0)


# ---- casts and creation ----
@register_conversion(CONVERSIONS, [aten._to_copy.default, prims.convert_element_type.default])
def to_dtype(ctx, x, *args, **kwargs):
    if ctx.val(x).dtype == ctx.out.dtype:
        return reshape_to_out(ctx, x)  # a copy
    return op(ctx, "Convert", x, ctx.out.dtype)


@register_conversion(CONVERSIONS, aten.copy.default)
def copy(ctx, dst, src, non_blocking=False):
    return broadcast_to_out(ctx, cast(ctx, src, ctx.out.dtype))


@register_conversion(
    CONVERSIONS, [aten.full.default, aten.full_like.default, aten.scalar_tensor.default]
)
def full(ctx, size_or_like, value=None, **kwargs):
    if ctx.node.target is aten.scalar_tensor.default:
        size_or_like, value = (), size_or_like
    fill = op(ctx, "Constant", scalar(ctx, value), ctx.out.dtype)
    return broadcast_to_out(ctx, fill)


@register_conversion(
    CONVERSIONS,
    [
        aten.zeros.default,
        aten.ones.default,
        aten.zeros_like.default,
        aten.ones_like.default,
        aten.empty.memory_format,
        aten.empty_like.default,
        aten.empty_strided.default,
        aten.empty_permuted.default,
        aten.new_empty_strided.default,
    ],
)
def filled(ctx, *args, **kwargs):
    value = 1 if ctx.node.target.overloadpacket in (aten.ones, aten.ones_like) else 0
    fill = op(ctx, "Constant", value, ctx.out.dtype)
    return broadcast_to_out(ctx, fill)


@register_conversion(CONVERSIONS, [aten.arange.default, aten.arange.start, aten.arange.start_step])
def arange(ctx, *args, **kwargs):
    numbers = [scalar(ctx, a) for a in args if not isinstance(a, torch.dtype)]
    start, end, step = {1: (0, numbers[0], 1), 2: (*numbers, 1), 3: numbers}[len(numbers)]
    dtype = ctx.out.dtype
    if not dtype.is_floating_point and any(isinstance(v, float) for v in (start, end, step)):
        raise Unsupported("an integer arange with float bounds")
    return op(ctx, "Range", start, end, step, dtype)


@register_conversion(CONVERSIONS, prims.iota.default)
def iota(ctx, length, *, start, step, dtype, **kwargs):
    start, step = scalar(ctx, start), scalar(ctx, step)
    return op(ctx, "Range", start, start + scalar(ctx, length) * step, step, dtype)


# ---- convolution ----
@register_conversion(CONVERSIONS, aten.convolution.default)
def convolution(
    ctx, x, weight, bias, stride, padding, dilation, transposed, output_padding, groups
):
    if transposed:
        raise Unsupported("a transposed convolution")
    if not all(is_tensor(ctx, t) for t in (x, weight)) or ctx.val(x).dim() < 3:
        raise Unsupported("an unbatched input")
    if any(is_symbolic(size) for size in ctx.val(weight).shape):
        # "Doesn't support dynamic weights shape" (openvino 2026.4); a module's parameters
        # keep static shapes under dynamic=True, so this is a weight passed as an input
        raise Unsupported("a weight of symbolic shape, which OpenVINO's CPU plugin refuses")
    dtype = ctx.out.dtype
    x, weight = cast(ctx, x, dtype), cast(ctx, weight, dtype)
    out = _conv(ctx, x, weight, list(stride), list(padding), list(dilation), groups)
    if bias is None:
        return out
    spatial = ctx.out.dim() - 2
    return op(
        ctx, "Add", out, op(ctx, "Reshape", cast(ctx, bias, dtype), [1, -1] + [1] * spatial, False)
    )


def _conv(ctx, x, weight, stride, padding, dilation, groups):
    if groups == 1:
        return op(ctx, "Convolution", x, weight, stride, padding, padding, dilation)
    shape = list(ctx.val(weight).shape)
    grouped = op(ctx, "Reshape", weight, [groups, shape[0] // groups, *shape[1:]], False)
    return op(ctx, "GroupConvolution", x, grouped, stride, padding, padding, dilation)
