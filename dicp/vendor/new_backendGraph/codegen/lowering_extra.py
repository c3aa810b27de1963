"""Lowerings of the reduction, layout, indexing, scan and in-place families."""
import sympy
import torch

from dicp.api import shape_of, strides_of, to_sympy

from . import ir
from .ctypes_map import compute_ctype, storage_ctype
from .ir import Buffer, Pointwise, cast_value, load_broadcast
from .loop_ir import Assign, Chunk, Const, Declare, Element, If, Loop, Op, Var
from .lowering import HALF_TYPES, lowering
from .sym import (IDiv, IMod, clamp_bound, contiguous_strides, flat_index, is_dense,
                  loop_index, same_layout, wrap_index)

# ---- reductions ----------------------------------------------------------------------

# name -> (the accumulator's first value, its update by a loaded value: a loop IR op of the
# accumulator's type)
REDUCTIONS = {
    "ReduceSum": (0, "Add"), "ReduceProd": (1, "Mul"),
    "ReduceMax": (-float("inf"), "Maximum"), "ReduceMin": (float("inf"), "Minimum"),
    "ReduceAny": (False, "LogicalOr"), "ReduceAll": (True, "LogicalAnd"),
}


# Reductions whose order may change for vectorization: `omp simd` reduction clauses on the
# accumulator. Max and min go through _extremum_phase, which keeps NaN and signed zeros.
SIMD_REDUCTIONS = {"ReduceSum": "+", "ReduceProd": "*"}


def _accumulator_ctype(name, dtype):
    if name in ("ReduceAny", "ReduceAll"):
        return "bool"
    if name in ("ReduceSum", "ReduceProd") and dtype.is_floating_point:
        return "double"  # accumulate float sums in double: closer to eager's cascade sum
    return compute_ctype(dtype)


def _split_index(sizes, dims, outer, inner):
    """Full input index from output loop vars (kept dims) and reduction vars."""
    index, o, r = [], iter(outer), iter(inner)
    for d in range(len(sizes)):
        index.append(next(r) if d in dims else next(o))
    return index


def reduction(g, node, x, dims, keepdim, dtype=None):
    """A LazyReduction: computed in the kernel of its consumer, or realized on its own."""
    name = node.target.name
    x, out_val = g.value(x), node.meta["val"]
    dims = sorted(d % max(len(x.sizes), 1) for d in dims) if x.sizes else []
    extremum = name in EXTREMA and out_val.dtype != torch.bool
    emit = _extremum_phase if extremum else _accumulating_phase
    sizes = shape_of(out_val)
    kept = [d for d in range(len(sizes)) if not (keepdim and d in dims)]
    columns = name == "ReduceSum" and dims and x.sizes[-1] != 1 and len(x.sizes) - 1 not in dims
    return ir.LazyReduction(
        out_val.dtype, sizes, None, kept=tuple(kept),
        emit_phase=lambda k, kept_index: emit(k, name, x, dims, kept_index, out_val.dtype),
        emit_kernel=(lambda g, out: _column_sum(g, x, dims, out)) if columns else None)


for _name in REDUCTIONS:
    lowering(_name)(reduction)


def _reduced_value(k, acc, dtype):
    """The accumulator as the reduction's result: rounded to `dtype` as a store would."""
    return k.op("StoreRound", compute_ctype(dtype), acc, param=storage_ctype(dtype))


def _accumulating_phase(k, name, x, dims, kept_index, dtype):
    acc_t = _accumulator_ctype(name, dtype)
    acc = k.new_var(acc_t, "acc")
    init, update = REDUCTIONS[name]
    chunk_accs = []  # the float chunk accumulator, once the body takes a chunked sum

    def pre(k):
        k.add(Declare(acc, Const(init, acc_t)))

    def body(k, inner):
        value = x.load(k, _split_index(x.sizes, dims, kept_index, inner))
        if name == "ReduceSum" and len(dims) == 1 and acc_t == "double" \
                and value.type == compute_ctype(dtype) == "float" and _never_negative(k, value):
            if not chunk_accs:
                chunk_accs.append(k.new_var("float", "chunk_acc"))
            k.add(Assign(chunk_accs[0], Op("Add", "float", (chunk_accs[0], value))))
            return
        value = k.op("StaticCast", acc_t, value)
        k.add(Assign(acc, Op(update, acc_t, (acc, value))))

    def chunk():
        if not chunk_accs:
            return None
        chunk_acc = chunk_accs[0]
        add = Op("Add", acc_t, (acc, Op("StaticCast", acc_t, (chunk_acc,))))
        return (Chunk(SUM_CHUNK, (Declare(chunk_acc, Const(0, "float")),),
                      (Assign(acc, add),)), f"+:{chunk_acc.name}")

    simd = SIMD_REDUCTIONS.get(name)
    return k.phase([(0, x.sizes[d]) for d in dims], pre=pre, body=body,
                   post=lambda k, inner: _reduced_value(k, acc, dtype),
                   simd=simd and f"{simd}:{acc.name}", chunk=chunk)


# A float sum of values that cannot be negative (softmax's exponentials, a norm's squares)
# adds chunks of SUM_CHUNK elements in float, at the full vector width (16 elements per
# AVX-512 lane), and the chunks' totals in double. With no cancellation a chunk's relative
# error is a few float roundings, so the sum stays within about 2 ulp of exact, as eager's
# cascade sum does (measured over lengths 1 to 4,097: at most 1.6 ulp, eager 1.6 ulp; a double
# accumulator is within 0.5). The double accumulator halves the vector width: a fifth of
# softmax+GELU's time, a sixth of layer norm's. Chunks of 64 gained nothing (a horizontal add
# per chunk). Sums of values of either sign keep the double accumulator: float chunks there
# were less accurate than eager's cascade sum (bd25365).
SUM_CHUNK = 256
NEVER_NEGATIVE_OPS = {"Exp", "Abs", "Sqrt", "Sigmoid", "Relu"}


def _even_integer(value):
    return isinstance(value, Const) and isinstance(value.value, (int, float)) \
        and float(value.value).is_integer() and int(value.value) % 2 == 0


def _never_negative(k, value, depth=0):
    """Whether IR value `value` is >= 0 (or NaN) by construction."""
    expr = k.definition(value) if isinstance(value, Var) else value
    if isinstance(expr, Const):
        return isinstance(expr.value, (int, float)) and expr.value >= 0
    if not isinstance(expr, Op) or depth > 4:
        return False
    if expr.name in NEVER_NEGATIVE_OPS:
        return True
    if expr.name == "Mul" and expr.args[0] == expr.args[1]:
        return True
    if expr.name == "Pow" and _even_integer(expr.args[1]):  # x ** 2 of a half type
        return True
    if expr.name in ("Cast", "StaticCast", "RoundTo") and expr.type in ("float", "double"):
        return _never_negative(k, expr.args[0], depth + 1)
    return False


# Columns of a sum over rows (x.sum(0) of a [rows, columns] matrix: bias gradients) summed
# by one kernel iteration: 8 AVX-512 vectors of double accumulators.
COLUMN_BLOCK = 64


def _column_sum(g, x, dims, out):
    """A sum over dims that leave the innermost one, with its output `out` (kept dims only).
    One phase per output element would read its column with the row stride (x.sum(0) of a
    4096 x 256 matrix: 7.5 ms against eager's 36 us). Instead each outer iteration sums a
    block of COLUMN_BLOCK adjacent columns row after row into an array of accumulators, then
    stores them: every row's block is read contiguously and once."""
    *leading, columns = out.sizes
    blocks = IDiv(columns + COLUMN_BLOCK - 1, COLUMN_BLOCK)
    block = loop_index(len(leading) + 1)[-1]
    width = sympy.Min(COLUMN_BLOCK, columns - COLUMN_BLOCK * block)
    acc_t = _accumulator_ctype("ReduceSum", out.dtype)
    acc = Var("column_acc", acc_t, (COLUMN_BLOCK,))

    def kept_index(outer, column):
        return list(outer[:-1]) + [COLUMN_BLOCK * outer[-1] + column]

    def clear(k, outer):
        k.add(Declare(acc, "zeros"))

    def accumulate(k, outer, inner):
        *rows, column = inner
        value = x.load(k, _split_index(x.sizes, dims, kept_index(outer, column), rows))
        value = k.op("StaticCast", acc_t, value)
        element = Element(acc, (k.index(column),))
        k.add(Assign(element, Op("Add", acc_t, (element, value))))

    def store(k, outer, inner):
        out.store(k, kept_index(outer, inner[0]), Element(acc, (k.index(inner[0]),)))

    rows = [(0, x.sizes[d]) for d in dims]
    g.phased_kernel(leading + [blocks], [
        dict(pre=clear, inner=rows + [(0, width)], body=accumulate, post=None, simd=""),
        dict(pre=None, inner=[(0, width)], body=store, post=None, simd="")])


# Max and min as a plain compare-and-select per element, which g++ vectorizes under
# `omp simd reduction(max|min:acc)`. That reorders the elements, so what the reorder could
# change is restored after the loop: a NaN anywhere makes the result NaN (a flag reduced with
# |), and a zero result takes the sign of the first zero, as eager keeps the first of equal
# elements (a second pass, only when the extremum is zero).
EXTREMA = {"ReduceMax": ("max", ">"), "ReduceMin": ("min", "<")}


def _extremum_phase(k, name, x, dims, kept_index, dtype):
    clause, better = EXTREMA[name]
    acc_t = compute_ctype(dtype)
    acc, nan_seen = k.new_var(acc_t, "acc"), k.new_var("int", "nan_seen")
    floating = acc_t in ("float", "double")

    def element(k, inner):
        value = x.load(k, _split_index(x.sizes, dims, kept_index, inner))
        return k.op("StaticCast", acc_t, value)

    def pre(k):
        k.add(Declare(acc, Const(-float("inf") if clause == "max" else float("inf"), acc_t)))
        if floating:
            k.add(Declare(nan_seen, Const(0, "int")))

    def body(k, inner):
        value = element(k, inner)
        k.add(Assign(acc, Op("Better", acc_t, (value, acc), better)))
        if floating:
            k.add(Assign(nan_seen, Op("IsNanCompare", "bool", (value,)), combine="|"))

    def post(k, inner):
        if floating:
            k.add(If(nan_seen, (Assign(acc, Const(float("nan"), acc_t)),)))
            _first_zero_sign(k, acc, inner, bounds, lambda idx: element(k, idx))
        return _reduced_value(k, acc, dtype)

    bounds = [(0, x.sizes[d]) for d in dims]
    clauses = f"{clause}:{acc.name}" + (f" |:{nan_seen.name}" if floating else "")
    return k.phase(bounds, pre=pre, body=body, post=post, simd=clauses)


def _first_zero_sign(k, acc, variables, bounds, element):
    """When acc is zero, the first element equal to zero (+0 or -0) becomes acc."""
    zero = Const(0, acc.type)

    def search():
        found = Var("found", "bool")  # scoped to the search: one name serves every kernel
        k.add(Declare(found, Const(False, "bool")))
        value, statements = k.scoped(lambda: element(variables))
        test = Op("Eq", "bool", (value, zero))
        loop = (*statements, If(test, (Assign(acc, value), Assign(found, Const(True, "bool")))))
        for var, (lo, hi) in reversed(list(zip(variables, bounds))):
            loop = (Loop(Var(var.name, "int64_t"), k.index(lo), k.index(hi), loop, found),)
        k.blocks[-1].statements.extend(loop)

    _, statements = k.scoped(search)
    k.add(If(Op("Eq", "bool", (acc, zero)), statements))


def _new_buffer(g, fake, strides=None, dtype=None):
    """A fresh buffer shaped like `fake` (of its dtype unless `dtype` is given): contiguous
    unless `strides` are given."""
    sizes, dtype = shape_of(fake), dtype or fake.dtype
    strides = strides if strides is not None else contiguous_strides(sizes)
    return Buffer(g.wrapper.allocate(dtype, sizes, strides), dtype, sizes, strides)


@lowering("ArgMax", "ArgMin")
def arg_reduction(g, node, x, dim=None, keepdim=False):
    x, out_val = g.value(x), node.meta["val"]
    rank = len(x.sizes)
    dims = list(range(rank)) if dim is None else ([dim % rank] if rank else [])
    kept = [s for d, s in enumerate(x.sizes) if d not in dims]
    better = ">" if node.target.name == "ArgMax" else "<"
    T = compute_ctype(x.dtype)
    out = _new_buffer(g, out_val)
    out_flat = Buffer(out.base, out.dtype, kept, contiguous_strides(kept))
    reduced_sizes = [x.sizes[d] for d in dims]
    best, best_index = Var("best", T), Var("best_index", "int64_t")

    def body(k, outer, inner):
        v = x.load(k, _split_index(x.sizes, dims, outer, inner))
        position = k.index(flat_index(inner, contiguous_strides(reduced_sizes)))
        wins = Op("ArgBetter", "bool", (v, best, best_index), better)
        k.add(If(wins, (Assign(best, v), Assign(best_index, position))))

    def pre(k, outer):
        k.add(Declare(best, Const(0, T)))
        k.add(Declare(best_index, Const(-1, "int64_t")))

    g.kernel(kept, pre=pre, inner=[(0, s) for s in reduced_sizes], body=body,
             post=lambda k, o: out_flat.store(k, o, best_index))
    return out


# scan -> the reduction whose accumulator (double for floats, as eager's CPU scans) it keeps
SCANS = {"CumSum": "ReduceSum", "CumProd": "ReduceProd"}


@lowering(*SCANS)
def scan(g, node, x, dim, dtype=None):
    """Each element the running sum (product) of the elements up to it along `dim`, in order:
    one serial inner loop per line."""
    x, out_val = g.value(x), node.meta["val"]
    dim = dim % max(len(x.sizes), 1)
    out = _new_buffer(g, out_val)
    reduction = SCANS[node.target.name]
    acc = Var("acc", _accumulator_ctype(reduction, out_val.dtype))
    init, update = REDUCTIONS[reduction]
    others = [s for d, s in enumerate(x.sizes) if d != dim]

    def body(k, outer, inner):
        index = _split_index(x.sizes, [dim], outer, inner)
        v = cast_value(k, x.load(k, index), x.dtype, out_val.dtype)
        k.add(Assign(acc, Op(update, acc.type, (acc, k.op("StaticCast", acc.type, v)))))
        out.store(k, index, acc)

    g.kernel(others, pre=lambda k, o: k.add(Declare(acc, Const(init, acc.type))),
             inner=[(0, x.sizes[dim])] if x.sizes else [], body=body, post=None)
    return out


# ---- layout --------------------------------------------------------------------------

@lowering("Reshape")
def reshape(g, node, x, shape):
    return ir.reshape(g.value(x), shape_of(node.meta["val"]))


@lowering("Permute")
def permute(g, node, x, dims):
    rank = len(dims)
    return ir.permute(g.value(x), [d % rank for d in dims])


@lowering("Expand")
def expand(g, node, x, shape):
    return ir.expand(g.value(x), shape_of(node.meta["val"]))


@lowering("Slice")
def slice_(g, node, x, dim, start, end, step=1):
    x = g.value(x)  # a symbolic start may be negative: its sign is known only at run time
    return ir.slice_view(x, dim, clamp_bound(start, x.sizes[dim]), step,
                         shape_of(node.meta["val"]))


@lowering("Select")
def select(g, node, x, dim, index):
    x = g.value(x)
    dim = dim % len(x.sizes)
    return ir.select_view(x, dim, wrap_index(index, x.sizes[dim]))


@lowering("Unfold")
def unfold(g, node, x, dim, size, step):
    return ir.unfold_view(g.value(x), dim, size, step, shape_of(node.meta["val"]))


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
        return x.load(k, [on_diagonal[d] if d in on_diagonal else next(rest)
                          for d in range(len(x.sizes))])
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
        return k.masked(on_diagonal, lambda: cast_value(k, src.load(k, local), src.dtype,
                                                        out_val.dtype), outside, T)
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
        inside = k.op("All", "bool", k.op("Ge", "bool", k.index(offset), k.index(0)),
                      k.op("Lt", "bool", k.index(index[dim]), k.index(end)))
        if step != 1:
            on_step = k.op("Eq", "bool", k.index(IMod(offset, step)), k.index(0))
            inside = k.op("All", "bool", inside, on_step)
        local = index[:dim] + [offset if step == 1 else IDiv(offset, step)] + index[dim + 1:]
        outside = cast_value(k, x.load(k, index), x.dtype, out_val.dtype)
        return k.masked(inside, lambda: cast_value(k, src.load(k, local), src.dtype,
                                                   out_val.dtype), outside, T)
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
    return ir.as_strided(x, shape_of(val), strides_of(val), to_sympy(val.storage_offset()),
                         layout)


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
        groups = [parts[i:i + CAT_MAX_PARTS] for i in range(0, len(parts), CAT_MAX_PARTS)]
        parts = [g.realize(_concatenated(group, dim, out_val.dtype, _cat_sizes(group, dim)))
                 for group in groups]
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
            local = index[:dim] + [index[dim] - start] + index[dim + 1:]
            last = i == len(parts) - 1
            condition = None if last else k.op("Lt", "bool", k.index(index[dim]),
                                               k.index(start + part.sizes[dim]))
            cases.append((condition, lambda part=part, local=local: cast_value(
                k, part.load(k, local), part.dtype, dtype)))
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
    """A bool IR value: 0 <= index[d] < sizes[d] for every d."""
    condition = Const(True, "bool")
    for i, size in zip(index, sizes):
        inside = k.op("All", "bool", k.op("Ge", "bool", k.index(i), k.index(0)),
                      k.op("Lt", "bool", k.index(i), k.index(size)))
        condition = inside if condition == Const(True, "bool") else \
            k.op("All", "bool", condition, inside)
    return condition


# ---- indexing ------------------------------------------------------------------------

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
    return index[:dim] + [position] + index[dim + 1:] if index else index


@lowering("Gather")
def gather(g, node, x, dim, index):
    x, index_value = g.value(x), g.value(index)
    dim, size = _indexed_dim(x.sizes, dim)

    def fn(k, idx):
        position = k.computed_index(index_value.load(k, idx), size,
                                    f"Gather index for dim {dim}")
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
    b_index = out_index[first:first + broadcast_rank]
    b_sizes = out_sizes[first:first + broadcast_rank]
    rest = out_index[:first] + out_index[first + broadcast_rank:]
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
    return Pointwise(x.dtype, sizes,
                     lambda k, idx: x.load(k, _index_source(k, x, indices, idx, sizes)))


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
def _scatter_target(g, x, fake):
    """A fresh contiguous copy of x (zeros if x is None) to scatter into, in float32 if x is
    a half type."""
    dtype = torch.float32 if fake.dtype in HALF_TYPES else fake.dtype
    out = _new_buffer(g, fake, dtype=dtype)
    g.pointwise_kernel(out.sizes, lambda k, idx: out.store(
        k, idx, Const(0, compute_ctype(dtype)) if x is None else
        cast_value(k, x.load(k, idx), x.dtype, dtype)))
    return out


def _scatter_result(out, fake):
    """The scattered buffer as the node's value: a half type read from its float32 buffer."""
    if out.dtype == fake.dtype:
        return out
    return Pointwise(fake.dtype, list(out.sizes), lambda k, idx: out.load(k, idx))


def _scatter_store(k, out, index, value, accumulate, round_to=None):
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
    out = _scatter_target(g, x, node.meta["val"])
    dim, size = _indexed_dim(out.sizes, dim)

    def body(k, idx):
        position = k.computed_index(index_value.load(k, idx), size,
                                    f"{node.target.name} index for dim {dim}")
        value = cast_value(k, src.load(k, idx), src.dtype, out.dtype)
        _scatter_store(k, out, _along(idx, dim, position), value, accumulate)
    g.pointwise_kernel(index_value.sizes, body)
    return _scatter_result(out, node.meta["val"])


@lowering("IndexPut")
def index_put(g, node, x, indices, values, accumulate=False):
    x, values = g.value(x), g.value(values)
    indices = [None if t is None else g.value(t) for t in indices]
    out = _scatter_target(g, x, node.meta["val"])
    round_to = node.meta["val"].dtype if out.dtype != node.meta["val"].dtype else None
    with g.ctx.fake_mode:
        fake_indices = [None if t is None else t.meta["val"] for t in node.args[1]]
        indexed = torch.ops.aten.index.Tensor(node.args[0].meta["val"], fake_indices)
    sizes = shape_of(indexed)

    def body(k, idx):
        value = load_broadcast(k, values, idx, out.dtype, sizes)
        _scatter_store(k, out, _index_source(k, out, indices, idx, sizes), value, accumulate,
                       round_to)
    g.pointwise_kernel(sizes, body)
    return _scatter_result(out, node.meta["val"])


@lowering("Empty")
def empty(g, node, size, stride, dtype):
    val = node.meta["val"]
    return _new_buffer(g, val, strides_of(val))


# ---- in place ------------------------------------------------------------------------

@lowering("CopyInto")
def copy_into(g, node, dst, src):
    # Every lazy value still to be read is computed first, src included (this node is one of
    # its readers): x[1:] = x[:-1] * 2 must not read elements it has already overwritten. A
    # src that is a plain view overlapping dst is refused by eager's copy_.
    g.realize_live_values()
    dst, src = g.value(dst), g.value(src)
    g.pointwise_kernel(dst.sizes, lambda k, idx: dst.store(
        k, idx, load_broadcast(k, src, idx, dst.dtype, dst.sizes)))
    return dst
