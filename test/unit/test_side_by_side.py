"""Small independent kernels of a native entry run side by side (codegen/side_by_side.py): an
optimizer's per-parameter updates below the parallel threshold become one parallel loop over
the kernels. The grouping rule is checked on made-up steps (a kernel reading or writing memory
another of the run writes, a write into an input other inputs may share, a root only Python
knows: each runs alone); whole updates compare with eager, bounds-checked too."""

import pytest
import torch
import torch.nn as nn

from dicp.vendor.new_backendGraph.codegen.loop_ir import Param
from dicp.vendor.new_backendGraph.codegen.native_entry import KernelStep, Pointer
from dicp.vendor.new_backendGraph.codegen.side_by_side import Memory, SideBySide, side_by_side

from .helpers import cold_cache, compiled, dumps  # noqa: F401  (fixtures)

# root -> its memory: buffers of the entry's own, an elided copy's buffer (`new_p`, input p's
# memory), inputs
MEMORY = {
    "a": Memory("a", True),
    "b": Memory("b", True),
    "c": Memory("c", True),
    "new_p": Memory("p", True),
    "p": Memory("p", False),
    "x": Memory("x", False),
}


def step(name, writes=(), reads=(), work=100):
    def argument(root, writable):
        param = Param(f"{'out' if writable else 'in'}_{root}", "float", root, writable)
        return param, Pointer(root, 0, (1,), (1,), torch.float32)

    pointers = [argument(r, True) for r in writes] + [argument(r, False) for r in reads]
    return KernelStep(name, tuple(pointers), (), False, work)


def grouped(steps, parallel_work=150):
    """The steps' names as side_by_side leaves them: a set for each SideBySide."""
    result = side_by_side(steps, parallel_work, MEMORY.get)
    return [
        [s.function for s in item.steps] if isinstance(item, SideBySide) else item.function
        for item in result
    ]


def test_independent_kernels_run_side_by_side_largest_first():
    steps = [step("k1", ["a"], ["x"], 60), step("k2", ["b"], ["x"], 90), step("k3", ["c"], ["p"])]
    assert grouped(steps) == [["k3", "k2", "k1"]]


@pytest.mark.parametrize(
    "second",
    [
        step("reads_a", ["b"], ["a"]),
        step("writes_a", ["a"], ["x"]),
        step("reads_p_written_in_place", ["b"], ["p"]),
    ],
    ids=lambda s: s.function,
)
def test_a_kernel_touching_memory_another_writes_runs_after_it(second):
    first = step("first", ["a", "new_p"], ["x"])
    assert grouped([first, second]) == ["first", second.function]


@pytest.mark.parametrize(
    "lone",
    [
        step("writes_an_input", ["x"], ["p"]),
        step("reads_a_python_view", ["b"], ["view_of_a"]),
        step("large", ["b"], ["x"], work=None),  # its own loop runs in parallel
    ],
    ids=lambda s: s.function,
)
def test_a_kernel_whose_memory_may_be_shared_runs_alone(lone):
    steps = [step("k1", ["a"], ["x"]), lone, step("k3", ["c"], ["x"]), step("k4", ["new_p"])]
    assert grouped(steps) == ["k1", lone.function, ["k3", "k4"]]


def test_a_run_too_small_for_threads_stays_in_order():
    steps = [step("k1", ["a"], work=50), step("k2", ["b"], work=50)]
    assert grouped(steps) == ["k1", "k2"]


def test_a_conflict_starts_a_new_run():
    steps = [step("k1", ["a"]), step("k2", ["b"]), step("k3", ["c"], ["a"]), step("k4", ["new_p"])]
    assert grouped(steps) == [["k1", "k2"], ["k3", "k4"]]


# sizes 1, odd and even, each below the parallel threshold, together above it
SHAPES = [(1,), (7,), (6, 7), (64, 64), (3, 5, 7), (4097,), (64, 128), (5000,)] * 3


def sgd_steps(compile_step, steps=3):
    torch.manual_seed(0)
    params = [nn.Parameter(torch.randn(shape)) for shape in SHAPES]
    optimizer = torch.optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=0.01)
    step = compiled(optimizer.step) if compile_step else optimizer.step
    for i in range(steps):
        for p in params:
            p.grad = torch.linspace(-1, 1, p.numel()).view_as(p) * (i + 1) + p.detach()
        step()
    buffers = [optimizer.state[p]["momentum_buffer"] for p in params]
    return [p.detach() for p in params], buffers


@pytest.mark.parametrize("bounds_check", [False, True], ids=["built", "bounds-checked"])
def test_an_sgd_update_runs_side_by_side_as_eager_computes_it(dumps, monkeypatch, bounds_check):
    if bounds_check:
        monkeypatch.setenv("DICP_BOUNDS_CHECK", "1")
    got_params, got_buffers = sgd_steps(compile_step=True)
    want_params, want_buffers = sgd_steps(compile_step=False)
    for got, want in zip(got_params + got_buffers, want_params + want_buffers):
        torch.testing.assert_close(got, want)
    sources = "".join(p.read_text() for p in dumps.glob("debug/*inference*/kernels*.cpp"))
    assert "#pragma omp parallel for schedule(dynamic, 1)" in sources
