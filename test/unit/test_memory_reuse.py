"""A new buffer takes the memory of a dead one of the same dtype and extent (a kernel's output
by allocation, a matrix product's through `out=`), and never memory that anything still
reads or that the graph returns (bridge/pipeline/wrapper_memory.py)."""

import re

import pytest
import torch
import torch.nn.functional as F

from .helpers import (  # noqa: F401  (fixtures)
    cold_cache,
    compiled,
    dumps,
    kernel_count,
    per_kernel_wrapper,
)
from .helpers import wrapper_sources as wrappers

# These read the buffer plan in the per-kernel wrapper's text (test_native_entry.py checks
# the native entry, which runs the same plan).
pytestmark = pytest.mark.usefixtures("per_kernel_wrapper")


def chain(x, w1, w2, w3):
    """Products and kernels of one size in turn, each dying at the next; the transposing
    kernels cannot write in place, so they allocate."""
    h = torch.tanh(x @ w1).t().exp()
    h = (F.gelu(h @ w2) + x.t()).t().sin()
    h = torch.softmax(h, -1) @ w3
    return h * 2


def attention(q, k, v):
    scores = torch.softmax((q @ k.transpose(-1, -2)) / 8, -1)
    return ((scores @ v).sin() @ v.transpose(-1, -2)).cos()


def returns_intermediates(x, w):
    a = x.exp()  # returned: its memory is never taken
    b = (a @ w).relu()
    c = (b @ w).sigmoid()  # b is dead here, c may take it
    return a, c @ w, b[1:]  # a view of b is returned too


def _inputs(n, size=(12, 12), generator=None):
    generator = generator or torch.Generator().manual_seed(n)
    return [torch.randn(size, generator=generator) / 3 for _ in range(n)]


@pytest.mark.parametrize("dynamic", [False, True])
def test_buffers_take_dead_memory_and_results_match_eager(dumps, dynamic):
    fn = compiled(chain, dynamic)
    for size in (12, 12, 5, 1):
        x, *ws = _inputs(4, (size, size))
        torch.testing.assert_close(fn(x, *ws), chain(x, *ws))
    source = wrappers(dumps)
    assert "# reuses buf" in source and "# into buf" in source


def test_batched_products_write_into_dead_memory(dumps):
    q, k, v = (torch.randn(3, 16, 16) for _ in range(3))
    torch.testing.assert_close(compiled(attention)(q, k, v), attention(q, k, v))
    assert "vendor_ops['Bmm'](" in wrappers(dumps) and "out=" in wrappers(dumps)


@pytest.mark.parametrize("dynamic", [False, True])
def test_returned_buffers_and_their_views_keep_their_memory(dumps, dynamic):
    fn = compiled(returns_intermediates, dynamic)
    for rows in (8, 3):
        x, w = torch.randn(rows, 8), torch.randn(8, 8) / 3
        for got, want in zip(fn(x, w), returns_intermediates(x, w)):
            torch.testing.assert_close(got, want)


def test_training_through_reused_memory_matches_eager(cold_cache):
    ws = [w.requires_grad_() for w in _inputs(3)]
    x = torch.randn(12, 12)
    got = compiled(chain)(x, *ws).square().sum()
    want = chain(x, *ws).square().sum()
    torch.testing.assert_close(got, want)
    for g, e in zip(torch.autograd.grad(got, ws), torch.autograd.grad(want, ws)):
        torch.testing.assert_close(g, e)


def test_a_backwards_inputs_die_at_their_last_use(dumps):
    """The backward deletes each input (saved activation, weight, tangent) after its last use,
    as its own buffers: AOTAutograd has handed them over, and held to the return they kept
    every saved activation allocated through the whole backward."""
    ws = [w.requires_grad_() for w in _inputs(3)]
    compiled(chain)(torch.randn(12, 12), *ws).square().sum().backward()
    backward = next(dumps.glob("debug/*backward*/wrapper.py")).read_text()
    inputs = re.search(r"^    (.*) = args$", backward, re.M).group(1).rstrip(",").split(", ")
    freed = {n for line in re.findall(r"^    del (.*)$", backward, re.M) for n in line.split(", ")}
    assert len(inputs) > 3 and set(inputs) <= freed


@pytest.mark.parametrize("bounds_check", ["0", "1"])
def test_a_product_into_dead_memory_under_bounds_checks(cold_cache, monkeypatch, bounds_check):
    monkeypatch.setenv("DICP_BOUNDS_CHECK", bounds_check)
    x, *ws = _inputs(4, (7, 7))
    torch.testing.assert_close(compiled(chain)(x, *ws), chain(x, *ws))


def conv_net():
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
        torch.nn.Conv2d(8, 8, 3, padding=1),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
    ).eval()


def test_a_convolutions_input_is_reused_once_it_has_run(dumps):
    """The last kernel (batch norm, ReLU and the channels-last to contiguous copy) takes the
    memory of the first block's output, dead once the second convolution has read it."""
    model, x = conv_net(), torch.randn(2, 3, 9, 9)
    with torch.no_grad():
        torch.testing.assert_close(compiled(model)(x), model(x))
    assert "# reuses buf" in wrappers(dumps)


def test_a_returned_convolution_result_keeps_its_memory(cold_cache):
    model = conv_net()

    def both(x):
        first = model[:3](x)
        return first, model[3:](first)

    x = torch.randn(2, 3, 9, 9)
    with torch.no_grad():
        for got, want in zip(compiled(both)(x), both(x)):
            torch.testing.assert_close(got, want)


def _residual_sum_read_twice(x, w1, w2):
    # the sum of two products (library results, buffers of its size that die at it) is read
    # by two reductions
    s = torch.relu(x @ w1 + x @ w2)
    return s.sum(0), (s * s).sum(1)


def test_a_sum_that_frees_two_buffers_is_written_once(cold_cache):
    """Inlined into each reduction, the sum would keep both products alive until the last one
    (a residual branch's gradients held to the max-pool backward: a ResNet step's peak on emu
    was 1.03x eager's); written once, they die at its kernel. One kernel per reduction, one for
    the sum."""
    x, w1, w2 = torch.randn(64, 32), torch.randn(32, 48), torch.randn(32, 48)
    got = compiled(_residual_sum_read_twice)(x, w1, w2)
    for g, want in zip(got, _residual_sum_read_twice(x, w1, w2), strict=True):
        torch.testing.assert_close(g, want)
    assert kernel_count(cold_cache) == 3
