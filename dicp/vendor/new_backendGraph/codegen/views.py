"""Views of kernel values: a Buffer's view is new strides and an offset, never a copy; a lazy
value's is a lazy value reading it at another index."""

import sympy

from .sym import IDiv, IMod, contiguous_strides, flat_index, product, same_layout, unflatten
from .values import Buffer, Pointwise, broadcast_position, may_be_either


def permute(x, dims):
    if isinstance(x, Buffer):
        return Buffer(
            x.base, x.dtype, [x.sizes[d] for d in dims], [x.strides[d] for d in dims], x.offset
        )
    inverse = [dims.index(d) for d in range(len(dims))]
    return Pointwise(
        x.dtype,
        [x.sizes[d] for d in dims],
        lambda k, idx: x.load(k, [idx[inverse[d]] for d in range(len(dims))]),
    )


def expand(x, sizes):
    lead = len(sizes) - len(x.sizes)
    either = any(may_be_either(s, sizes[lead + j]) for j, s in enumerate(x.sizes))
    if isinstance(x, Buffer) and not either:  # a view: stride 0 where x has size 1
        strides = [0] * lead + [0 if s == 1 else st for s, st in zip(x.sizes, x.strides)]
        return Buffer(x.base, x.dtype, list(sizes), strides, x.offset)
    # a dim that may be either has no one stride (copy_ of x1[::3] into a tensor of dynamic
    # size read past x1's end, as seed 2722's maximum did)
    return Pointwise(
        x.dtype,
        list(sizes),
        lambda k, idx: x.load(
            k,
            [broadcast_position(s, idx[lead + j], sizes[lead + j]) for j, s in enumerate(x.sizes)],
        ),
    )


def slice_view(x, dim, start, step, sizes):
    if isinstance(x, Buffer):
        strides = list(x.strides)
        strides[dim] = x.strides[dim] * step
        return Buffer(x.base, x.dtype, list(sizes), strides, x.offset + start * x.strides[dim])
    return Pointwise(
        x.dtype,
        list(sizes),
        lambda k, idx: x.load(k, idx[:dim] + [start + idx[dim] * step] + idx[dim + 1 :]),
    )


def unfold_view(x, dim, size, step, sizes):
    """Tensor.unfold: windows of `size` along `dim`, `step` apart, each window's elements on a
    new last dim. A buffer's view has strides that overlap where step < size."""
    if isinstance(x, Buffer):
        strides = list(x.strides)
        strides[dim] = x.strides[dim] * step
        return Buffer(x.base, x.dtype, list(sizes), strides + [x.strides[dim]], x.offset)
    return Pointwise(
        x.dtype,
        list(sizes),
        lambda k, idx: x.load(k, idx[:dim] + [idx[dim] * step + idx[-1]] + idx[dim + 1 : -1]),
    )


def select_view(x, dim, index):
    if isinstance(x, Buffer):
        return Buffer(
            x.base,
            x.dtype,
            x.sizes[:dim] + x.sizes[dim + 1 :],
            x.strides[:dim] + x.strides[dim + 1 :],
            x.offset + index * x.strides[dim],
        )
    return Pointwise(
        x.dtype,
        x.sizes[:dim] + x.sizes[dim + 1 :],
        lambda k, idx: x.load(k, idx[:dim] + [index] + idx[dim:]),
    )


def reshape(x, sizes):
    if isinstance(x, Buffer) and x.is_contiguous():
        return Buffer(x.base, x.dtype, list(sizes), contiguous_strides(sizes), x.offset)
    if isinstance(x, Buffer):
        strides = _view_strides(x, sizes)
        if strides is not None:
            return Buffer(x.base, x.dtype, list(sizes), strides, x.offset)
    blocks = _reshape_blocks(x.sizes, list(sizes)) or [(list(x.sizes), list(sizes))]
    return Pointwise(x.dtype, list(sizes), lambda k, idx: x.load(k, _source_index(blocks, idx)))


def _reshape_blocks(old, new):
    """Runs of old and new sizes with equal products, paired in order, so each run maps on
    its own: a dim kept as is needs no index arithmetic. None when runs cannot be paired."""
    blocks, i, j = [], 0, 0
    while i < len(old) and j < len(new):
        old_run, new_run = [old[i]], [new[j]]
        i, j = i + 1, j + 1
        while sympy.expand(product(old_run) - product(new_run)) != 0:
            smaller = _smaller(product(old_run), product(new_run))
            if smaller is None:
                return None
            if (smaller == "old" or j >= len(new)) and i < len(old):
                old_run, i = old_run + [old[i]], i + 1
            elif j < len(new):
                new_run, j = new_run + [new[j]], j + 1
            else:
                return None
        blocks.append((old_run, new_run))
    blocks += [([size], []) for size in old[i:]] + [([], [size]) for size in new[j:]]
    return blocks


def _smaller(a, b):
    if a.is_number and b.is_number:
        return "old" if a < b else "new"
    ratio = sympy.simplify(b / a)
    if ratio.is_number:
        return "old" if ratio > 1 else "new"
    return None


def _source_index(blocks, new_index):
    """The old index that `new_index` of the reshaped value reads, block by block."""
    old_index, position = [], 0
    for old_sizes, new_sizes in blocks:
        run = new_index[position : position + len(new_sizes)]
        position += len(new_sizes)
        flat = flat_index(run, contiguous_strides(new_sizes)) if run else sympy.Integer(0)
        old_index += unflatten(flat, old_sizes) if len(old_sizes) > 1 else [flat] * len(old_sizes)
    return old_index


def _view_strides(x, sizes):
    """Strides for viewing a non-contiguous buffer as `sizes` when only size-1 dims change."""
    kept = [(s, st) for s, st in zip(x.sizes, x.strides) if s != 1]
    if [s for s, _ in kept] != [s for s in sizes if s != 1]:
        return None
    strides, it = [], iter(st for _, st in kept)
    for size in sizes:
        strides.append(1 if size == 1 else next(it))
    return strides


def as_strided(x, sizes, strides, offset, layout):
    """`x` reinterpreted as eager does it: `strides` and `offset` address the storage of x,
    whose eager layout is `layout` = (strides, storage offset). A buffer stored in that layout
    is viewed in place; any other value (lazy, or realized in another layout) is read through
    the inverse of that layout, which the conversion has checked is dense."""
    source_strides, source_offset = layout
    relative = offset - source_offset
    if isinstance(x, Buffer) and same_layout(x.sizes, x.strides, source_strides):
        return Buffer(x.base, x.dtype, list(sizes), list(strides), x.offset + relative)

    def load(k, index):
        position = relative + flat_index(index, strides)
        return x.load(
            k, [IMod(IDiv(position, stride), size) for size, stride in zip(x.sizes, source_strides)]
        )

    return Pointwise(x.dtype, list(sizes), load)
