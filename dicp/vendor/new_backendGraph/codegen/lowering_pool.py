"""Pooling as window reductions over the last two or three (spatial) dims: one loop nest per
output."""

import operator

import sympy

from dicp.api import shape_of

from .ctypes_map import compute_ctype
from .values import Buffer, Pointwise, cast_value
from .loop_ir import Assign, Const, Declare, Element, Var
from .lowering import buffer_in_layout_of, lowering, new_buffer
from .lowering_indexing import scatter_result, scatter_store, scatter_target
from .lowering_layout import within
from .sym import (
    IDiv,
    block_count,
    block_extent,
    contiguous_strides,
    flat_index,
    is_static,
    loop_index,
    product,
    unflatten,
)
from .transpose import contiguous_dim

ACC = Var("acc", "double")


def _window(k, out_index, x, kernel, stride, padding, dilation, inner):
    """Input positions (one per spatial dim) read by output position `out_index` at window
    offsets `inner`, and whether they lie inside the input (a bool IR value)."""
    nd = len(kernel)
    at = [out_index[d - nd] * stride[d] - padding[d] + inner[d] * dilation[d] for d in range(nd)]
    return at, within(k, at, x.sizes[-nd:])


def _add_to_acc(k, value):
    k.add(Assign(ACC, value, combine="+"))


def _declare_acc(k, outer):
    k.add(Declare(ACC, Const(0, "double")))


def _max_with_index(g, node, x, inner, window):
    """Values and flat ((d * H + h) * W + w) indices of the maxima over each output's window,
    as ATen picks them: the first maximum, the last NaN over any number. `window(k, outer,
    inner)` gives the input position and whether it lies inside the input."""
    nd = len(inner)
    values_val, indices_val = node.meta["val"]
    values, indices = new_buffer(g, values_val), new_buffer(g, indices_val)
    T = compute_ctype(x.dtype)
    best, best_index = Var("best", T), Var("best_index", "int64_t")

    def pre(k, outer):
        k.add(Declare(best, Const(-float("inf"), T)))
        k.add(Declare(best_index, Const(-1, "int64_t")))

    def body(k, outer, inner):
        _take_if_better(k, x, nd, window(k, outer, inner), outer, best, best_index)

    def post(k, outer):
        values.store(k, outer, best)
        indices.store(k, outer, best_index)

    g.kernel(values.sizes, pre=pre, inner=inner, body=body, post=post)
    return values, indices


def _plane_position(at, plane):
    """ATen's saved index of a max pool: the flat position of `at` within the plane of the
    pooled dims (sizes `plane`), row-major; what the backward compares with."""
    return flat_index(at, contiguous_strides(plane))


def _take_if_better(k, x, nd, window_position, outer, best, best_index, select="Pick"):
    """best, best_index updated by x's element at the window position, if it wins.
    `select`: Pick (masks, no branch: which element wins is data, see cpp_render's Pick) in
    a scalar loop; Where (a ternary) in a SIMD one, which g++ makes a blend, while Pick's
    masks through memcpy keep it from vectorizing the loop at all."""
    at, inside = window_position
    T = best.type
    value = _window_element(k, x, nd, window_position, outer, T)
    position = k.index(_plane_position(at, x.sizes[-nd:]))
    wins = k.op("PoolBetter", "bool", inside, value, best, best_index)
    k.add(Assign(best_index, k.op(select, "int64_t", wins, position, best_index)))
    k.add(Assign(best, k.op(select, T, wins, value, best)))


def _window_element(k, x, nd, window_position, outer, T):
    """x's element at the window position, -inf where it lies outside x (padding)."""
    at, inside = window_position
    return k.masked(inside, lambda: x.load(k, outer[:-nd] + at), Const(-float("inf"), T), T)


@lowering("MaxPool2dWithIndices", "MaxPool3dWithIndices")
def max_pool(g, node, x, kernel, stride, padding, dilation, ceil_mode):
    x = g.value(x)
    nd = len(kernel)

    def window(k, outer, inner):
        return _window(k, outer, x, kernel, stride, padding, dilation, inner)

    channel = contiguous_dim(x)
    if (
        channel is not None
        and channel < len(x.sizes) - nd
        and sympy.sympify(x.sizes[channel]).is_Integer
    ):
        return _max_over_channel_blocks(g, node, x, kernel, window, channel)
    return _max_with_index(g, node, x, [(0, size) for size in kernel], window)


# Channels one kernel iteration of a channels-last max pool keeps maxima for.
CHANNEL_BLOCK = 64


def _max_over_channel_blocks(g, node, x, kernel, window, channel):
    """A max pool of an input laid out with `channel` (not a pooled dim) contiguous, a
    channels-last activation: each outer iteration takes one output position and a block of
    CHANNEL_BLOCK channels, and runs the window over arrays of maxima, channels innermost, so
    every load is contiguous and the updates vectorize (16x16x32x32 -> 16x16x16x16: 0.05 ms,
    eager's time; looped per output over each channel's plane it took 0.37 ms, reading the
    whole image once per channel and branching on every comparison). The picks are ternaries
    here: with Pick's masks g++ left the update loop scalar (8x16x32x32, 3x3 stride 2: 80
    against 24 us). Where no node reads the indices (inference) they are not kept."""
    nd = len(kernel)
    keep_indices = _indices_read(node)
    values = buffer_in_layout_of(g, node.meta["val"][0])
    indices = buffer_in_layout_of(g, node.meta["val"][1]) if keep_indices else None
    T = compute_ctype(x.dtype)
    channels = x.sizes[channel]
    blocks = block_count(channels, CHANNEL_BLOCK)
    positions = [size for d, size in enumerate(values.sizes) if d != channel]
    block = loop_index(len(positions) + 1)[-1]
    width = block_extent(channels, CHANNEL_BLOCK, block)
    best = Var("best", T, (CHANNEL_BLOCK,))
    best_index = Var("best_index", "int64_t", (CHANNEL_BLOCK,))

    def output_index(outer, c):
        index = list(outer[:-1])
        index.insert(channel, CHANNEL_BLOCK * outer[-1] + c)
        return index

    def clear(k, outer, inner):
        c = k.index(inner[0])
        k.add(Assign(Element(best, (c,)), Const(-float("inf"), T)))
        if keep_indices:
            k.add(Assign(Element(best_index, (c,)), Const(-1, "int64_t")))

    def update(k, outer, inner):
        *offsets, c = inner
        index = output_index(outer, c)
        at = window(k, index, offsets)
        if keep_indices:
            picked = Element(best, (k.index(c),)), Element(best_index, (k.index(c),))
            _take_if_better(k, x, nd, at, index, *picked, select="Where")
        else:
            _take_if_greater(k, x, nd, at, index, Element(best, (k.index(c),)))

    def store(k, outer, inner):
        index, c = output_index(outer, inner[0]), k.index(inner[0])
        values.store(k, index, Element(best, (c,)))
        if keep_indices:
            indices.store(k, index, Element(best_index, (c,)))

    def declare(k, outer):
        k.add(Declare(best, aligned=True))
        if keep_indices:
            k.add(Declare(best_index, aligned=True))

    g.phased_kernel(
        positions + [blocks],
        [
            dict(pre=declare, inner=[(0, width)], body=clear, post=None, simd=""),
            dict(
                pre=None,
                inner=[(0, size) for size in kernel] + [(0, width)],
                body=update,
                post=None,
                simd="",
            ),
            dict(pre=None, inner=[(0, width)], body=store, post=None, simd=""),
        ],
    )
    return values, indices


def _indices_read(node) -> bool:
    """Whether a node reads the indices of max pool `node` (its second result)."""
    return any(user.target is not operator.getitem or user.args[1] != 0 for user in node.users)


def _take_if_greater(k, x, nd, window_position, outer, best):
    """best updated by x's element at the window position where it is greater or NaN, as
    _take_if_better's values without an index (PoolBetter with no first element to take:
    an index of 0 is never negative)."""
    T = best.type
    value = _window_element(k, x, nd, window_position, outer, T)
    wins = k.op("PoolBetter", "bool", window_position[1], value, best, Const(0, "int64_t"))
    k.add(Assign(best, k.op("Where", T, wins, value, best)))


@lowering("AdaptiveMaxPool2d", "AdaptiveMaxPool3d")
def adaptive_max_pool(g, node, x, output_size):
    """Each output takes the maximum over the same window as AdaptiveAvgPool's."""
    x = g.value(x)
    out_sizes = shape_of(node.meta["val"][0])
    nd = len(output_size)
    outer = loop_index(len(out_sizes))
    inner = _adaptive_windows(outer[-nd:], x.sizes[-nd:], out_sizes[-nd:])
    return _max_with_index(g, node, x, inner, lambda k, outer, inner: (inner, Const(True, "bool")))


@lowering("AvgPool2d", "AvgPool3d")
def avg_pool(g, node, x, kernel, stride, padding, ceil_mode, count_include_pad, divisor):
    x = g.value(x)
    out = new_buffer(g, node.meta["val"])
    nd = len(kernel)

    def body(k, outer, inner):
        at, inside = _window(k, outer, x, kernel, stride, padding, (1,) * nd, inner)
        _add_to_acc(
            k, k.masked(inside, lambda: x.load(k, outer[:-nd] + at), Const(0, "double"), "double")
        )

    def post(k, outer):
        count = _avg_divisor(
            x.sizes, outer[-nd:], kernel, stride, padding, count_include_pad, divisor
        )
        out.store(k, outer, _divided(k, ACC, count))

    g.kernel(
        out.sizes, pre=_declare_acc, inner=[(0, size) for size in kernel], body=body, post=post
    )
    return out


def _divided(k, value, count):
    """`value` (double) divided by the integer index expression `count`."""
    return k.op("Div", "double", value, k.op("StaticCast", "double", k.index(count)))


def _avg_divisor(in_sizes, window, kernel, stride, padding, count_include_pad, divisor):
    """ATen's divisor for the window at output position `window` (one index per spatial dim),
    an integer index expression."""
    if divisor:
        return sympy.Integer(divisor)
    count = sympy.Integer(1)
    for d, (size, o) in enumerate(zip(in_sizes[-len(window) :], window)):
        start = o * stride[d] - padding[d]
        end = sympy.Min(start + kernel[d], size + padding[d])
        if not count_include_pad:
            start, end = sympy.Max(start, 0), sympy.Min(end, size)
        count = count * (end - start)
    return count


@lowering("AvgPool2dBackward", "AvgPool3dBackward")
def avg_pool_backward(
    g, node, grad, x, kernel, stride, padding, ceil_mode, count_include_pad, divisor
):
    grad, x = g.value(grad), g.value(x)
    out = new_buffer(g, node.meta["val"])
    nd = len(kernel)
    outer = loop_index(len(out.sizes))

    def window_range(d):
        """The output positions whose window covers input index outer[d], exactly: o with
        o * s - p <= i < o * s - p + k. The lower bound's numerator is kept nonnegative
        (shifted by whole strides), so the integer division floors."""
        pos, s, shift = outer[d - nd] + padding[d], stride[d], -(-kernel[d] // stride[d])
        lo = IDiv(pos - kernel[d] + s + shift * s, s) - shift
        return sympy.Max(lo, 0), sympy.Min(IDiv(pos, s) + 1, grad.sizes[d - nd])

    def body(k, outer, inner):
        count = _avg_divisor(x.sizes, inner, kernel, stride, padding, count_include_pad, divisor)
        _add_to_acc(k, _divided(k, grad.load(k, outer[:-nd] + inner), count))

    g.kernel(
        out.sizes,
        pre=_declare_acc,
        inner=[window_range(d) for d in range(nd)],
        body=body,
        post=lambda k, o: out.store(k, o, ACC),
    )
    return out


@lowering("MaxPool2dWithIndicesBackward", "MaxPool3dWithIndicesBackward")
def max_pool_backward(g, node, grad, x, kernel, stride, padding, dilation, ceil_mode, indices):
    grad, indices, nd = g.value(grad), g.value(indices), len(kernel)
    stride = stride or kernel  # ATen's default: windows side by side
    sizes = shape_of(node.meta["val"])
    if _windows_tile(sizes[-nd:], grad.sizes[-nd:], kernel, stride, padding, dilation):
        grad = _in_layout_of(g, grad, indices)
        return _picked_in_own_window(grad, indices, sizes, stride, padding, node.meta["val"].dtype)
    return _add_at_picked(g, node, grad, indices, nd)


def _windows_tile(in_sizes, out_sizes, kernel, stride, padding, dilation):
    """Whether each input element lies in exactly one window (windows as wide as their stride,
    undilated, static sizes) of an output that exists: (i + padding) // stride < the output
    size for the last element i of each dim."""
    return all(
        is_static(i) and is_static(o) and k == s and d == 1 and (i - 1 + p) // s < o
        for i, o, k, s, p, d in zip(in_sizes, out_sizes, kernel, stride, padding, dilation)
    )


def _in_layout_of(g, grad, indices):
    """`grad`, written in the layout of the saved `indices` where the two walk memory along
    different dims: AOTAutograd hands a compiled module's output gradient in NCHW to a
    channels-last max pool's backward, and the lazy gradient, read in the indices' channel
    order, gathered each element from another cache line in every kernel it fuses into (a
    16x16x32x32 batch norm backward's column sums and element-wise kernel: about 1 ms each
    on one thread). Copied once, by tiles, it is a quarter of the input's size."""
    walks = contiguous_dim(grad), contiguous_dim(indices)
    if not isinstance(indices, Buffer) or None in walks or walks[0] == walks[1]:
        return grad
    return g.realize(Pointwise(grad.dtype, grad.sizes, grad.load), indices.strides)


def _picked_in_own_window(grad, indices, sizes, stride, padding, dtype):
    """A max pool's gradient where the windows tile the input: each element takes its one
    window's gradient if that window picked it (its saved index, flat within the plane, is
    the element's), else 0: ATen's zeros plus one add (kept: 0 + -0.0 is 0.0). Lazy, so it
    fuses into the kernel reading it (a ReLU's and a batch norm's backward): the scatter
    needed a zeroed buffer and a kernel of its own. BatchNorm2d(32), ReLU and a 2x2 max pool
    of a 16x32x32x32 channels-last batch, forward and backward: 0.60-0.64x Inductor's time
    with the scatter, 0.51-0.58x without."""
    nd, T = len(stride), compute_ctype(dtype)
    plane = sizes[-nd:]

    def value(k, index):
        spatial = index[-nd:]
        window = index[:-nd] + [IDiv(i + p, s) for i, p, s in zip(spatial, padding, stride)]
        position = k.index(_plane_position(spatial, plane))
        picked = k.op("Eq", "bool", indices.load(k, window), position)
        gradient = cast_value(k, grad.load(k, window), grad.dtype, dtype)
        added = k.op("Add", T, Const(0, T), gradient)
        return k.op("Where", T, picked, added, Const(0, T))

    return Pointwise(dtype, list(sizes), value)


def _add_at_picked(g, node, grad, indices, nd):
    """A max pool's gradient: zeros, plus each output's gradient at the input element its
    saved index picked (a flat index within the plane), in output order as ATen adds them.
    Two outputs of one plane may pick one element, so only the loops over planes run in
    parallel, as ATen's kernel does. Gathering instead (each input element looking for the
    outputs that picked it) made every element test every window that might hold it (one
    where windows tile: _picked_in_own_window): 19
    times eager's time for a 3x3, stride 2 pool, 54 times in 3-d."""
    out = scatter_target(g, None, node.meta["val"])
    plane = out.sizes[-nd:]

    def body(k, idx):
        position = k.computed_index(indices.load(k, idx), product(plane), "max pool index")
        value = cast_value(k, grad.load(k, idx), grad.dtype, out.dtype)
        scatter_store(k, out, idx[:-nd] + unflatten(position, plane), value, accumulate=True)

    g.pointwise_kernel_in_order(grad.sizes, body, _channels_inside(indices, nd))
    return scatter_result(out, node.meta["val"])


def _channels_inside(indices, nd):
    """The loop order of a max pool's scatter: the dims in order, or with a channel dim that
    the saved indices walk contiguously (channels-last) moved inside the pooled ones, so that
    the loops read the indices and gradient in memory order and write whole pixels; looped
    plane by plane they took a cache line per element (8x16x32x32, 3x3 stride 2: 14 against
    20 us on two threads). The pooled dims keep their order, so each element's sum adds the
    outputs in ATen's order."""
    order = list(range(len(indices.sizes)))
    channel = contiguous_dim(indices) if isinstance(indices, Buffer) else None
    if channel is None or channel >= len(order) - nd:
        return order
    order.remove(channel)
    return order + [channel]


@lowering("AdaptiveAvgPool2d", "AdaptiveAvgPool3d")
def adaptive_avg_pool(g, node, x, output_size):
    x = g.value(x)
    out = new_buffer(g, node.meta["val"])
    nd = len(output_size)
    outer = loop_index(len(out.sizes))

    def windows(outer):
        return _adaptive_windows(outer[-nd:], x.sizes[-nd:], out.sizes[-nd:])

    def body(k, outer, inner):
        _add_to_acc(k, x.load(k, outer[:-nd] + inner))

    def post(k, outer):
        out.store(k, outer, _divided(k, ACC, _window_size(windows(outer))))

    g.kernel(out.sizes, pre=_declare_acc, inner=windows(outer), body=body, post=post)
    return out


def _adaptive_windows(index, in_sizes, out_sizes):
    """Per pooled dim, the input range [floor(o * I / O), ceil((o + 1) * I / O)) that output
    position o (of `index`) averages or takes the maximum of. With the sizes swapped, the
    output positions whose window holds input index i, exactly: o's window holds i iff
    o * I / O < i + 1 and i < (o + 1) * I / O, that is [floor(i * O / I), ceil((i + 1) * O /
    I))."""
    return [
        (IDiv(o * size_in, size_out), IDiv((o + 1) * size_in + size_out - 1, size_out))
        for o, size_in, size_out in zip(index, in_sizes, out_sizes)
    ]


def _window_size(bounds):
    return product(hi - lo for lo, hi in bounds)


@lowering("AdaptiveAvgPool2dBackward", "AdaptiveAvgPool3dBackward")
def adaptive_avg_pool_backward(g, node, grad, x):
    grad, sizes = g.value(grad), shape_of(node.meta["val"])
    nd = _spatial_dims(node)
    in_sizes, out_sizes = sizes[-nd:], grad.sizes[-nd:]
    factors = [sympy.simplify(i / o) for i, o in zip(in_sizes, out_sizes)]
    if all(f.is_Integer for f in factors):
        return _spread_evenly(grad, sizes, factors)
    out = new_buffer(g, node.meta["val"])
    outer = loop_index(len(out.sizes))

    def body(k, outer, inner):
        window = _adaptive_windows(inner, in_sizes, out_sizes)
        _add_to_acc(k, _divided(k, grad.load(k, outer[:-nd] + inner), _window_size(window)))

    sources = _adaptive_windows(outer[-nd:], out_sizes, in_sizes)
    g.kernel(
        out.sizes,
        pre=_declare_acc,
        inner=sources,
        body=body,
        post=lambda k, o: out.store(k, o, ACC),
    )
    return out


def _spread_evenly(grad, sizes, factors):
    """The adaptive average pool's gradient where each input size is a whole multiple of its
    output size (56 into 7, any size into 1): the windows tile the input, so each element
    takes its one window's gradient over the window's size. Lazy, so it fuses into the
    kernel that reads it, and vectorizes; looping over candidate windows took 30 times
    eager's time for 56 into 7."""
    nd, T = len(factors), compute_ctype(grad.dtype)
    count = Const(float(product(factors)), T)

    def value(k, index):
        window = [IDiv(i, f) for i, f in zip(index[-nd:], factors)]
        return k.op("Div", T, grad.load(k, index[:-nd] + window), count)

    return Pointwise(grad.dtype, list(sizes), value)


@lowering("AdaptiveMaxPool2dBackward", "AdaptiveMaxPool3dBackward")
def adaptive_max_pool_backward(g, node, grad, x, indices):
    return _add_at_picked(g, node, g.value(grad), g.value(indices), _spatial_dims(node))


@lowering("ReplicationPadBackward")
def replication_pad_backward(g, node, grad, x, padding):
    """Each input element sums the gradients of the outputs that copied it: output o of a
    padded dim read input clamp(o - before, 0, size - 1), so element i gathers o = i + before,
    the first one also every o below, the last one every o above. (`padding` is ATen's: the
    last dim's before and after first.)"""
    grad = g.value(grad)
    out = new_buffer(g, node.meta["val"])
    nd = len(padding) // 2
    outer = loop_index(len(out.sizes))

    def copied_from(d):
        i, size, out_size = outer[d - nd], out.sizes[d - nd], grad.sizes[d - nd]
        before = padding[2 * (nd - 1 - d)]
        first, last = 1 - sympy.Min(i, 1), 1 - sympy.Min(size - 1 - i, 1)  # 1 or 0
        lo = i + before - first * (abs(before) + 1)
        hi = i + before + 1 + last * out_size
        return sympy.Max(lo, 0), sympy.Min(hi, out_size)

    g.kernel(
        out.sizes,
        pre=_declare_acc,
        inner=[copied_from(d) for d in range(nd)],
        body=lambda k, outer, inner: _add_to_acc(k, grad.load(k, outer[:-nd] + inner)),
        post=lambda k, o: out.store(k, o, ACC),
    )
    return out


def _spatial_dims(node):
    """2 or 3: the pooled dims of a backward node, from its op's name."""
    return 3 if node.target.name.endswith("3dBackward") else 2
