"""What lowerings compute: realized `Buffer`s (memory + strides) and lazy `Pointwise` values,
and the conversions and broadcasts of their elements.

A lazy value is a function from an output index to a loop IR value; consumers inline it,
which is how pointwise chains and reductions with their producers fuse into one loop nest.
Views of either are in views.py.
"""

from dataclasses import dataclass
from collections.abc import Callable

import sympy

from dicp.api import TensorView, same_size

from .ctypes_map import compute_ctype, storage_ctype
from .loop_ir import Const
from .sym import contiguous_strides


@dataclass
class Buffer(TensorView):
    """Memory a kernel indexes: a wrapper variable's data pointer, with sizes and strides."""

    # A copy of the same values in another layout that kernels emitted from now on read
    # instead (CppCodegen.copy_to_walk); None: this buffer itself.
    read_from = None

    def load(self, k, index):
        return k.load(self if self.read_from is None else self.read_from, index)

    def store(self, k, index, value):
        k.store(self, index, value)

    def is_contiguous(self):
        return all(
            size == 1 or sympy.expand(stride - expected) == 0
            for size, stride, expected in zip(
                self.sizes, self.strides, contiguous_strides(self.sizes)
            )
        )


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
    a `column_sum` (lowering_reduce.ColumnSum: a sum over rows of contiguous columns, which a
    phase per column would read with the row stride) is never computed in another kernel: it
    gets a kernel of its own, shared with the column sums over the same rows."""

    emit_phase: Callable = None
    column_sum: object = None
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
    if to_dtype != from_dtype and target == "float" and storage_ctype(to_dtype) != target:
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


def may_be_either(size, out_size):
    """Whether an operand's dim of `size` may be 1 or `out_size` at run time, for all the
    compiler knows: a symbolic size that is neither expression (a slice's (s0 + 2) // 3 that
    dynamo guards to be 1). Broadcasting asks it to be one of the two."""
    return isinstance(size, sympy.Basic) and not size.is_Integer and not same_size(size, out_size)


def broadcast_position(size, position, out_size):
    """The position along an operand's dim of `size` for the output's `position` along a dim
    of `out_size`: min(position, size - 1) where the size may be either (fuzzer, seed 2722:
    maximum(x1[::3], x0) read past x1's end)."""
    if size == 1:
        return 0
    return sympy.Min(position, size - 1) if may_be_either(size, out_size) else position


def load_broadcast(k, value, index, dtype, out_sizes):
    """`value` (IR value, Python number or sympy size) at `index`, broadcast and cast: an IR
    atom of `dtype`'s compute type. `out_sizes`: the sizes `index` runs over."""
    ctype = compute_ctype(dtype)
    if isinstance(value, (Buffer, Pointwise)):
        rank = len(value.sizes)
        tail = index[len(index) - rank :] if rank else []
        out_tail = out_sizes[len(out_sizes) - rank :] if rank else []
        local = [
            broadcast_position(size, i, out_size)
            for size, i, out_size in zip(value.sizes, tail, out_tail)
        ]
        return cast_value(k, value.load(k, local), value.dtype, dtype)
    if isinstance(value, sympy.Basic):
        return k.op("StaticCast", ctype, k.index(value))
    return Const(value, ctype)
