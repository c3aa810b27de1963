"""Loop-invariant float arithmetic leaves a phase's inner loop (codegen/invariants.py): what
depends on the row alone (log_softmax's log of the row sum, softmax's reciprocal of it) is
computed once per row. Values the loop changes stay inside; so do loads and integer
arithmetic, unless the loop surely runs: then integer loads the loop does not store to and
arithmetic that does not divide move too (a cross entropy's target, read per row)."""

import re

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


def test_integer_loads_and_arithmetic_move_out_of_a_loop_that_runs():
    i = index_var("i", 0)
    target = L.Let(L.Var("n", "int64_t"), L.Load("in_target", i, "int64_t", "int64_t"))
    wrapped = let("w", "WrapIndex", L.Var("n", "int64_t"), L.Index(512), type_="int64_t")
    picked = let("p", "Eq", L.Var("w", "int64_t"), L.Index(r), type_="bool")  # varies
    stored = L.Let(L.Var("s", "int64_t"), L.Load("out", i, "int64_t", "int64_t"))
    division = let("q", "FloorDiv", L.Var("n", "int64_t"), L.Index(3), type_="int64_t")
    store = L.Store("out", r, "int64_t", L.Var("w", "int64_t"))
    body = [target, wrapped, picked, stored, division, store]
    assert hoist_invariants([], body, [r], set(), runs=True) == (
        [target, wrapped],
        [picked, stored, division, store],
    )
    assert hoist_invariants([], body, [r], set()) == ([], body)


def test_cross_entropy_backward_reads_the_target_once_per_row(cold_cache):
    logits = torch.randn(6, 40, requires_grad=True)
    target = torch.randint(40, (6,))
    loss = torch.nn.functional.cross_entropy
    got = torch.autograd.grad(compiled(loss)(logits, target), logits)[0]
    torch.testing.assert_close(got, torch.autograd.grad(loss(logits, target), logits)[0])
    source = kernel_sources(cold_cache)
    inner_loops = [loop.split("}")[0] for loop in source.split("for (int64_t r")[1:]]
    per_row_load = re.compile(r"int64_t>\(in_\w+\[i0\]\)")  # the row's target, in its loop
    assert "[i0]" in source and not any(per_row_load.search(loop) for loop in inner_loops)


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
