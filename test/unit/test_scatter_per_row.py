"""A scatter of one element per row (the index of size 1 along the scattered dim, of the
input's size along the others) as a lazy value: each element is the input's or, where its
row's index picks it, the source's (scatter) or their sum (scatter_add), fused into the kernel
reading it (lowering_indexing._picked_per_row). A cross entropy's backward scatters -1 into
zeros that way. Results must equal eager's exactly: sizes 1, odd and even, rows picking the
same position, dims 0 and -1, half types, static and dynamic; gradients
through it; and no store through a computed index is left."""

import re

import pytest
import torch
import torch.nn.functional as F

from .helpers import cold_cache, compiled, kernel_sources  # noqa: F401  (fixture)
from .test_channels_last_kernels import strict  # noqa: F401  (fixture)


def scatters(x, index, src):
    dim = 1 if x.dim() > 1 else 0
    return (
        torch.scatter(x, dim, index, src),
        torch.scatter(x, dim, index, -2.5),
        torch.scatter_add(x, dim, index, src),
    )


def row_index(shape, dim):
    g = torch.Generator().manual_seed(0)
    sizes = list(shape)
    size, sizes[dim] = sizes[dim], 1
    index = torch.randint(size, sizes, generator=g)
    index.view(-1)[-1] = index.view(-1)[0]  # two rows pick the same position
    return index


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("shape", [(1, 1), (7, 5), (8, 16), (3, 4, 6)])
def test_values_equal_eagers(strict, shape, dynamic):
    x, src = torch.randn(shape), torch.randn(shape)
    index = row_index(shape, 1)
    for got, want in zip(compiled(scatters, dynamic)(x, index, src), scatters(x, index, src)):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_dim_zero(strict):
    x, src = torch.randn(5, 3), torch.randn(2, 3)
    index = row_index((5, 3), 0)

    def fn(x, index, src):
        return torch.scatter(x, 0, index, src), torch.scatter_add(x, 0, index, src)

    for got, want in zip(compiled(fn)(x, index, src), fn(x, index, src)):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_types(strict, dtype):
    x, src = torch.randn(6, 9, dtype=dtype), torch.randn(6, 9, dtype=dtype)
    index = row_index((6, 9), 1)
    for got, want in zip(compiled(scatters)(x, index, src), scatters(x, index, src)):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_gradients_equal_eagers(strict):
    x = torch.randn(7, 5, requires_grad=True)
    src = torch.randn(7, 1, requires_grad=True)
    index = row_index((7, 5), 1)

    def fn(x, src):
        return (torch.scatter_add(x, 1, index, src) * torch.arange(35.0).view(7, 5)).sum()

    got = torch.autograd.grad(compiled(fn)(x, src), (x, src))
    want = torch.autograd.grad(fn(x, src), (x, src))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=0, atol=0)


def test_cross_entropy_backward_stores_through_no_computed_index(strict):
    logits = torch.randn(8, 16, requires_grad=True)
    target = row_index((8, 16), 1).view(-1)
    got = torch.autograd.grad(compiled(F.cross_entropy)(logits, target), logits)[0]
    want = torch.autograd.grad(F.cross_entropy(logits, target), logits)[0]
    torch.testing.assert_close(got, want)
    stores = re.findall(r"\w+\[\(?t\d+\b[^\]]*\] = ", kernel_sources(strict))
    assert stores == []
