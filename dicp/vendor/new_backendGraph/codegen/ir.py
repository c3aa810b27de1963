"""Kernel IR values: realized `Buffer`s (memory + strides) and lazy `Pointwise` values.

A lazy value is a function from an output index to a loop IR value; consumers inline it,
which is how pointwise chains and reductions with their producers fuse into one loop nest.
Views of buffers are new strides and offsets, never copies.
"""
from dataclasses import dataclass
from collections.abc import Callable

import sympy

from dicp.api import TensorView, same_size

from .ctypes_map import compute_ctype, storage_ctype
from .loop_ir import Const
from .sym import (IDiv, IMod, contiguous_strides, flat_index, product, same_layout,
                  unflatten)


@dataclass
class Buffer(TensorView):
    """Memory a kernel indexes: a wrapper variable's data pointer, with sizes and strides."""

    def load(self, k, index):
        return k.load(self, index)

    def store(self, k, index, value):
        k.store(self, index, value)

    def is_contiguous(self):
        return all(size == 1 or sympy.expand(stride - expected) == 0 for size, stride, expected
                   in zip(self.sizes, self.strides, contiguous_strides(self.sizes)))


@dataclass
class Pointwise:
    dtype: object
    sizes: list
    fn: Callable  # fn(kernel, index) -> IR atom (loop_ir) of compute_ctype(dtype)

    def load(self, k, index):
        return k.lazy(self, index, lambda: self.fn(k, list(index)))


@dataclass
class LazyReduction(Pointwise):
    """A reduction not computed yet. A kernel that reads it at an index of its own outer loops
    computes it there, as a phase before the code that reads it (KernelBuilder.fused_reduction):
    softmax's max and sum and a norm's mean and variance run in the loop nest of their
    consumer, on data still in cache, and never go to memory. Read any other way it is first
    realized (`realized`: its buffer) by a kernel of its own.

    `emit_phase(k, kept_index)` emits the phase and returns the IR variable of the result, in
    the compute type of `dtype`, rounded as if it had been stored; `kept` are the positions of
    `sizes` that index the kept dims (keepdim's size-1 dims are the others). A reduction with
    an `emit_kernel(g, out)` is never computed in another kernel: that emits its own kernel
    storing it in `out` (a sum over rows of contiguous columns, which a phase per column
    would read with the row stride)."""
    emit_phase: Callable = None
    emit_kernel: Callable = None
    kept: tuple = ()
    realized: Buffer = None
    computed_in_kernel: bool = False  # a kernel emitted so far computes it as a phase

    def load(self, k, index):
        if self.realized is not None:
            return self.realized.load(k, index)
        return k.fused_reduction(self, [index[d] for d in self.kept])

    def kept_sizes(self):
        return [self.sizes[d] for d in self.kept]


def cast_value(k, var, from_dtype, to_dtype):
    """IR atom `var` of `from_dtype` as a value of `to_dtype`'s compute type."""
    source, target = compute_ctype(from_dtype), compute_ctype(to_dtype)
    if to_dtype != from_dtype and storage_ctype(to_dtype) != target:
        # a half type computes in float, but converting to it rounds, as eager does, even
        # where the value stays in a register: x.half().float() - x is not 0
        # (through float from any type, as c10's conversions go)
        var = k.op("RoundTo", target, var, param=storage_ctype(to_dtype))
        source = target
    if source == target:
        return var
    if target == "bool":
        return k.op("ToBool", "bool", var)
    if source in ("float", "double") and target not in ("float", "double"):
        return k.op("FloatToInt", target, var)
    return k.op("Cast", target, var)  # an integer 0 is +0, not trunc's -0


def _may_be_either(size, out_size):
    """Whether an operand's dim of `size` may be 1 or `out_size` at run time, for all the
    compiler knows: a symbolic size that is neither expression (a slice's (s0 + 2) // 3 that
    dynamo guards to be 1). Broadcasting asks it to be one of the two."""
    return isinstance(size, sympy.Basic) and not size.is_Integer \
        and not same_size(size, out_size)


def _broadcast_position(size, position, out_size):
    """The position along an operand's dim of `size` for the output's `position` along a dim
    of `out_size`: min(position, size - 1) where the size may be either (fuzzer, seed 2722:
    maximum(x1[::3], x0) read past x1's end)."""
    if size == 1:
        return 0
    return sympy.Min(position, size - 1) if _may_be_either(size, out_size) else position


def load_broadcast(k, value, index, dtype, out_sizes):
    """`value` (IR value, Python number or sympy size) at `index`, broadcast and cast: an IR
    atom of `dtype`'s compute type. `out_sizes`: the sizes `index` runs over."""
    ctype = compute_ctype(dtype)
    if isinstance(value, (Buffer, Pointwise)):
        rank = len(value.sizes)
        tail = index[len(index) - rank:] if rank else []
        out_tail = out_sizes[len(out_sizes) - rank:] if rank else []
        local = [_broadcast_position(size, i, out_size)
                 for size, i, out_size in zip(value.sizes, tail, out_tail)]
        return cast_value(k, value.load(k, local), value.dtype, dtype)
    if isinstance(value, sympy.Basic):
        return k.op("StaticCast", ctype, k.index(value))
    return Const(value, ctype)


# ---- views -------------------------------------------------------------------------------

def permute(x, dims):
    if isinstance(x, Buffer):
        return Buffer(x.base, x.dtype, [x.sizes[d] for d in dims], [x.strides[d] for d in dims],
                      x.offset)
    inverse = [dims.index(d) for d in range(len(dims))]
    return Pointwise(x.dtype, [x.sizes[d] for d in dims],
                     lambda k, idx: x.load(k, [idx[inverse[d]] for d in range(len(dims))]))


def expand(x, sizes):
    lead = len(sizes) - len(x.sizes)
    either = any(_may_be_either(s, sizes[lead + j]) for j, s in enumerate(x.sizes))
    if isinstance(x, Buffer) and not either:  # a view: stride 0 where x has size 1
        strides = [0] * lead + [0 if s == 1 else st for s, st in zip(x.sizes, x.strides)]
        return Buffer(x.base, x.dtype, list(sizes), strides, x.offset)
    # a dim that may be either has no one stride (copy_ of x1[::3] into a tensor of dynamic
    # size read past x1's end, as seed 2722's maximum did)
    return Pointwise(x.dtype, list(sizes), lambda k, idx: x.load(k, [
        _broadcast_position(s, idx[lead + j], sizes[lead + j]) for j, s in enumerate(x.sizes)]))


def slice_view(x, dim, start, step, sizes):
    if isinstance(x, Buffer):
        strides = list(x.strides)
        strides[dim] = x.strides[dim] * step
        return Buffer(x.base, x.dtype, list(sizes), strides, x.offset + start * x.strides[dim])
    return Pointwise(x.dtype, list(sizes), lambda k, idx: x.load(
        k, idx[:dim] + [start + idx[dim] * step] + idx[dim + 1:]))


def unfold_view(x, dim, size, step, sizes):
    """Tensor.unfold: windows of `size` along `dim`, `step` apart, each window's elements on a
    new last dim. A buffer's view has strides that overlap where step < size."""
    if isinstance(x, Buffer):
        strides = list(x.strides)
        strides[dim] = x.strides[dim] * step
        return Buffer(x.base, x.dtype, list(sizes), strides + [x.strides[dim]], x.offset)
    return Pointwise(x.dtype, list(sizes), lambda k, idx: x.load(
        k, idx[:dim] + [idx[dim] * step + idx[-1]] + idx[dim + 1:-1]))


def select_view(x, dim, index):
    if isinstance(x, Buffer):
        return Buffer(x.base, x.dtype, x.sizes[:dim] + x.sizes[dim + 1:],
                      x.strides[:dim] + x.strides[dim + 1:], x.offset + index * x.strides[dim])
    return Pointwise(x.dtype, x.sizes[:dim] + x.sizes[dim + 1:],
                     lambda k, idx: x.load(k, idx[:dim] + [index] + idx[dim:]))


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
        run = new_index[position:position + len(new_sizes)]
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
        return x.load(k, [IMod(IDiv(position, stride), size)
                          for size, stride in zip(x.sizes, source_strides)])
    return Pointwise(x.dtype, list(sizes), load)
