"""Loops split where an index divides them (codegen/loop_split.py, sym.simplify_in_loops): a
kernel copying a permuted view back into a merged shape loops over the view's dims, so its
indices have no division left. Values must match eager exactly (they are only moved), for
sizes that split and sizes that do not, with static and dynamic shapes."""

import pytest
import sympy
import torch

from dicp.vendor.new_backendGraph.codegen.sym import IDiv, IMod, simplify_in_loops, index_var

from .helpers import cold_cache, compiled, kernel_sources  # noqa: F401  (fixture)


def heads_merged(x):
    """Attention's (b, h, t, d) result back to (b, t, h * d), plus one so it is a kernel."""
    b, h, t, d = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d) + 1


def heads_split(x, heads=4):
    b, t, width = x.shape
    return x.view(b, t, heads, width // heads).transpose(1, 2).reshape(b * heads, t, -1) * 2


def divisions(source):
    """Index divisions the kernels do: `/` or `%` by a literal inside a subscript."""
    return [
        line
        for line in source.splitlines()
        if "[" in line and any(f"{op} {n}L)" in line for op in "/%" for n in range(2, 1025))
    ]


@pytest.mark.parametrize("shape", [(2, 4, 8, 16), (1, 3, 5, 7), (3, 2, 1, 9), (2, 1, 4, 1)])
def test_merging_heads_reads_without_divisions(cold_cache, shape):
    x = torch.randn(shape)
    got = compiled(heads_merged)(x)
    torch.testing.assert_close(got, heads_merged(x), rtol=0, atol=0)
    assert divisions(kernel_sources(cold_cache)) == []


@pytest.mark.parametrize("shape", [(2, 8, 32), (1, 5, 12), (3, 7, 4)])
def test_splitting_heads_reads_without_divisions(cold_cache, shape):
    x = torch.randn(shape)
    got = compiled(heads_split)(x)
    torch.testing.assert_close(got, heads_split(x), rtol=0, atol=0)
    assert divisions(kernel_sources(cold_cache)) == []


@pytest.mark.parametrize("fn", [heads_merged, lambda x: heads_split(x.flatten(2))])
def test_dynamic_sizes_stay_right(cold_cache, fn):
    compiled_fn = compiled(fn, dynamic=True)
    for shape in [(2, 4, 8, 16), (3, 4, 5, 4), (1, 4, 1, 8)]:
        x = torch.randn(shape)
        torch.testing.assert_close(compiled_fn(x), fn(x), rtol=0, atol=0)


def test_bounds_checked(cold_cache, monkeypatch):
    monkeypatch.setenv("DICP_BOUNDS_CHECK", "1")
    x = torch.randn(2, 3, 5, 8)
    torch.testing.assert_close(compiled(heads_merged)(x), heads_merged(x), rtol=0, atol=0)


i, j = index_var("i", 0), index_var("i", 1)
s0 = sympy.Symbol("s0", integer=True, positive=True)  # a size
u0 = sympy.Symbol("u0", integer=True, nonnegative=True)  # may be 0


@pytest.mark.parametrize(
    "expr, extents, expected",
    [
        (IDiv(64 * i + j, 64), {j: 64}, i),
        (IMod(64 * i + j, 64), {j: 64}, j),
        (IDiv(64 * i + j, 64), {j: 65}, i + IDiv(j, 64)),  # j may reach 64
        (IMod(64 * i + j, 64), {}, IMod(j, 64)),  # j unbounded
        (IMod(IDiv(256 * i + j, 64), 4), {j: 256}, IDiv(j, 64)),
        (IDiv(128 * i + 2 * j + 1, 64), {j: 32}, 2 * i),
        (IDiv(128 * i - j, 64), {j: 32}, IDiv(128 * i - j, 64)),  # a negative remainder
        # a static dim of 64 merged with one of symbolic size s0: the division by 64 goes
        (IDiv(64 * i + j, 64 * s0), {j: 64}, IDiv(i, s0)),
        (IMod(64 * i + j, 64 * s0), {j: 64}, 64 * IMod(i, s0) + j),
        (IDiv(64 * i + j, 64 * s0), {j: 65}, IDiv(64 * i + j, 64 * s0)),  # j may reach 64
        (IDiv(64 * i + j, 64 * s0), {}, IDiv(64 * i + j, 64 * s0)),  # j unbounded
        (IDiv(64 * i + j, 64 * u0), {j: 64}, IDiv(64 * i + j, 64 * u0)),  # u0 may be 0
    ],
)
def test_simplification_rules(expr, extents, expected):
    assert simplify_in_loops(expr, extents) == expected
