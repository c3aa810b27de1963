"""Lowerings of the layout family: views (as strides, or lazy index arithmetic), diagonals,
slices and their scatters, concatenation, padding, and empty buffers."""

import sympy

from dicp.api import shape_of, strides_of, to_sympy

from . import views
from .ctypes_map import compute_ctype
from .loop_ir import Const
from .lowering import lowering, new_buffer
from .sym import IDiv, IMod, always_within, clamp_bound, is_dense, same_layout, wrap_index
from .values import Buffer, Pointwise, cast_value


@lowering("Reshape")
def reshape(g, node, x, shape):
    return views.reshape(g.value(x), shape_of(node.meta["val"]))


@lowering("Permute")
def permute(g, node, x, dims):
    rank = len(dims)
    return views.permute(g.value(x), [d % rank for d in dims])


@lowering("Expand")
def expand(g, node, x, shape):
    return views.expand(g.value(x), shape_of(node.meta["val"]))


@lowering("Slice")
def slice_(g, node, x, dim, start, end, step=1):
    x = g.value(x)  # a symbolic start may be negative: its sign is known only at run time
    return views.slice_view(
        x, dim, clamp_bound(start, x.sizes[dim]), step, shape_of(node.meta["val"])
    )


@lowering("Select")
def select(g, node, x, dim, index):
    x = g.value(x)
    dim = dim % len(x.sizes)
    return views.select_view(x, dim, wrap_index(index, x.sizes[dim]))


@lowering("Unfold")
def unfold(g, node, x, dim, size, step):
    return views.unfold_view(g.value(x), dim, size, step, shape_of(node.meta["val"]))


def _diagonal_start(offset):
    """Where the diagonal at `offset` starts along dim1 and along dim2."""
    return max(-offset, 0), max(offset, 0)


@lowering("Diagonal")
def diagonal(g, node, x, offset, dim1, dim2):
    """x's elements (.., i + start1 along dim1, .., i + start2 along dim2, ..), the diagonal
    last; an empty one (an offset past the edge) has size 0."""
    x = g.value(x)
    start1, start2 = _diagonal_start(offset)

    def fn(k, index):
        rest, i = iter(index[:-1]), index[-1]
        on_diagonal = {dim1: i + start1, dim2: i + start2}
        return x.load(
            k, [on_diagonal[d] if d in on_diagonal else next(rest) for d in range(len(x.sizes))]
        )

    return Pointwise(x.dtype, shape_of(node.meta["val"]), fn)


@lowering("DiagonalScatter")
def diagonal_scatter(g, node, x, src, offset, dim1, dim2):
    """x with src on its diagonal at `offset`: an element is on it when its dim2 index is its
    dim1 index plus `offset`, and reads src at its dim1 index less the diagonal's start."""
    x, src, out_val = g.value(x), g.value(src), node.meta["val"]
    T = compute_ctype(out_val.dtype)
    start1, _ = _diagonal_start(offset)
    rest = [d for d in range(len(x.sizes)) if d not in (dim1, dim2)]

    def fn(k, index):
        on_diagonal = k.op("Eq", "bool", k.index(index[dim2] - index[dim1]), k.index(offset))
        local = [index[d] for d in rest] + [index[dim1] - start1]
        outside = cast_value(k, x.load(k, index), x.dtype, out_val.dtype)
        return k.masked(
            on_diagonal,
            lambda: cast_value(k, src.load(k, local), src.dtype, out_val.dtype),
            outside,
            T,
        )

    return Pointwise(out_val.dtype, shape_of(out_val), fn)


@lowering("SliceScatter")
def slice_scatter(g, node, x, src, dim, start, end, step=1):
    """x with src written over x[start:end:step] along dim, as one lazy value: an element in
    the slice reads src, any other reads x. The bounds are tested in C++, never in Python, so
    a symbolic size gets no guard."""
    x, src, out_val = g.value(x), g.value(src), node.meta["val"]
    T = compute_ctype(out_val.dtype)
    # a symbolic bound may be negative: its sign is known only at run time
    start, end = clamp_bound(start, x.sizes[dim]), clamp_bound(end, x.sizes[dim])

    def fn(k, index):
        offset = index[dim] - start
        inside = k.op(
            "All",
            "bool",
            k.op("Ge", "bool", k.index(offset), k.index(0)),
            k.op("Lt", "bool", k.index(index[dim]), k.index(end)),
        )
        if step != 1:
            on_step = k.op("Eq", "bool", k.index(IMod(offset, step)), k.index(0))
            inside = k.op("All", "bool", inside, on_step)
        local = index[:dim] + [offset if step == 1 else IDiv(offset, step)] + index[dim + 1 :]
        outside = cast_value(k, x.load(k, index), x.dtype, out_val.dtype)
        return k.masked(
            inside, lambda: cast_value(k, src.load(k, local), src.dtype, out_val.dtype), outside, T
        )

    return Pointwise(out_val.dtype, shape_of(out_val), fn)


@lowering("AsStrided")
def as_strided(g, node, x, size, stride, offset, owner_strides=None):
    # sizes, strides and offset come from the node's meta: symbolic, and absolute like eager's
    val, x = node.meta["val"], g.value(x)
    if owner_strides is None:  # a graph input, read in place: its layout is eager's
        source = node.args[0].meta["val"]
        layout = (strides_of(source), to_sympy(source.storage_offset()))
    else:  # a computed owner, in the strides eager gave it (from a fresh allocation)
        layout = ([to_sympy(s) for s in owner_strides], sympy.Integer(0))
        if not is_dense(x.sizes, layout[0]):
            x = _in_layout(g, x, layout[0])  # gaps: no inverse index; lay it out as eager
    return views.as_strided(
        x, shape_of(val), strides_of(val), to_sympy(val.storage_offset()), layout
    )


def _in_layout(g, x, strides):
    if isinstance(x, Buffer) and same_layout(x.sizes, x.strides, strides) and x.offset == 0:
        return x
    return g.realize(Pointwise(x.dtype, x.sizes, x.load), strides)


# Parts one concatenation kernel reads, at most. Each is a nested select in the kernel: 1,100
# passed Python's recursion limit, and under bounds checks 400 took more arguments than ctypes
# can pass. More parts are concatenated in groups first, written to memory.
CAT_MAX_PARTS = 64


@lowering("Cat")
def cat(g, node, tensors, dim):
    parts, out_val = [g.value(t) for t in tensors], node.meta["val"]
    while len(parts) > CAT_MAX_PARTS:
        groups = [parts[i : i + CAT_MAX_PARTS] for i in range(0, len(parts), CAT_MAX_PARTS)]
        parts = [
            g.realize(_concatenated(group, dim, out_val.dtype, _cat_sizes(group, dim)))
            for group in groups
        ]
    return _concatenated(parts, dim, out_val.dtype, shape_of(out_val))


def _cat_sizes(parts, dim):
    sizes = list(parts[0].sizes)
    sizes[dim] = sum(part.sizes[dim] for part in parts)
    return sizes


def _concatenated(parts, dim, dtype, sizes):
    T = compute_ctype(dtype)
    starts, total = [], 0
    for part in parts:
        starts.append(total)
        total = total + part.sizes[dim]

    def fn(k, index):
        cases = []
        for i, (part, start) in enumerate(zip(parts, starts)):
            local = index[:dim] + [index[dim] - start] + index[dim + 1 :]
            last = i == len(parts) - 1
            condition = (
                None
                if last
                else k.op("Lt", "bool", k.index(index[dim]), k.index(start + part.sizes[dim]))
            )
            cases.append(
                (
                    condition,
                    lambda part=part, local=local: cast_value(
                        k, part.load(k, local), part.dtype, dtype
                    ),
                )
            )
        return k.select_first(cases, T)

    return Pointwise(dtype, sizes, fn)


@lowering("ConstantPad")
def constant_pad(g, node, x, pad, value=0):
    x, out_val = g.value(x), node.meta["val"]
    T = compute_ctype(x.dtype)
    rank = len(x.sizes)
    before = [0] * rank
    for i in range(len(pad) // 2):
        before[rank - 1 - i] = pad[2 * i]

    def fn(k, index):
        local = [i - b for i, b in zip(index, before)]
        return k.masked(within(k, local, x.sizes), lambda: x.load(k, local), Const(value, T), T)

    return Pointwise(x.dtype, shape_of(out_val), fn)


def within(k, index, sizes):
    """A bool IR value: 0 <= index[d] < sizes[d] for every d (no test where the loops'
    extents keep it inside)."""
    condition = Const(True, "bool")
    for i, size in zip(index, sizes):
        if always_within(i, size, k.extents):
            continue
        inside = k.op(
            "All",
            "bool",
            k.op("Ge", "bool", k.index(i), k.index(0)),
            k.op("Lt", "bool", k.index(i), k.index(size)),
        )
        condition = (
            inside if condition == Const(True, "bool") else k.op("All", "bool", condition, inside)
        )
    return condition


@lowering("Empty")
def empty(g, node, size, stride, dtype, device=None):
    val = node.meta["val"]
    return new_buffer(g, val, strides_of(val))
