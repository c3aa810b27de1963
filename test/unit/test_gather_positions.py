"""Gathers address their element through a 32-bit computed term where every valid index keeps
it in int32's range (kernel.KernelBuilder._narrowed): g++ ran a vector loop whose load went
through a 64-bit computed index with scalar code (a Swin window softmax with its relative-
position bias, rows of 16: 425 us against 137 us). The values stay eager's; a term that could
leave int32, or whose size is a symbol, keeps 64 bits."""

import pytest
import sympy
import torch

from dicp.vendor.new_backendGraph.codegen import loop_ir as L
from dicp.vendor.new_backendGraph.codegen.kernel import KernelBuilder
from dicp.vendor.new_backendGraph.codegen.sym import Narrow32, loop_index

from .helpers import cold_cache, compiled, kernel_sources  # noqa: F401  (fixture)


def window_softmax(scores, table, index):
    """Swin's window attention: a bias gathered from `table` through `index` per position."""
    bias = table[index.view(-1)].view(*index.shape, -1).permute(2, 0, 1)
    return torch.softmax(scores + bias, dim=-1)


@pytest.mark.parametrize("window", [1, 3, 4])
def test_a_gathered_bias_is_eager_and_addressed_in_32_bits(cold_cache, window):
    """Sizes 1, odd and even; indices that repeat and negative ones (from the end)."""
    gen = torch.Generator().manual_seed(0)
    n = window * window
    scores = torch.randn(5, 2, n, n, generator=gen, requires_grad=True)
    table = torch.randn(2 * n - 1, 2, generator=gen, requires_grad=True)
    index = torch.randint(-(2 * n - 1), 2 * n - 1, (n, n), generator=gen)

    def loss(scores, table):
        return (window_softmax(scores, table, index) * torch.arange(n)).sum()

    expected = loss(scores, table), *torch.autograd.grad(loss(scores, table), (scores, table))
    out = compiled(loss)(scores, table)
    got = out, *torch.autograd.grad(out, (scores, table))
    for value, reference in zip(got, expected):
        torch.testing.assert_close(value, reference)
    assert "static_cast<int32_t>(" in kernel_sources(cold_cache)


def _builder_with_index(size):
    builder = KernelBuilder("k", loop_index(2))
    symbol = builder.computed_index(L.Const(0, "int64_t"), size, "index")
    return builder, symbol


def test_a_term_that_can_leave_int32_keeps_64_bits():
    i0, i1 = loop_index(2)
    builder, t = _builder_with_index(1 << 20)
    assert builder._narrowed(i1 + 2047 * t) == i1 + Narrow32(2047 * t)
    assert builder._narrowed(i1 + 2048 * t) == i1 + 2048 * t  # 2048 * 2**20 = 2**31
    assert builder._narrowed(i0 + i1 * t) == i0 + i1 * t  # a loop variable in the term


def test_a_symbolic_size_keeps_64_bits():
    i0, i1 = loop_index(2)
    builder, t = _builder_with_index(sympy.Symbol("s0", integer=True, positive=True))
    assert builder._narrowed(i1 + 2 * t) == i1 + 2 * t
