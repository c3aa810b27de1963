"""A graph of kernels, views and small float32 products runs from one native call,
graph_entry (codegen/native_entry.py), and computes what eager does, with static sizes or
symbolic ones (passed to the entry as int64); any other graph keeps a Python call per
kernel."""

import math

import pytest
import torch
import torch.nn.functional as F

from .helpers import cold_cache, compiled, dumps  # noqa: F401  (fixtures)
from .helpers import wrapper_sources as wrappers
from .test_memory_reuse import chain, returns_intermediates

NATIVE = "kernels.graph_entry_"


def mlp(x, w1, b1, w2):
    return F.gelu(F.linear(x, w1, b1)) @ w2.t() + 1


def attention(q, k, v):
    scores = torch.softmax(q @ k.transpose(-1, -2) / 4, -1)
    return (scores @ v).tanh()


def views_out(x, w):
    h = (x @ w).relu()
    return h.t(), (h * 2).sum(0), x[:, 1:], x  # a transposed view, a view of an input, it


def _operand(rows, columns, transposed, generator):
    """A [rows, columns] matrix, rows or columns contiguous in memory."""
    if transposed:
        return torch.randn(columns, rows, generator=generator).t()
    return torch.randn(rows, columns, generator=generator)


def _product_chain(a, b, bias):
    """Products around exactly rounded ops, so the result is eager's bit for bit when the
    products are."""
    return torch.addmm(bias, a * 2, b).relu() + (a.neg() @ b) * 0.5


SIZES = [(1, 1, 1), (1, 5, 3), (3, 1, 7), (7, 5, 1), (8, 6, 4), (9, 16, 33)]


@pytest.mark.parametrize("m,n,k", SIZES)
@pytest.mark.parametrize("a_t,b_t", [(False, False), (True, False), (False, True), (True, True)])
def test_products_in_every_layout_equal_eager_bit_for_bit(dumps, m, n, k, a_t, b_t):
    """The entry calls the BLAS routine eager's mm calls, with the same operands: the same
    bits, for row-major and transposed operands of sizes 1, odd and even."""
    generator = torch.Generator().manual_seed(m * 100 + n * 10 + k)
    a, b = _operand(m, k, a_t, generator), _operand(k, n, b_t, generator)
    bias = torch.randn(n, generator=generator)
    got = compiled(_product_chain)(a, b, bias)
    assert NATIVE in wrappers(dumps)
    assert torch.equal(got, _product_chain(a, b, bias))


@pytest.mark.parametrize("batch,length", [(1, 1), (3, 5), (4, 8)])
def test_batched_products_match_eager(dumps, batch, length):
    generator = torch.Generator().manual_seed(batch * 10 + length)
    q, k, v = (torch.randn(batch, length, 6, generator=generator) for _ in range(3))
    torch.testing.assert_close(compiled(attention)(q, k, v), attention(q, k, v))
    assert NATIVE in wrappers(dumps)


def _mlp_params(generator):
    return [
        torch.randn(12, 10, generator=generator) / 3,
        torch.randn(12, generator=generator),
        torch.randn(5, 12, generator=generator) / 3,
    ]


def _assert_mlp_gradients_match_eager(fn, x, params):
    """The gradients of mlp's parameters through `fn` are eager's."""
    results = []
    for f in (mlp, fn):
        leaves = [p.clone().requires_grad_() for p in params]
        f(x, *leaves).square().sum().backward()
        results.append([p.grad for p in leaves])
    for got, want in zip(*reversed(results)):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("rows", [1, 7, 8])
def test_training_step_gradients_match_eager(dumps, rows):
    """Forward and backward graphs (the backward reads saved activations and transposed
    weights) run natively and give eager's gradients."""
    generator = torch.Generator().manual_seed(rows)
    params = _mlp_params(generator)
    _assert_mlp_gradients_match_eager(
        compiled(mlp), torch.randn(rows, 10, generator=generator), params
    )
    assert wrappers(dumps).count(NATIVE) == 2


def test_returned_views_and_inputs_are_the_callers(dumps):
    x, w = torch.randn(6, 4), torch.randn(4, 5)
    got, want = compiled(views_out)(x, w), views_out(x, w)
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e)
        assert g.stride() == e.stride() and g.storage_offset() == e.storage_offset()
    assert got[3] is x and got[2].data_ptr() == x.data_ptr() + 4
    assert NATIVE in wrappers(dumps)


def test_buffers_reused_in_place_and_after_death_match_eager(dumps):
    """The per-kernel wrapper's buffer plan (kernels in place of their sources, products into
    dead buffers) runs the same in the entry."""
    generator = torch.Generator().manual_seed(5)
    x, *ws = (torch.randn(12, 12, generator=generator) / 3 for _ in range(4))
    torch.testing.assert_close(compiled(chain)(x, *ws), chain(x, *ws))
    for got, want in zip(
        compiled(returns_intermediates)(x, ws[0]), returns_intermediates(x, ws[0])
    ):
        torch.testing.assert_close(got, want)
    assert wrappers(dumps).count(NATIVE) == 2


def _with_constant(x, w):
    return (x @ w).relu() * torch.tensor([1.0, -2.0, 3.0]) + 1


def test_a_constant_tensor_is_passed_like_an_input(dumps):
    x, w = torch.randn(4, 5), torch.randn(5, 3)
    torch.testing.assert_close(compiled(_with_constant)(x, w), _with_constant(x, w))
    assert NATIVE in wrappers(dumps) and "const" in wrappers(dumps).split(NATIVE)[1]


def test_switched_off_by_the_knob(dumps, monkeypatch):
    monkeypatch.setenv("DICP_NATIVE_ENTRY", "0")
    x, w1, b1, w2 = torch.randn(3, 8), torch.randn(6, 8), torch.randn(6), torch.randn(4, 6)
    torch.testing.assert_close(compiled(mlp)(x, w1, b1, w2), mlp(x, w1, b1, w2))
    assert NATIVE not in wrappers(dumps) and "kernels.kernel_0(" in wrappers(dumps)


def _large_product(a, b):
    return (a.exp() @ b).relu()


def _double_product(a, b):
    return (a.exp() @ b).relu()


@pytest.mark.parametrize("case", ["large batched product", "float64 product", "oneDNN asked for"])
def test_other_graphs_keep_a_call_per_kernel_and_match_eager(dumps, monkeypatch, case):
    """Where no two steps in a row are the entry's to run (a batched product above its
    size bound, one BLAS sgemm does not compute, products when DICP_GEMM_LIBRARY=onednn) the
    wrapper keeps its call per kernel."""
    fn = _large_product
    a, b = torch.randn(5, 7), torch.randn(7, 3)
    if case == "large batched product":  # aten's bmm runs its batch in parallel
        a, b = torch.randn(8, 128, 128) / 4, torch.randn(8, 128, 128) / 16
    elif case == "float64 product":
        fn, a, b = _double_product, a.double(), b.double()
    else:
        monkeypatch.setenv("DICP_GEMM_LIBRARY", "onednn")
    torch.testing.assert_close(compiled(fn)(a, b), fn(a, b), atol=1e-4, rtol=1e-4)
    assert NATIVE not in wrappers(dumps) and "kernels.kernel_0(" in wrappers(dumps)


def around_a_fallback(x, w):
    h = (x @ w).tanh() @ w
    h = torch.linalg.inv(h + 4 * torch.eye(x.shape[0]))  # eager's: no vendor op
    return (h @ w).sigmoid() @ w, h[1:]  # h[1:]: a view at an offset, copied in Python


def test_steps_around_python_statements_run_in_native_segments(dumps, monkeypatch):
    """An eager fallback (or any other Python statement) ends one entry; the steps after it
    make another, reading what Python computed."""
    monkeypatch.setenv("DICP_STRICT", "0")
    generator = torch.Generator().manual_seed(3)
    x, w = torch.randn(6, 6, generator=generator) / 3, torch.randn(6, 6, generator=generator) / 3
    for got, want in zip(compiled(around_a_fallback)(x, w), around_a_fallback(x, w)):
        torch.testing.assert_close(got, want)
    source = wrappers(dumps)
    assert "kernels.graph_entry_0(" in source and "kernels.graph_entry_1(" in source
    assert "linalg_inv" in source or "inv" in source


def deep_chain(x, w):
    """70 products and 70 kernels of exactly rounded ops: eager's result bit for bit."""
    for _ in range(70):
        x = (x @ w).relu() + x * 0.5
    return x


def test_kernels_of_other_sources_are_called_through_pointers(cold_cache):
    """A graph of more than 64 kernels is built from several sources; the entries, in the
    last, call the others' kernels through pointers the loader passes."""
    generator = torch.Generator().manual_seed(4)
    x, w = torch.randn(5, 8, generator=generator), torch.randn(8, 8, generator=generator) / 4
    assert torch.equal(compiled(deep_chain)(x, w), deep_chain(x, w))
    sources = [p.read_text() for p in cold_cache.glob("kernels/*/*.cpp")]
    assert len(sources) >= 2
    assert sum("dicp_set_kernels" in text for text in sources) == 1


def many_inputs_chain(x, *inputs):
    for w, y in zip(inputs[::2], inputs[1::2]):
        x = x @ w + y
    return x


def test_an_entry_takes_no_more_arguments_than_ctypes_can_pass(dumps, monkeypatch):
    """Each step here reads inputs no other step reads. With bounds checks an entry takes 3
    arguments per tensor (its pointer and extent): one entry for all 180 products and adds
    would take over 1024, more than a ctypes call can pass, so they are split."""
    monkeypatch.setenv("DICP_BOUNDS_CHECK", "1")
    generator = torch.Generator().manual_seed(5)
    x = torch.randn(3, 4, generator=generator)
    inputs = [
        torch.randn(4, 4, generator=generator) / 4
        if i % 2 == 0
        else torch.randn(3, 4, generator=generator)
        for i in range(360)
    ]
    assert torch.equal(compiled(many_inputs_chain)(x, *inputs), many_inputs_chain(x, *inputs))
    assert "kernels.graph_entry_1(" in wrappers(dumps)


def test_a_product_gemm_py_gives_onednn_stays_python(dumps):
    """A product large enough for gemm.py to time oneDNN against ATen runs where that timing
    says (asked at planning): in the entry only when ATen's is the faster, however large."""
    from dicp.vendor.new_backendGraph import gemm

    a, b = torch.randn(1024, 128) / 8, torch.randn(128, 128) / 8
    fn = compiled(_large_product)
    torch.testing.assert_close(fn(a, b), _large_product(a, b), atol=1e-4, rtol=1e-4)
    choice = gemm.library_for(((1024, 128), (128, 1)), ((128, 128), (128, 1)), False)
    assert ("vendor_ops['Mm']" in wrappers(dumps)) == (choice == "onednn")
    assert (NATIVE in wrappers(dumps)) == (choice == "aten")


# ---- symbolic sizes ----

DYNAMIC_SIZES = [(3, 5, 7), (4, 6, 8), (9, 16, 33), (2, 3, 2)]


@pytest.mark.parametrize("a_t,b_t", [(False, False), (True, False), (False, True), (True, True)])
def test_products_with_symbolic_sizes_equal_eager_bit_for_bit(dumps, a_t, b_t):
    """One graph compiled with symbolic m, n and k runs natively at sizes other than those it
    was traced with, odd and even, and gives eager's bits: the entry takes the sizes as
    parameters, not the traced ones."""
    fn = compiled(_product_chain, dynamic=True)
    for m, n, k in DYNAMIC_SIZES:
        generator = torch.Generator().manual_seed(m * 100 + n * 10 + k)
        a, b = _operand(m, k, a_t, generator), _operand(k, n, b_t, generator)
        bias = torch.randn(n, generator=generator)
        assert torch.equal(fn(a, b, bias), _product_chain(a, b, bias)), (m, n, k)
    source = wrappers(dumps)
    assert source.count("def call(") == 1 and NATIVE in source


def test_symbolic_training_step_gradients_match_eager(dumps):
    """Forward and backward of a dynamic-shape graph run natively at each batch size."""
    generator = torch.Generator().manual_seed(11)
    params, fn = _mlp_params(generator), compiled(mlp, dynamic=True)
    for rows in (3, 8, 5):
        _assert_mlp_gradients_match_eager(fn, torch.randn(rows, 10, generator=generator), params)
    assert wrappers(dumps).count(NATIVE) == 2


def test_symbolic_batched_products_match_eager(dumps):
    fn = compiled(attention, dynamic=True)
    for batch, length in [(3, 5), (2, 8), (5, 3)]:
        generator = torch.Generator().manual_seed(batch * 10 + length)
        q, k, v = (torch.randn(batch, length, 6, generator=generator) for _ in range(3))
        torch.testing.assert_close(fn(q, k, v), attention(q, k, v))
    assert NATIVE in wrappers(dumps)


def sliced_products(x, w):
    """Operands at symbolic offsets and row strides: slices of a larger tensor."""
    h = (x[1:, 2:] @ w[2:, 1:]).relu()
    return h @ w[1:, :3], (h * 2)[:, 1:]


def test_views_at_symbolic_offsets_match_eager(dumps):
    fn = compiled(sliced_products, dynamic=True)
    for rows, columns in [(4, 6), (7, 9), (5, 5)]:
        generator = torch.Generator().manual_seed(rows * 10 + columns)
        x = torch.randn(rows, columns, generator=generator)
        w = torch.randn(columns, columns, generator=generator)
        for got, want in zip(fn(x, w), sliced_products(x, w)):
            torch.testing.assert_close(got, want)
            assert got.stride() == want.stride()
    assert NATIVE in wrappers(dumps)


def patches(x):
    """A size through math.ceil, as vision models cut patches: the wrapper computes it."""
    count = math.ceil(x.shape[-1] / 4)
    padded = F.pad(x, (0, count * 4 - x.shape[-1]))
    return (padded.reshape(x.shape[0], count, 4) * 2).sum(-1)


def test_a_size_through_math_ceil_plans_without_failing(dumps, caplog):
    fn = compiled(patches, dynamic=True)
    for columns in (9, 12, 17):
        x = torch.randn(3, columns, generator=torch.Generator().manual_seed(columns))
        torch.testing.assert_close(fn(x), patches(x))
    assert "planning its native entry failed" not in caplog.text
