"""Softmax divides by its row sum as eager's kernel does: one reciprocal per row, then a
multiplication per element (pattern_replacement.softmax_division_*). That is within an ulp
of the quotient only because the sum lies in [1, row length]; any other division by a
row-wise value keeps its division, since 1 / d of a denormal d is inf."""

import pytest
import torch

from .helpers import cold_cache, compiled, kernel_sources  # noqa: F401  (fixture)

RECIPROCAL = "(float(1) / "


def _rows(shape, special=None):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(sum(shape))) * 8
    if special is not None and x.shape[-1] > 1:
        x[0, 0] = special
    return x


@pytest.mark.parametrize("special", [None, float("inf"), -float("inf"), float("nan"), 1e30])
@pytest.mark.parametrize("shape", [(3, 1), (5, 7), (4, 1024), (2, 3, 6)])
def test_softmax_multiplies_by_its_row_sums_reciprocal(cold_cache, shape, special):
    x = _rows(shape, special).requires_grad_()
    fn = lambda t: torch.softmax(t, -1)
    got = compiled(fn)(x)
    torch.testing.assert_close(got, fn(x), equal_nan=True)
    assert RECIPROCAL in kernel_sources(cold_cache)
    grad = torch.randn_like(got)
    torch.testing.assert_close(
        torch.autograd.grad(got, x, grad)[0], torch.autograd.grad(fn(x), x, grad)[0], equal_nan=True
    )


@pytest.mark.parametrize("dim", [0, 1])
def test_softmax_over_an_inner_dim(cold_cache, dim):
    x = _rows((6, 5, 4))
    torch.testing.assert_close(compiled(lambda t: torch.softmax(t, dim))(x), torch.softmax(x, dim))


def test_a_division_by_any_other_row_sum_keeps_its_division(cold_cache):
    """Rows of denormals: 1 / (2e-39) is inf, so a reciprocal would give inf, not 0.5."""
    x = torch.full((4, 2), 1e-39)
    got = compiled(lambda t: t / t.sum(-1, keepdim=True))(x)
    assert torch.equal(got, torch.full((4, 2), 0.5))
    assert RECIPROCAL not in kernel_sources(cold_cache)


def test_softmax_is_as_close_to_exact_as_eager(cold_cache):
    """Within an ulp of eager's largest error against float64 (eager multiplies by the
    reciprocal too; exp's error, amplified by the argument's size, is most of both)."""
    x = torch.randn(64, 1000, generator=torch.Generator().manual_seed(0))
    exact = torch.softmax(x.double(), -1)
    ulp = exact.abs() * torch.finfo(torch.float32).eps

    def largest_error(y):
        return ((y.double() - exact).abs() / ulp).max().item()

    got = compiled(lambda t: torch.softmax(t, -1))(x)
    assert largest_error(got) <= largest_error(torch.softmax(x, -1)) + 1


def safe_softmax(t, bias):
    return torch.ops.aten._safe_softmax(t + bias, -1)


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("shape", [(3, 1), (5, 7), (4, 3, 16)])
def test_safe_softmax_tests_its_rows_with_the_row_max(cold_cache, monkeypatch, shape, dynamic):
    """aten._safe_softmax zeroes rows all -inf (attention with a mask that hides a whole
    row): its any(x != -inf) per row is the softmax's row max != -inf (pattern_replacement.
    unmasked_rows_*), one reduction pass fewer. Rows all -inf, with a NaN, with a +inf, and
    with all but one element -inf equal eager's, with the gradient."""
    monkeypatch.setenv("DICP_DEBUG", "1")
    x = _rows(shape)
    rows = x.view(-1, shape[-1])
    rows[0] = -float("inf")
    rows[-1, 0] = float("nan")
    if rows.shape[0] > 2:
        rows[1, 0], rows[2, 1:] = float("inf"), -float("inf")
    x.requires_grad_()
    bias = torch.randn(shape[-1])
    got = compiled(safe_softmax, dynamic)(x, bias)
    want = safe_softmax(x, bias)
    torch.testing.assert_close(got, want, equal_nan=True)
    grad = torch.randn_like(got)
    torch.testing.assert_close(
        torch.autograd.grad(got, x, grad)[0], torch.autograd.grad(want, x, grad)[0], equal_nan=True
    )
    (forward,) = (cold_cache / "debug").glob("*forward*/vendor_graph.txt")
    assert "ReduceAny" not in forward.read_text() and "opset.Ne" in forward.read_text()
