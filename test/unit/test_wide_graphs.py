"""Graphs wider or deeper than any kernel should be: a concatenation of a thousand tensors, a
sum over a list of hundreds. Each op is one nested expression in its kernel, so one kernel
for all of them passed Python's recursion limit, or (bounds-checked: 3 arguments a tensor)
ctypes' 1024 arguments. They are split into kernels of bounded size and match eager."""

import functools
import operator

import pytest
import torch

from .helpers import compiled, warm_cache  # noqa: F401  (fixture)


def doubled_and_concatenated(*xs):
    return torch.cat([x * 2 for x in xs], dim=1) + 1


def summed(*xs):
    return functools.reduce(operator.add, xs) * 2


def inputs(count, generator):
    return [
        torch.randn(2, (i % 3) + 1, generator=generator, requires_grad=True) for i in range(count)
    ]


@pytest.mark.parametrize(
    "fn, count, bounds_check",
    [(doubled_and_concatenated, 400, "1"), (summed, 400, "0")],
    ids=["cat-400-bounds-checked", "sum-400"],
)
def test_wide_and_deep_graphs_match_eager_with_gradients(
    warm_cache, monkeypatch, fn, count, bounds_check
):
    monkeypatch.setenv("DICP_BOUNDS_CHECK", bounds_check)
    generator = torch.Generator().manual_seed(6)
    xs = (
        inputs(count, generator)
        if fn is doubled_and_concatenated
        else [torch.randn(2, 3, generator=generator, requires_grad=True) for _ in range(count)]
    )
    got = compiled(fn)(*xs)
    grad = torch.randn(got.shape, generator=generator)
    got_grads = torch.autograd.grad(got, xs, grad)
    want = fn(*xs)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got_grads, torch.autograd.grad(want, xs, grad))
