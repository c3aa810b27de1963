"""DICP_BOUNDS_CHECK=1: kernels check every access against its tensor's storage and every
data-dependent index against its dim, and raise BoundsError naming graph, kernel, buffer and
index instead of reading or writing foreign memory."""

import pytest
import torch
import torch.fx as fx
from torch._subclasses import FakeTensorMode

from dicp.bridge.pipeline.stages import CompileContext
from dicp.api import get_backend
from dicp.vendor.new_backendGraph.bounds import BoundsError
from dicp.vendor.new_backendGraph.opset import ops

from .helpers import BACKEND, compiled, warm_cache  # noqa: F401  (fixture)

DYNAMIC = pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])


@pytest.fixture
def checked(warm_cache, monkeypatch):
    monkeypatch.setenv("DICP_BOUNDS_CHECK", "1")


def vendor_graph(build, *inputs):
    """Build and compile a vendor graph by hand: `build(graph, *placeholders)` returns the
    output node. Meta values come from the vendor ops' own shape rules."""
    mode = FakeTensorMode()
    graph = fx.Graph()
    placeholders = []
    for i, tensor in enumerate(inputs):
        node = graph.placeholder(f"arg{i}")
        node.meta["val"] = mode.from_tensor(tensor)
        placeholders.append(node)
    out = build(graph, *placeholders)
    graph.output((out,))
    for node in graph.nodes:
        if node.op == "call_function":
            args = fx.node.map_arg(node.args, lambda n: n.meta["val"])
            with mode:
                node.meta["val"] = node.target.impl(*args)
    backend = get_backend(BACKEND)
    ctx = CompileContext(backend, "inference", mode, output_vals=[out.meta["val"]])
    gm = fx.GraphModule(torch.nn.Module(), graph)
    return backend.compile_job(backend.codegen(gm, ctx), ctx), ctx.graph_name


def select_then_add(index):
    def build(graph, x):
        selected = graph.call_function(ops.Select, (x, 0, index))
        return graph.call_function(ops.Add, (selected, 1.0))

    return build


def test_load_outside_storage_names_graph_kernel_buffer_and_element(checked):
    # select(x, 0, 3) on 3 rows: eager's shape rule allows no such graph, a buggy lowering
    # (issue 9's negative select under dynamic shapes) makes the same read
    x = torch.randn(3, 4)
    call, graph_name = vendor_graph(select_then_add(-1), x)
    assert torch.equal(call([x])[0], x[-1] + 1)  # in bounds: the check changes nothing
    # built for 3 rows, called with 1: row 2 starts at element 8 of a 4-element storage
    call, graph_name = vendor_graph(select_then_add(2), x)
    bad = torch.randn(1, 4)
    with pytest.raises(
        BoundsError,
        match=rf"{graph_name} kernel_0: load of buffer arg0 at "
        rf"element 8, outside \[0, 4\)",
    ):
        call([bad])


def product_then_add(graph, x, w):
    return graph.call_function(ops.Add, (graph.call_function(ops.Mm, (x, w)), 1.0))


def add_then_product(graph, x, w):
    return graph.call_function(ops.Mm, (graph.call_function(ops.Add, (x, 1.0)), w))


def test_a_native_entry_checks_its_products_operands(checked):
    """The product and the kernel run in one native entry; its operands' spans are checked
    against their storage before sgemm_ runs, as a kernel's accesses are."""
    x, w = torch.randn(3, 4), torch.randn(4, 5)
    call, graph_name = vendor_graph(product_then_add, x, w)
    torch.testing.assert_close(call([x, w])[0], x @ w + 1)
    # built for 3 rows, called with 1: the product's last row of x ends at element 11
    with pytest.raises(
        BoundsError,
        match=rf"{graph_name} graph_entry_0: product 0 of this "
        rf"entry, operand a 11, outside \[0, 4\)",
    ):
        call([torch.randn(1, 4), w])


def rows_after_the_first_product_then_add(graph, x, w):
    rows = graph.call_function(ops.Slice, (x, 0, 1, 4, 1))
    return product_then_add(graph, rows, w)


def test_a_native_entry_checks_an_operand_at_an_offset_against_what_follows_it(checked):
    x, w = torch.randn(4, 4), torch.randn(4, 5)
    call, graph_name = vendor_graph(rows_after_the_first_product_then_add, x, w)
    torch.testing.assert_close(call([x, w])[0], x[1:] @ w + 1)
    # 3 rows from row 1 of a 3-row x: 12 elements from element 4, of which 8 are its storage
    with pytest.raises(
        BoundsError,
        match=rf"{graph_name} graph_entry_0: product 0 of this "
        rf"entry, operand a 11, outside \[-4, 8\)",
    ):
        call([torch.randn(3, 4), w])


def test_a_native_entry_passes_its_kernels_their_extents(checked):
    x, w = torch.randn(6, 4)[2:], torch.randn(4, 5)  # x: storage from 8 elements before it
    call, graph_name = vendor_graph(add_then_product, x, w)
    torch.testing.assert_close(call([x, w])[0], (x + 1) @ w)
    with pytest.raises(
        BoundsError,
        match=rf"{graph_name} graph_entry_0: load of buffer arg0 "
        rf"at element 4, outside \[0, 4\)",
    ):
        call([torch.randn(1, 4), w])


def test_load_inside_storage_of_a_view_is_allowed(checked):
    base = torch.randn(6, 4)
    view = base[3:]  # storage offset 12: rows before it are its storage
    call, _ = vendor_graph(select_then_add(-1), view)
    assert torch.equal(call([view])[0], view[-1] + 1)


@DYNAMIC
def test_gather_index_out_of_range(checked, dynamic):
    def f(x, index):
        return torch.gather(x, 1, index) * 2

    x = torch.randn(5, 3)
    good = torch.tensor([[0, 2], [1, 1], [0, 0], [1, 1], [2, 0]])
    torch.testing.assert_close(compiled(f, dynamic)(x, good), f(x, good))
    bad = good.clone()
    bad[3, 1] = 5  # eager rejects it too
    with pytest.raises(RuntimeError, match="out of bounds"):
        f(x, bad)
    with pytest.raises(
        BoundsError,
        match=r"kernel_\d+: Gather index for dim 1 is 5, outside "
        r"\[-3, 3\)",
    ):
        compiled(f, dynamic)(x, bad)


def test_index_put_index_out_of_range(checked):
    def f(x, index, values):
        return x.index_put((index,), values, accumulate=True)

    x, values = torch.zeros(4, 3), torch.ones(3, 3)
    with pytest.raises(BoundsError, match=r"index tensor for dim 0 is -7, outside \[-4, 4\)"):
        compiled(f)(x, torch.tensor([0, -7, 1]), values)


def test_off_by_default_and_a_different_build(warm_cache, monkeypatch):
    """Without the knob kernels have no checks (same results); the knob changes the source,
    so it is a different cache entry."""

    def f(x, index):
        return torch.gather(x, 1, index) + 1

    x, index = torch.randn(5, 3), torch.tensor([[0], [1], [2], [1], [0]])
    from dicp.bridge.cache.build import cache_stats

    monkeypatch.delenv("DICP_BOUNDS_CHECK", raising=False)
    plain = compiled(f)(x, index)
    builds = cache_stats()["builds"]
    monkeypatch.setenv("DICP_BOUNDS_CHECK", "1")
    torch.testing.assert_close(compiled(f)(x, index), plain)
    assert cache_stats()["builds"] == builds + 1
