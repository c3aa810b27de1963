"""Sums over rows of contiguous columns (x.sum(0): bias gradients, batch means) run as one
kernel over blocks of 64 columns with an array of accumulators (lowering_reduce._column_sum),
not a phase per column that reads it with the row stride. The blocks are ragged at the end,
the outer loop over blocks is parallel (loops._within_block proves the stores disjoint), and
every case compares with eager, bounds-checked."""

import pytest
import torch
import torch.nn as nn

from ..common.tolerance import assert_close
from .helpers import cold_cache, compiled, compiled_and_eager_grads, kernel_count  # noqa: F401

# (shape, dims): 1, odd and even column counts around the block of 64, leading and middle dims
CASES = [
    ((7, 1), 0),
    ((5, 63), 0),
    ((5, 64), 0),
    ((9, 65), 0),
    ((3, 129), 0),
    ((1, 200), 0),
    ((6, 5, 70), (0, 1)),
    ((4, 6, 66), 1),
    ((3, 5, 67), (0,)),
    ((2000, 130), 0),
]


@pytest.fixture(params=["0", "1"], ids=["plain", "bounds-checked"])
def bounds_check(request, monkeypatch):
    monkeypatch.setenv("DICP_BOUNDS_CHECK", request.param)


@pytest.mark.parametrize("shape,dims", CASES)
def test_column_sums_match_eager(cold_cache, bounds_check, shape, dims):
    x = torch.randn(*shape)
    for fn in (
        lambda x: x.sum(dims),
        lambda x: x.sum(dims, keepdim=True) * x,
        lambda x: x.mean(dims) + 1,
    ):
        assert_close(compiled(fn)(x), fn(x), reference=fn(x.double()))
    column_kernels = any("column_acc" in p.read_text() for p in cold_cache.glob("kernels/*/*.cpp"))
    assert column_kernels == (shape[-1] > 1)  # one column: a plain reduction


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool, torch.bfloat16, torch.float16])
def test_column_sums_in_other_types_match_eager(cold_cache, dtype):
    x = (torch.randn(33, 70) * 4).to(dtype)
    fn = lambda x: x.sum(0)
    assert_close(compiled(fn)(x), fn(x))


def test_column_sums_under_dynamic_shapes_match_eager(cold_cache):
    fn = compiled(lambda x: x.sum(0) * 2, dynamic=True)
    for rows, columns in [(3, 10), (17, 64), (5, 131), (1, 1)]:
        x = torch.randn(rows, columns)
        torch.testing.assert_close(fn(x), x.sum(0) * 2)


def test_bias_gradients_match_eager(cold_cache):
    """A linear layer's bias gradient is the column sum of the output gradient."""
    model = nn.Sequential(nn.Linear(20, 130), nn.GELU(), nn.Linear(130, 70))
    got, want = compiled_and_eager_grads(model, torch.randn(37, 20), lambda y: y.pow(2).sum())
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)


# A keepdim reduction and a view of it: (function, kernels it builds as). The view that only
# drops the kept dims is the reduction without keepdim, written where it belongs; the others
# (another layout, a second use of the keepdim result) keep the reduction as it is.
KEPT_DIMS_VIEWS = {
    "bias gradient": (lambda x: (x * 2).sum(0, keepdim=True).view(-1), 1),
    "max over the middle dim": (lambda x: x.view(3, 4, 5).amax(1, keepdim=True).view(3, 5), 1),
    "whole tensor": (lambda x: x.sum((0, 1), keepdim=True).reshape(()), 1),
    "transposing view": (lambda x: x.view(3, 4, 5).sum(1, keepdim=True).view(5, 3), 2),
    "second use": (lambda x: (lambda s: (s.view(-1), s + 1))(x.sum(0, keepdim=True)), 2),
}


@pytest.mark.parametrize("case", KEPT_DIMS_VIEWS)
def test_a_view_dropping_kept_dims_builds_the_reduction_once(cold_cache, case):
    fn, kernels = KEPT_DIMS_VIEWS[case]
    x = torch.randn(12, 5)
    torch.testing.assert_close(compiled(fn)(x), fn(x))
    assert kernel_count(cold_cache) == kernels


def test_a_view_dropping_kept_dims_under_dynamic_shapes_matches_eager(cold_cache):
    fn = lambda x: (x * 2).sum(0, keepdim=True).view(-1)
    compiled_fn = compiled(fn, dynamic=True)
    for rows, columns in [(3, 10), (17, 64), (1, 1), (5, 131)]:
        x = torch.randn(rows, columns)
        torch.testing.assert_close(compiled_fn(x), fn(x))
