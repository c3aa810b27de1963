"""Lowerings of the indexing family and of writes in place: gather, advanced indexing, the
scatters and index_put (stores through computed indices), and copies into graph inputs."""

import torch

from dicp.api import is_dense, shape_of, to_sympy

from .ctypes_map import compute_ctype
from .loop_ir import Const
from .lowering import HALF_TYPES, dense_strides, lowering
from .values import Buffer, Pointwise, cast_value, load_broadcast


def _indexed_dim(sizes, dim):
    """(dim made non-negative, its size). A 0-d tensor is one element along dim 0 or -1, as
    eager's gather and scatter take it."""
    if not sizes:
        return 0, 1
    dim = dim % len(sizes)
    return dim, sizes[dim]


def _along(index, dim, position):
    """`index` with dim `dim` at `position`; a 0-d tensor's index stays empty (the position
    can only be 0, which the bounds check verifies)."""
    return index[:dim] + [position] + index[dim + 1 :] if index else index


@lowering("Gather")
def gather(g, node, x, dim, index):
    x, index_value = g.value(x), g.value(index)
    dim, size = _indexed_dim(x.sizes, dim)

    def fn(k, idx):
        position = k.computed_index(index_value.load(k, idx), size, f"Gather index for dim {dim}")
        return x.load(k, _along(idx, dim, position))

    return Pointwise(x.dtype, shape_of(node.meta["val"]), fn)


def _advanced_index_layout(rank, indices):
    """(positions of indexed dims, whether they are adjacent) for aten.index semantics."""
    positions = [i for i, t in enumerate(indices) if t is not None]
    adjacent = positions == list(range(positions[0], positions[-1] + 1))
    return positions, adjacent


def _index_source(k, x, indices, out_index, out_sizes):
    """The x index read by out_index (running over `out_sizes`) under advanced indexing with
    `indices`."""
    rank, broadcast_rank = len(x.sizes), _broadcast_rank(indices)
    positions, adjacent = _advanced_index_layout(rank, indices)
    first = positions[0] if adjacent else 0
    b_index = out_index[first : first + broadcast_rank]
    b_sizes = out_sizes[first : first + broadcast_rank]
    rest = out_index[:first] + out_index[first + broadcast_rank :]
    source, rest_iter = [], iter(rest)
    for d in range(rank):
        if d in positions:
            loaded = load_broadcast(k, indices[d], b_index, torch.int64, b_sizes)
            source.append(k.computed_index(loaded, x.sizes[d], f"index tensor for dim {d}"))
        else:
            source.append(next(rest_iter))
    return source


def _broadcast_rank(indices):
    return max(len(t.sizes) for t in indices if t is not None)


@lowering("IndexTensor")
def index_tensor(g, node, x, indices):
    x = g.value(x)
    indices = [None if t is None else g.value(t) for t in indices]
    sizes = shape_of(node.meta["val"])
    return Pointwise(
        x.dtype, sizes, lambda k, idx: x.load(k, _index_source(k, x, indices, idx, sizes))
    )


# A scatter copies x into a float32 buffer when x is a half type, unrounded: a half type
# computes in float, and x may also be read inline elsewhere, where it is not rounded either.
# A copy rounded to the half type made `(v2 - v1) / 0`, with v2 a scatter_add into v1 that
# left an element untouched, -inf where eager gives NaN (found by the fuzzer). The result reads
# the buffer as the half type, unrounded like any half-typed value; a store rounds it.
# How each scatter rounds when it accumulates into a half type, as eager does: ScatterAdd adds
# in float and rounds once at the end, as eager's scatter_add (rounding every add to bfloat16
# gave 3-4x eager's error with 17 adds per element: found by the fuzzer, gather's backward);
# IndexPut with accumulate rounds every add to the half type in index order, as eager's
# index_put_(accumulate=True) and index_add with alpha != 1 do (adding in float differed from
# eager by up to 3.5 in bfloat16: found by the fuzzer, index_add(alpha=2)).
def scatter_target(g, x, fake):
    """A fresh copy of x (zeros if x is None) to scatter into, in the result's layout where
    that is dense (a channels-last max pool's gradient), in float32 if x is a half type;
    written in memory order (zeroing a channels-last gradient plane by plane stored with the
    channel stride: 0.10 ms for 16x16x32x32)."""
    dtype = torch.float32 if fake.dtype in HALF_TYPES else fake.dtype
    T = compute_ctype(dtype)

    def load(k, idx):
        return Const(0, T) if x is None else cast_value(k, x.load(k, idx), x.dtype, dtype)

    return g.realize(Pointwise(dtype, shape_of(fake), load), dense_strides(fake))


def scatter_result(out, fake):
    """The scattered buffer as the node's value: a half type read from its float32 buffer."""
    if out.dtype == fake.dtype:
        return out
    return Pointwise(fake.dtype, list(out.sizes), lambda k, idx: out.load(k, idx))


def scatter_store(k, out, index, value, accumulate, round_to=None):
    """Store `value` at `index`, or add it to what is there, rounding the sum to the half
    type `round_to` if given."""
    if accumulate:
        value = k.op("Add", compute_ctype(out.dtype), out.load(k, index), value)
        if round_to is not None:
            value = cast_value(k, value, out.dtype, round_to)
        k.forget_values()  # the read above must not be reused after the write
    out.store(k, index, value)


@lowering("ScatterSrc", "ScatterAdd")
def scatter(g, node, x, dim, index, src):
    x, index_value, src = g.value(x), g.value(index), g.value(src)
    accumulate = node.target.name == "ScatterAdd"
    fake = node.meta["val"]
    if _one_per_row(x, index_value, dim) and not (accumulate and fake.dtype in HALF_TYPES):
        return _picked_per_row(node.target.name, x, dim, index_value, src, fake.dtype)
    out = scatter_target(g, x, fake)
    dim, size = _indexed_dim(out.sizes, dim)

    def body(k, idx):
        position = k.computed_index(
            index_value.load(k, idx), size, f"{node.target.name} index for dim {dim}"
        )
        value = cast_value(k, src.load(k, idx), src.dtype, out.dtype)
        scatter_store(k, out, _along(idx, dim, position), value, accumulate)

    g.pointwise_kernel(index_value.sizes, body)
    return scatter_result(out, node.meta["val"])


def _one_per_row(x, index, dim) -> bool:
    """Whether `index` picks one position along `dim` for every row of `x` (of size 1 along
    `dim`, of x's size along every other dim): then each element of the result depends on
    one index value only."""
    if not x.sizes or len(index.sizes) != len(x.sizes):
        return False
    dim, _ = _indexed_dim(x.sizes, dim)
    return all(
        (i == 1) if d == dim else (i == size)
        for d, (i, size) in enumerate(zip(index.sizes, x.sizes))
    )


def _picked_per_row(name, x, dim, index, src, dtype):
    """A scatter of one element per row as a lazy value: x where the row's index does not
    pick the element, else src's element (ScatterSrc) or x's plus src's (ScatterAdd; not in a
    half type, whose add eager rounds in that type). A loss's backward scatters -1 into zeros
    at each row's target (cross entropy): this fuses into the kernel reading it, without a
    zeroed buffer and a scatter kernel (0.12 ms of a profiled LLaMA training step's 6.5 ms).
    End to end about even so far: the fused kernel then writes new memory, where it wrote
    into the dead scattered buffer (a cross entropy's forward and backward: 0.134-0.136 ms,
    0.13 with the scatter)."""
    dim, size = _indexed_dim(x.sizes, dim)
    T = compute_ctype(dtype)

    def value(k, idx):
        row = _along(idx, dim, 0)
        position = k.computed_index(index.load(k, row), size, f"{name} index for dim {dim}")
        picked = k.op("Eq", "bool", k.index(position), k.index(idx[dim]))
        old = cast_value(k, x.load(k, idx), x.dtype, dtype)
        new = cast_value(k, src.load(k, row), src.dtype, dtype)
        if name == "ScatterAdd":
            new = k.op("Add", T, old, new)
        return k.op("Where", T, picked, new, old)

    return Pointwise(dtype, list(x.sizes), value)


@lowering("IndexPut")
def index_put(g, node, x, indices, values, accumulate=False):
    x, values = g.value(x), g.value(values)
    indices = [None if t is None else g.value(t) for t in indices]
    out = scatter_target(g, x, node.meta["val"])
    round_to = node.meta["val"].dtype if out.dtype != node.meta["val"].dtype else None
    with g.ctx.fake_mode:
        fake_indices = [None if t is None else t.meta["val"] for t in node.args[1]]
        indexed = torch.ops.aten.index.Tensor(node.args[0].meta["val"], fake_indices)
    sizes = shape_of(indexed)

    def body(k, idx):
        value = load_broadcast(k, values, idx, out.dtype, sizes)
        scatter_store(
            k, out, _index_source(k, out, indices, idx, sizes), value, accumulate, round_to
        )

    g.pointwise_kernel(sizes, body)
    return scatter_result(out, node.meta["val"])


@lowering("AsStridedScatter")
def as_strided_scatter(g, node, x, src, size, stride, offset):
    """A fresh copy of x, contiguous from offset 0 as eager lays it out (the conversion has
    checked), with src stored through the view's strides: each element once, inside it."""
    x, src = g.value(x), g.value(src)
    out = scatter_target(g, x, node.meta["val"])
    strides = [to_sympy(s) for s in stride]
    view = Buffer(out.base, out.dtype, list(src.sizes), strides, out.offset + to_sympy(offset))

    def body(k, idx):
        view.store(k, idx, cast_value(k, src.load(k, idx), src.dtype, out.dtype))

    g.pointwise_kernel(src.sizes, body)
    return scatter_result(out, node.meta["val"])


@lowering("CopyInto")
def copy_into(g, node, dst, src):
    # Every lazy value still to be read is computed first, src included (this node is one of
    # its readers): x[1:] = x[:-1] * 2 must not read elements it has already overwritten. A
    # src that is a plain view overlapping dst is refused by eager's copy_.
    g.realize_live_values()
    dst, src = g.value(dst), g.value(src)
    g.pointwise_kernel(
        dst.sizes,
        lambda k, idx: dst.store(k, idx, load_broadcast(k, src, idx, dst.dtype, dst.sizes)),
        fuse=False,  # the call just added is the copy (offer_copy_elision), nothing else
        split=True,
    )
    if _elidable_copy(g, dst, src):
        g.wrapper.offer_copy_elision(dst.base, src.base)
    g.copy_targets.discard(dst.base)  # later kernels read its new value: restrict holds
    return dst


def _elidable_copy(g, dst, src) -> bool:
    """Whether a copy of `src` into `dst` copies a buffer this graph allocated into a whole
    graph input (codegen's copy_targets) of its dtype and layout, element for element."""
    w = g.wrapper

    def whole(buffer):  # the buffer views its variable's memory from offset 0, as laid out
        layout = w.layouts.get(buffer.base)
        return (
            buffer.offset == 0
            and layout is not None
            and (tuple(layout[0]), tuple(layout[1])) == (tuple(buffer.sizes), tuple(buffer.strides))
        )

    return (
        isinstance(src, Buffer)
        and dst.base in g.copy_targets
        and src.base in w.allocations
        and src.base in w.private
        and dst.dtype == src.dtype
        and whole(dst)
        and whole(src)
        and (tuple(dst.sizes), tuple(dst.strides)) == (tuple(src.sizes), tuple(src.strides))
        and is_dense(dst.sizes, dst.strides)
    )
