"""Lowerings of the reduction family: sums, products, extrema and any/all (lazy, fused into
their consumers' kernels where they can be), arg reductions and scans."""

from dataclasses import dataclass
from functools import partial

import sympy
import torch

from dicp.api import shape_of

from .ctypes_map import compute_ctype, storage_ctype
from .loop_ir import Assign, Chunk, Const, Declare, Element, If, Loop, Op, Var
from .lowering import lowering, new_buffer
from .sym import block_count, block_extent, contiguous_strides, flat_index, loop_index, product
from .transpose import copies_to_walk
from .values import Buffer, LazyReduction, cast_value

# name -> (the accumulator's first value, its update by a loaded value: a loop IR op of the
# accumulator's type)
REDUCTIONS = {
    "ReduceSum": (0, "Add"),
    "ReduceProd": (1, "Mul"),
    "ReduceMax": (-float("inf"), "Maximum"),
    "ReduceMin": (float("inf"), "Minimum"),
    "ReduceAny": (False, "LogicalOr"),
    "ReduceAll": (True, "LogicalAnd"),
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


def reduction(g, node, x, dims, keepdim, dtype=None, rounded_to=None):
    """A LazyReduction: computed in the kernel of its consumer, or realized on its own."""
    name = node.target.name
    x, out_val = g.value(x), node.meta["val"]
    dims = sorted(d % max(len(x.sizes), 1) for d in dims) if x.sizes else []
    extremum = name in EXTREMA and out_val.dtype != torch.bool
    precision = rounded_to or out_val.dtype
    emit = _extremum_phase if extremum else partial(_accumulating_phase, precision=precision)
    sizes = shape_of(out_val)
    kept = [d for d in range(len(sizes)) if not (keepdim and d in dims)]
    columns = name == "ReduceSum" and dims and _reads_rows_of_columns(g, x, dims)
    return LazyReduction(
        out_val.dtype,
        sizes,
        None,
        kept=tuple(kept),
        emit_phase=lambda k, kept_index: emit(k, name, x, dims, kept_index, out_val.dtype),
        column_sum=ColumnSum(x, tuple(dims)) if columns else None,
    )


for _name in REDUCTIONS:
    lowering(_name)(reduction)


def _reduced_value(k, acc, dtype):
    """The accumulator as the reduction's result: rounded to `dtype` as a store would."""
    return k.op("StoreRound", compute_ctype(dtype), acc, param=storage_ctype(dtype))


def _accumulating_phase(k, name, x, dims, kept_index, dtype, precision):
    """The phase accumulating reduction `name` of x over `dims` into a `dtype` result whose
    uses need the accuracy of `precision` (ReduceSum's rounded_to, else dtype)."""
    acc_t = _accumulator_ctype(name, dtype)
    acc = k.new_var(acc_t, "acc")
    init, update = REDUCTIONS[name]
    chunk_accs = []  # the float chunk accumulator, once the body takes a chunked sum

    def pre(k):
        k.add(Declare(acc, Const(init, acc_t)))

    def body(k, inner):
        value = x.load(k, _split_index(x.sizes, dims, kept_index, inner))
        if (
            name == "ReduceSum"
            and len(dims) == 1
            and acc_t == "double"
            and value.type == compute_ctype(precision) == "float"
            and _never_negative(k, value)
        ):
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
        opened = (Declare(chunk_acc, Const(0, "float")),)
        if compute_ctype(dtype) == "float":  # a chunk past float's range is the sum's too
            total = exact = None
            chunk_sum = Op("StaticCast", acc_t, (chunk_acc,))
        else:  # kept wider than its uses' float (a variance's squares, divided first): a
            # chunk that overflows float is summed again in double (loop_ir.exact_pass)
            total, exact = chunk_acc, k.new_var(acc_t, "chunk_exact")
            chunk_sum = exact
        close = (Assign(acc, Op("Add", acc_t, (acc, chunk_sum))),)
        chunk = Chunk(SUM_CHUNK, opened, close, total=total, exact=exact)
        return chunk, f"+:{chunk_acc.name}"

    simd = SIMD_REDUCTIONS.get(name)
    return k.phase(
        [(0, x.sizes[d]) for d in dims],
        pre=pre,
        body=body,
        post=lambda k, inner: _reduced_value(k, acc, dtype),
        simd=simd and f"{simd}:{acc.name}",
        chunk=chunk,
    )


# A float sum of values that cannot be negative (softmax's exponentials, a norm's squares)
# adds chunks of SUM_CHUNK elements in float, at the full vector width, and the chunks' totals
# in double. A chunk is 16 elements a vector lane (256 with AVX-512, 64 with SSE; 16 where
# nothing vectorizes: a macro of the runtime header, from the ISA the kernel is built for).
# With no cancellation a chunk's relative error is a few float roundings, so the sum stays
# within about 2 ulp of exact, as eager's cascade sum does (measured over lengths 1 to 4,097:
# at most 1.6 ulp, eager 1.6 ulp; a double accumulator is within 0.5). A fixed 256 gave a
# scalar lane 256 additions: 80 ulp over 221 equal squares (6.5x eager's error), 2.4x with
# SSE. The double accumulator halves the vector width: a fifth of softmax+GELU's time, a sixth
# of layer norm's. Chunks of 64 at AVX-512 gained nothing (a horizontal add per chunk). Sums of
# values of either sign keep the double accumulator: float chunks there were less accurate
# than eager's cascade sum (bd25365).
SUM_CHUNK = sympy.Symbol("DICP_SUM_CHUNK", integer=True, positive=True)
NEVER_NEGATIVE_OPS = {"Exp", "Abs", "Sqrt", "Sigmoid", "Relu"}


def _even_integer(value):
    return (
        isinstance(value, Const)
        and isinstance(value.value, (int, float))
        and float(value.value).is_integer()
        and int(value.value) % 2 == 0
    )


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


def _reads_rows_of_columns(g, x, dims):
    """Whether x's last kept dim (not in `dims`) is the one it walks memory along: its
    innermost dim, or a channels-last activation's channel dim (a batch norm's statistics
    over [n, h, w]: 0.09 ms per sum of a 16x16x32x32 activation read channel by channel with
    the row stride, 0.02 row by row), after copying the buffers it reads along another dim
    where most of its reads walk this one (transpose.copies_to_walk)."""
    kept = [d for d in range(len(x.sizes)) if d not in dims]
    if not kept:
        return False
    if kept[-1] == len(x.sizes) - 1:
        return x.sizes[-1] != 1
    copies = copies_to_walk(x, kept[-1], dims)
    return copies is not None and g.copy_to_walk(copies)


@dataclass(frozen=True, eq=False)
class ColumnSum:
    """A LazyReduction's sum over rows of contiguous columns: `x` summed over `dims`. Sums of
    inputs of the same sizes over the same dims read their rows in the same loops, so the
    ones realized together share one kernel (`column_sums`): a batch norm's backward sums the
    gradient and the gradient times the centered input, each a pass over three activations."""

    x: object
    dims: tuple

    def rows_key(self):
        """Equal for sums one kernel can compute together."""
        return (tuple(map(str, self.x.sizes)), self.dims)


# A column sum whose kernel has fewer outer iterations than this (a batch norm's statistics
# over 16 or 64 channels: one block) and at least ROW_CHUNK_WORK elements per chunk sums
# chunks of its rows in parallel (_row_chunks).
MIN_PARALLEL_BLOCKS = 4
ROW_CHUNK_WORK = 16384
MAX_ROW_CHUNKS = 8


def column_sums(g, sums, split=True):
    """One kernel for `sums`, (ColumnSum, its output buffer) pairs of one `rows_key`: sums over
    dims that leave the innermost one. One phase per output element would read its column
    with the row stride (x.sum(0) of a 4096 x 256 matrix: 7.5 ms against eager's 36 us).
    Instead each outer iteration sums a block of COLUMN_BLOCK adjacent columns row after row
    into arrays of accumulators, one per sum, then stores them: every row's block is read
    contiguously and once for all the sums. Where that leaves the threads too few outer
    iterations, each sums a chunk of the rows into partial sums (in double), which a second
    kernel adds in chunk order (_row_chunks): the same sums whatever the thread count."""
    first, out = sums[0]
    chunking = _row_chunks(first, out, [b for _, b in sums]) if split else None
    if chunking is None:
        _column_sum_kernel(g, sums, None)
    else:
        _chunked_column_sums(g, sums, *chunking)


def _row_chunks(first, out, buffers):
    """(dim, chunks) to split the rows of a column sum along, or None: static sizes, float
    sums, too few blocks of columns for the threads and rows enough for chunks of
    ROW_CHUNK_WORK elements; the reduced dim with a divisor of its size as the chunk count
    (up to MAX_ROW_CHUNKS), the largest such."""
    sizes = list(first.x.sizes)
    if not all(isinstance(v, int) or getattr(v, "is_Integer", False) for v in sizes):
        return None
    if not all(b.dtype.is_floating_point for b in buffers):
        return None
    *leading, columns = [int(v) for v in out.sizes]
    outer = -(-columns // COLUMN_BLOCK) * int(product(leading))
    work = int(product(sizes))
    if outer >= MIN_PARALLEL_BLOCKS or work < 2 * ROW_CHUNK_WORK:
        return None
    best = None
    for d in first.dims:
        size = int(sizes[d])
        chunks = max(
            (
                c
                for c in range(2, MAX_ROW_CHUNKS + 1)
                if size % c == 0 and work // c >= ROW_CHUNK_WORK
            ),
            default=None,
        )
        if chunks is not None and (best is None or chunks > best[1]):
            best = (d, chunks)
    return best


def _chunked_column_sums(g, sums, dim, chunks):
    """Partial sums of each chunk of rows along `dim` (a [chunks, *out] double buffer per sum,
    one kernel in parallel over chunks), then their sum over the chunks into the outputs."""
    partials = []
    for _, out in sums:
        sizes = [chunks, *out.sizes]
        partials.append(
            Buffer(
                g.wrapper.allocate(torch.float64, sizes, contiguous_strides(sizes)),
                torch.float64,
                sizes,
                contiguous_strides(sizes),
            )
        )
    _column_sum_kernel(g, [(c, p) for (c, _), p in zip(sums, partials)], (dim, chunks))
    totals = [(ColumnSum(p, (0,)), out) for p, (_, out) in zip(partials, sums)]
    column_sums(g, totals, split=False)


def _column_sum_kernel(g, sums, chunking):
    """The kernel of `column_sums`; with `chunking` (dim, chunks), its first outer loop runs
    over the chunks of rows along dim, and each output (its first dim the chunk) takes a
    chunk's partial sums."""
    first, out = sums[0]
    dims = first.dims
    *leading, columns = out.sizes[1:] if chunking else out.sizes
    blocks = block_count(columns, COLUMN_BLOCK)
    variables = loop_index(len(leading) + 1 + (1 if chunking else 0))
    block = variables[-1]
    width = block_extent(columns, COLUMN_BLOCK, block)
    accs = [
        Var(f"column_acc{i}", _accumulator_ctype("ReduceSum", buffer.dtype), (COLUMN_BLOCK,))
        for i, (_, buffer) in enumerate(sums)
    ]

    def kept_index(outer, column):
        kept = list(outer[1:] if chunking else outer)
        return kept[:-1] + [COLUMN_BLOCK * kept[-1] + column]

    def stored_index(outer, column):
        return ([outer[0]] if chunking else []) + kept_index(outer, column)

    def clear(k, outer):
        for acc in accs:
            k.add(Declare(acc, "zeros"))

    def accumulate(k, outer, inner):
        *rows, column = inner
        for (column_sum, _), acc in zip(sums, accs):
            x = column_sum.x
            value = x.load(k, _split_index(x.sizes, dims, kept_index(outer, column), rows))
            value = k.op("StaticCast", acc.type, value)
            element = Element(acc, (k.index(column),))
            k.add(Assign(element, Op("Add", acc.type, (element, value))))

    def store(k, outer, inner):
        for (_, out), acc in zip(sums, accs):
            out.store(k, stored_index(outer, inner[0]), Element(acc, (k.index(inner[0]),)))

    rows = [(0, first.x.sizes[d]) for d in dims]
    sizes = leading + [blocks]
    if chunking:
        dim, chunks = chunking
        step = int(first.x.sizes[dim]) // chunks
        rows[dims.index(dim)] = (variables[0] * step, variables[0] * step + step)
        sizes = [chunks] + sizes
    g.phased_kernel(
        sizes,
        [
            dict(pre=clear, inner=rows + [(0, width)], body=accumulate, post=None, simd=""),
            dict(pre=None, inner=[(0, width)], body=store, post=None, simd=""),
        ],
    )


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


@lowering("ArgMax", "ArgMin")
def arg_reduction(g, node, x, dim=None, keepdim=False):
    x, out_val = g.value(x), node.meta["val"]
    rank = len(x.sizes)
    dims = list(range(rank)) if dim is None else ([dim % rank] if rank else [])
    kept = [s for d, s in enumerate(x.sizes) if d not in dims]
    better = ">" if node.target.name == "ArgMax" else "<"
    T = compute_ctype(x.dtype)
    out = new_buffer(g, out_val)
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

    g.kernel(
        kept,
        pre=pre,
        inner=[(0, s) for s in reduced_sizes],
        body=body,
        post=lambda k, o: out_flat.store(k, o, best_index),
    )
    return out


# scan -> the reduction whose accumulator (double for floats, as eager's CPU scans) it keeps
SCANS = {"CumSum": "ReduceSum", "CumProd": "ReduceProd"}


@lowering(*SCANS)
def scan(g, node, x, dim, dtype=None):
    """Each element the running sum (product) of the elements up to it along `dim`, in order:
    one serial inner loop per line."""
    x, out_val = g.value(x), node.meta["val"]
    dim = dim % max(len(x.sizes), 1)
    out = new_buffer(g, out_val)
    reduction = SCANS[node.target.name]
    acc = Var("acc", _accumulator_ctype(reduction, out_val.dtype))
    init, update = REDUCTIONS[reduction]
    others = [s for d, s in enumerate(x.sizes) if d != dim]

    def body(k, outer, inner):
        index = _split_index(x.sizes, [dim], outer, inner)
        v = cast_value(k, x.load(k, index), x.dtype, out_val.dtype)
        k.add(Assign(acc, Op(update, acc.type, (acc, k.op("StaticCast", acc.type, v)))))
        out.store(k, index, acc)

    g.kernel(
        others,
        pre=lambda k, o: k.add(Declare(acc, Const(init, acc.type))),
        inner=[(0, x.sizes[dim])] if x.sizes else [],
        body=body,
        post=None,
    )
    return out
