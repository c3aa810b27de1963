"""Scatters that accumulate into float16/bfloat16 round as eager's kernels do, bit for bit:
index_put_(accumulate=True), index_add with alpha != 1 or into 1 dim and the backward of
indexing round every add in index order; scatter_add and index_add with alpha 1 into 2 or more
dims add in float32 and round once.
Indices repeat (151 adds onto 2 rows), so any other rounding order shows.
A scatter into a half-typed value the graph computes leaves its untouched elements equal to
that value as the graph's other readers of it see it."""

import pytest
import torch

HALF_TYPES = [torch.bfloat16, torch.float16]


def _randn(generator, *shape, dtype):
    return (torch.randn(*shape, generator=generator) * 10).to(dtype)


def _forward_cases(dtype):
    g = torch.Generator().manual_seed(0)
    x, source = _randn(g, 2, 7, dtype=dtype), _randn(g, 151, 7, dtype=dtype)
    rows = torch.randint(0, 2, (151,), generator=g)
    pairs = torch.randint(0, 3, (40, 2), generator=g)
    return {
        "index_put": (
            lambda x, r, s: torch.index_put(x, (r,), s, accumulate=True),
            (x, rows, source),
        ),
        "index_put_2d": (
            lambda x, i, s: torch.index_put(x, (i[:, 0], i[:, 1]), s, True),
            (_randn(g, 3, 3, dtype=dtype), pairs, _randn(g, 40, dtype=dtype)),
        ),
        "index_add": (lambda x, r, s: x.index_add(0, r, s), (x, rows, source)),
        "index_add_1d": (lambda x, r, s: x.index_add(0, r, s), (x[:, 0], rows, source[:, 0])),
        "index_add_alpha_2": (
            lambda x, r, s: x.index_add(1, r, s, alpha=2),
            (_randn(g, 5, 2, dtype=dtype), rows[:9], _randn(g, 5, 9, dtype=dtype)),
        ),
        "scatter_add": (
            lambda x, r, s: x.scatter_add(0, r[:, None].expand(-1, 7), s),
            (x, rows, source),
        ),
    }


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("dtype", HALF_TYPES)
@pytest.mark.parametrize("case", list(_forward_cases(torch.float16)))
def test_accumulating_scatter_rounds_as_eager(case, dtype, dynamic):
    fn, args = _forward_cases(dtype)[case]
    torch._dynamo.reset()
    got = torch.compile(fn, backend="new_backendgraph", dynamic=dynamic)(*args)
    want = fn(*args)
    assert got.dtype == want.dtype and torch.equal(got, want), (
        f"max difference {(got.double() - want.double()).abs().max().item()}"
    )


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("dtype", HALF_TYPES)
def test_indexing_backward_rounds_as_eager(dtype, dynamic):
    g = torch.Generator().manual_seed(1)
    weight = _randn(g, 6, 5, dtype=dtype).requires_grad_()
    rows = torch.randint(0, 6, (31,), generator=g)  # repeats: 31 rows onto 6
    grad = torch.randn(31, 5, generator=g).to(dtype)
    torch._dynamo.reset()
    out = torch.compile(lambda w, i: w[i] * 1.0, backend="new_backendgraph", dynamic=dynamic)(
        weight, rows
    )
    (got,) = torch.autograd.grad(out, weight, grad)
    (want,) = torch.autograd.grad(weight[rows] * 1.0, weight, grad)
    assert torch.equal(got, want), f"max difference {(got - want).abs().max().item()}"


def _scatters_into_computed(dtype):
    g = torch.Generator().manual_seed(2)
    rows = torch.tensor([0, 2, 2])  # rows 1 and 3 untouched
    source = _randn(g, 3, 5, dtype=dtype)
    return {
        "scatter_add": lambda v: v.scatter_add(0, rows[:, None].expand(-1, 5), source),
        "scatter": lambda v: v.scatter(0, rows[:1, None].expand(-1, 5), source[:1]),
        "index_put_accumulate": lambda v: torch.index_put(v, (rows,), source, True),
        "index_put": lambda v: torch.index_put(v, (rows[:2],), source[:2]),
        "index_add_alpha_2": lambda v: v.index_add(0, rows, source, alpha=2),
    }


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("dtype", HALF_TYPES)
@pytest.mark.parametrize("case", list(_scatters_into_computed(torch.float16)))
def test_untouched_elements_equal_the_scattered_value(case, dtype, dynamic):
    """(scatter(v) - v) / 0 is NaN where the scatter left v as it was: a copy of v rounded
    to the half type while v itself was read unrounded made it +-inf there."""
    scatter = _scatters_into_computed(dtype)[case]

    def fn(x, zeros):
        v = torch.log1p(x)
        return (scatter(v) - v) / zeros

    x = torch.rand(4, 5, generator=torch.Generator().manual_seed(3)).to(dtype)
    zeros = torch.zeros(4, 5, dtype=dtype)
    torch._dynamo.reset()
    got = torch.compile(fn, backend="new_backendgraph", dynamic=dynamic)(x, zeros)
    want = fn(x, zeros)
    assert want[1].isnan().all() and want[3].isnan().all()
    torch.testing.assert_close(got, want, equal_nan=True)
