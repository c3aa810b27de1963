"""Row caches (codegen/row_cache.py): a costly value a reduction phase computes over its row
and a later phase reads again is kept in a local array, not computed twice. Softmax's
exp(x - max) is the case: the structural tests count the exps in the kernel's source. Every
case compares with eager, with sizes 1, odd and even; the cases where a cache must not serve
(another index, a mask, dynamic sizes, a row too long) check that the values stay right.
"""

import pytest
import torch
import torch.nn.functional as F

from ..common.tolerance import assert_close
from .helpers import (  # noqa: F401  (fixtures)
    cold_cache,
    compiled,
    compiled_and_eager_grads,
    kernel_sources,
)


def exp_normalized(x):
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)


SHAPES = [(1, 1), (3, 7), (4, 64), (5, 33)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("fn", [exp_normalized, lambda x: torch.softmax(x, -1)])
def test_softmax_computes_exp_once_per_element(cold_cache, fn, shape):
    """(A row of one element has no row loop: the kernel loops over every dim outside.)"""
    x = torch.randn(shape)
    torch.testing.assert_close(compiled(fn)(x), fn(x))
    source = kernel_sources(cold_cache)
    exps = 2 if shape[-1] == 1 else 1
    assert source.count("dicp::exp<float>") == exps and ("row_cache0[" in source) == (exps == 1)


def test_the_cache_is_read_at_the_index_it_was_stored_at(cold_cache):
    """The division reads exp(x - max) rolled along the row by a cat of two slices: at each
    position another element than the sum's loop stored there, so it is computed, not
    served from the cache."""

    def rolled(x):
        e = torch.exp(x - x.amax(-1, keepdim=True))
        return torch.cat([e[:, 1:], e[:, :1]], -1) / e.sum(-1, keepdim=True)

    x = torch.randn(5, 33)
    torch.testing.assert_close(compiled(rolled)(x), rolled(x))


def test_a_value_stored_under_a_condition_is_not_cached(cold_cache):
    """The sum reads each half of the row under the condition of its part of the cat: the
    halves' exps may not fill the array alone; the cat as a whole does."""

    def two_halves(a, b):
        y = torch.cat([a.exp(), b.exp()], -1)
        return y / y.sum(-1, keepdim=True)

    a, b = torch.randn(3, 5), torch.randn(3, 4)
    torch.testing.assert_close(compiled(two_halves)(a, b), two_halves(a, b))


def test_a_value_read_under_a_condition_does_not_fill_the_cache(cold_cache):
    """The sum reads exp(a) only where the cat takes it (its first two columns); the division
    reads all of it. Stored from the sum, the array would miss three columns."""

    def partly(a):
        e = a.exp()
        y = torch.cat([e[:, :2], torch.zeros_like(e[:, 2:])], -1)
        return e / y.sum(-1, keepdim=True)

    a = torch.randn(3, 5)
    torch.testing.assert_close(compiled(partly)(a), partly(a))


def test_a_reduction_over_two_dims_caches_the_whole_plane(cold_cache):
    def plane_softmax(x):
        e = torch.exp(x - x.amax((-2, -1), keepdim=True))
        return e / e.sum((-2, -1), keepdim=True)

    x = torch.randn(3, 5, 6)
    torch.testing.assert_close(compiled(plane_softmax)(x), plane_softmax(x))
    assert kernel_sources(cold_cache).count("dicp::exp<float>") == 1


def test_a_max_phase_fills_the_cache_and_zero_rows_keep_their_sign(cold_cache):
    """The max phase stores exp(x); its zero rescan (all of a row's exps underflow to 0) reads
    the values again in the same phase, computed, not from the half-filled array."""

    def over_max(x):
        e = torch.exp(x)
        return e / e.amax(-1, keepdim=True) + e.amax(-1, keepdim=True)

    x = torch.randn(4, 9)
    x[1] = -200.0
    torch.testing.assert_close(compiled(over_max)(x), over_max(x), equal_nan=True)


def test_a_row_longer_than_the_cache_budget_is_computed_twice(cold_cache):
    x = torch.randn(2, 20001)
    torch.testing.assert_close(compiled(exp_normalized)(x), exp_normalized(x))
    assert "row_cache" not in kernel_sources(cold_cache)


def test_dynamic_rows_are_not_cached_and_stay_right(cold_cache):
    fn = compiled(exp_normalized, dynamic=True)
    for shape in [(2, 9), (5, 16), (1, 1)]:
        x = torch.randn(shape)
        torch.testing.assert_close(fn(x), exp_normalized(x))
    assert "row_cache" not in kernel_sources(cold_cache)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_softmax_in_other_float_types(cold_cache, dtype):
    x = torch.randn(3, 7).to(dtype)
    assert_close(compiled(exp_normalized)(x), exp_normalized(x))


def test_softmax_and_log_softmax_of_one_row_together(cold_cache):
    def both(x):
        return torch.softmax(x, -1) * 2 + torch.log_softmax(x, -1)

    x = torch.randn(4, 33)
    torch.testing.assert_close(compiled(both)(x), both(x))


@pytest.mark.parametrize("bounds_check", ["0", "1"])
def test_attention_probabilities_and_their_gradients(cold_cache, monkeypatch, bounds_check):
    monkeypatch.setenv("DICP_BOUNDS_CHECK", bounds_check)

    class Attention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.query = torch.nn.Linear(16, 16)

        def forward(self, x):
            scores = self.query(x) @ x.transpose(-2, -1) / 4
            return F.gelu(torch.softmax(scores, -1)) @ x

    x = torch.randn(2, 7, 16)
    got, expected = compiled_and_eager_grads(Attention(), x, lambda out: out.pow(2).sum())
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-5)
