"""The loop plan (codegen/loops.py): which loops may be parallel or SIMD, from a kernel's
accesses alone. Stores through computed indices are never parallel over the loops they index,
and get `omp simd` only on a loop whose lanes provably store to distinct elements (the
computed index the same in every lane, or in another dim); read-modify-writes of one's own
element keep both. A store into a layout that overlaps itself is never parallel."""

import pytest
import sympy

from dicp.bridge.pipeline.symbolic import may_overlap
from dicp.vendor.new_backendGraph.codegen.kernel import Access
from dicp.vendor.new_backendGraph.codegen.loops import KernelLoops, LoopPlan, PhaseLoops, plan_loops
from dicp.vendor.new_backendGraph.codegen.sym import contiguous_strides, loop_index

i0, i1, i2 = loop_index(3)
r0 = loop_index(1, "r")[0]
t = sympy.Symbol("t5", integer=True)  # a computed index
s0 = sympy.Symbol("s0", integer=True, positive=True)


def store(index, sizes, base="out"):
    return Access(base, tuple(index), tuple(contiguous_strides(sizes)), 0, True)


def load(index, sizes, base="out"):
    return Access(base, tuple(index), tuple(contiguous_strides(sizes)), 0, False)


def plan(sizes, post, pre=(), body=(), inner=(), simd_reduction=None, t_varies_with=None):
    """`t_varies_with`: the symbols computed index t is loaded at (None: unknown)."""
    outer, inner_vars = loop_index(len(sizes)), loop_index(len(inner), "r")
    extents = dict(zip(outer, sizes)) | dict(zip(inner_vars, inner))
    phase = PhaseLoops(tuple(inner_vars), tuple(body), tuple(pre) + tuple(post), simd_reduction)
    known = {} if t_varies_with is None else {t: frozenset(t_varies_with)}
    return plan_loops(KernelLoops(outer, (phase,), extents, {t}, computed_symbols=known))


def expect(parallel=0, simd_outer=False, simd=None):
    """The plan of a one-phase kernel."""
    return LoopPlan(parallel, simd_outer, (simd,))


CASES = {
    # pointwise: everything but the innermost loop collapsed, the innermost vectorized
    "pointwise": (plan([4, 5, 6], [store([i0, i1, i2], [4, 5, 6])]), expect(2, True)),
    "pointwise symbolic": (plan([s0, 5], [store([i0, i1], [s0, 5])]), expect(1, True)),
    # scatter along the last dim: parallel over the others, never SIMD over the scattered one
    "scatter last dim": (
        plan([4, 5, 6], [load([i0, i1, t], [4, 5, 3]), store([i0, i1, t], [4, 5, 3])]),
        expect(2, False),
    ),
    # scatter along dim 0 (embedding backward, index_put): serial rows, each row's columns
    # SIMD (the lanes differ in the column, whatever t is)
    "scatter first dim": (
        plan([7, 16], [load([t, i1], [9, 16]), store([t, i1], [9, 16])]),
        expect(0, True),
    ),
    "scatter 1-d": (plan([7], [store([t], [9])]), expect(0, False)),
    # a computed index mixed with a loop variable in one dim pins nothing, unless t is loaded
    # at indices free of that loop variable (the same in every lane: a KV-cache write)
    "mixed index": (plan([4, 6], [store([i0, t + i1], [4, 9])]), expect(1, False)),
    "mixed index, t varies in lanes": (
        plan([4, 6], [store([i0, t + i1], [4, 9])], t_varies_with={i0, i1}),
        expect(1, False),
    ),
    "mixed index, t the same in lanes": (
        plan([4, 6], [store([i0, t + i1], [4, 9])], t_varies_with={i0, s0}),
        expect(1, True),
    ),
    "row scatter, t the same in lanes": (
        plan([4, 6], [store([16 * t + i1], [64])], t_varies_with={i0}),
        expect(0, True),
    ),
    "t as coefficient": (
        plan([4, 6], [store([t * i1], [64])], t_varies_with={i0}),
        expect(0, False),
    ),
    # reading another element of a written buffer: serial, no SIMD
    "foreign load": (plan([4, 6], [load([i0, 5 - i1], [4, 6]), store([i0, i1], [4, 6])]), expect()),
    "two store addresses": (
        plan([4, 6], [store([i0, i1], [4, 12]), store([i0, i1 + 6], [4, 12])]),
        expect(),
    ),
    # a store that ignores a loop variable collides across that loop's iterations
    "broadcast store": (plan([4, 6], [store([i0], [4])]), expect(1, False)),
    "size-1 loop": (plan([1, 6], [store([i1], [6])]), expect(1, True)),
    # reductions: stores after the inner loop; the inner loop keeps its SIMD reduction
    "reduction": (
        plan(
            [4],
            [store([i0], [4])],
            body=[load([i0, r0], [4, 8], "x")],
            inner=[8],
            simd_reduction="+:acc",
        ),
        expect(1, False, "+:acc"),
    ),
    # a scan stores inside its inner loop: that loop gets no SIMD clause when stores collide
    "scan": (plan([4], [], body=[store([i0, r0], [4, 8])], inner=[8]), expect(1, False)),
    "inner computed": (
        plan([4], [], body=[store([i0, t], [4, 8])], inner=[8], simd_reduction="+:acc"),
        expect(1, False, None),
    ),
}


def column_blocks(width):
    """Column sums (lowering_reduce._column_sum): outer loop over blocks of 64 columns, the
    stores at 64 * block + column with `width` columns per block."""
    n = sympy.Integer(300)
    column = loop_index(1, "c")[0]
    extents = {i0: 5, column: width}
    phase = PhaseLoops((column,), (store([64 * i0 + column], [n]),), ())
    return plan_loops(KernelLoops([i0], (phase,), extents, {t}))


# a split loop (loop_split.py) stores at 128 * i0 + i1 with i1 < 128: every (i0, i1) its own
# element, so both collapse; with i1 running to 129 two pairs share one
CASES["split rows"] = (plan([4, 128, 6], [store([128 * i0 + i1, i2], [512, 6])]), expect(2, True))
CASES["overlapping split rows"] = (
    plan([4, 129, 6], [store([128 * i0 + i1, i2], [512, 6])]),
    expect(0, True),
)
CASES["column blocks"] = (column_blocks(sympy.Min(64, 300 - 64 * i0)), LoopPlan(1, False, (None,)))
# a block wider than the stride between blocks: blocks overlap, so no parallel loop
CASES["overlapping blocks"] = (column_blocks(sympy.Integer(65)), LoopPlan(0, False, (None,)))


def overlapping_store(index, sizes, strides):
    """A store into a layout that may overlap itself, as the kernel builder records it."""
    return Access("out", tuple(index), tuple(strides), 0, True, may_overlap(sizes, strides))


# A value realized in eager's layout of x.unfold(0, 3, 1) for x of (5, 4): (3, 4, 3) with
# strides (4, 1, 4). Each element was written by several (i0, i2) pairs, in parallel; lanes
# that differ in one index of nonzero stride (its only use) still store apart. Windows apart
# pin as before.
CASES["overlapping windows"] = (
    plan([3, 4, 3], [overlapping_store([i0, i1, i2], [3, 4, 3], [4, 1, 4])]),
    expect(0, True),
)
CASES["overlapping windows, columns last"] = (
    plan([3, 3, 4], [overlapping_store([i0, i1, i2], [3, 3, 4], [4, 4, 1])]),
    expect(0, True),
)
CASES["overlapping windows, symbolic"] = (
    plan([s0, 3, 4], [overlapping_store([i0, i1, i2], [s0, 3, 4], [4, 4, 1])]),
    expect(0, True),
)
CASES["windows apart"] = (
    plan([2, 3, 4], [overlapping_store([i0, i1, i2], [2, 3, 4], [12, 4, 1])]),
    expect(2, True),
)
# a diagonal-like index uses i1 in two dims of an overlapping layout: its lanes may meet
CASES["overlapping, one variable in two dims"] = (
    plan([3, 4], [overlapping_store([i0, i1, 3 - i1], [3, 4, 4], [4, 1, 1])]),
    expect(0, False),
)


@pytest.mark.parametrize("case", CASES)
def test_loop_plan(case):
    got, expected = CASES[case]
    assert got == expected
