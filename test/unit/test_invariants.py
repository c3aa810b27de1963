"""Loop-invariant float arithmetic leaves a phase's inner loop (codegen/invariants.py): what
depends on the row alone (log_softmax's log of the row sum, softmax's reciprocal of it) is
computed once per row. Loads, integer arithmetic and values the loop changes stay inside."""

import sympy
import torch

from dicp.vendor.new_backendGraph.codegen import loop_ir as L
from dicp.vendor.new_backendGraph.codegen.invariants import hoist_invariants
from dicp.vendor.new_backendGraph.codegen.sym import index_var

from .helpers import cold_cache, compiled, kernel_sources  # noqa: F401  (fixture)

r = index_var("r", 0)
SUM, ACC, X = L.Var("sum", "float"), L.Var("acc", "float"), L.Var("x", "float")


def let(name, op, *args, type_="float"):
    return L.Let(L.Var(name, type_), L.Op(op, type_, args))


def test_row_arithmetic_moves_before_the_loop():
    log = let("t1", "Log", SUM)
    shifted = let("t2", "Sub", L.Var("t1", "float"), L.Const(1.0, "float"))  # reads a moved one
    load = L.Let(X, L.Load("in", r, "float", "float"))
    per_element = let("t3", "Sub", X, L.Var("t2", "float"))
    store = L.Store("out", r, "float", L.Var("t3", "float"))
    pre, body = hoist_invariants([], [log, shifted, load, per_element, store], [r], set())
    assert pre == [log, shifted]
    assert body == [load, per_element, store]


def test_loads_integers_loop_indices_and_changed_values_stay():
    load = L.Let(X, L.Load("in", sympy.Integer(0), "float", "float"))  # fixed, but a load
    division = let(
        "q", "FloorDiv", L.Index(sympy.Symbol("s0")), L.Const(2, "int64_t"), type_="int64_t"
    )  # may divide by 0
    position = let("p", "StaticCast", L.Index(r))  # varies with r
    running = let("t", "Add", ACC, L.Const(1.0, "float"))  # acc changes below
    update = L.Assign(ACC, L.Var("t", "float"))
    body = [load, division, position, running, update]
    assert hoist_invariants([], body, [r], set()) == ([], body)


def test_a_computed_index_is_never_invariant():
    c = sympy.Symbol("c0", integer=True)
    body = [let("v", "StaticCast", L.Index(c))]
    assert hoist_invariants([], body, [r], {c}) == ([], body)


def test_log_softmax_takes_the_log_once_per_row(cold_cache):
    x = torch.randn(5, 33)
    torch.testing.assert_close(
        compiled(lambda t: torch.log_softmax(t * 2, -1))(x), torch.log_softmax(x * 2, -1)
    )
    source = kernel_sources(cold_cache)
    last_loop = source.rindex("for (int64_t")
    assert "dicp::log<float>" in source[:last_loop]
    assert "dicp::log<float>" not in source[last_loop:]


def test_a_value_a_chunk_updates_stays():
    """A chunked sum adds each chunk's total to its accumulator after the chunk (Chunk.close):
    inside the loop, not fixed over it."""
    total = L.Var("total", "double")
    reads_total = let("t", "Mul", total, L.Const(2.0, "double"), type_="double")
    close = [L.Assign(total, L.Var("chunk", "double"), combine="+")]
    assert hoist_invariants([], [reads_total], [r], set(), close) == ([], [reads_total])
    assert hoist_invariants([], [reads_total], [r], set()) == ([reads_total], [])
