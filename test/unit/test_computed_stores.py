"""Issue 18's repros: kernels storing through computed indices give eager's results.

With AVX-512 and `omp simd` on such a loop, g++ emitted gather/scatter and lost the updates of
colliding iterations; these sizes failed before the loop plan (codegen/loops.py)."""

import pytest
import torch
import torch.nn.functional as F

from .helpers import compiled, warm_cache  # noqa: F401  (fixture)

DYNAMIC = pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])


def grad_of(f, x, dynamic):
    x = x.detach().requires_grad_()
    eager = torch.autograd.grad(f(x), x)[0]
    got = torch.autograd.grad(compiled(f, dynamic)(x), x)[0]
    return got, eager


@DYNAMIC
@pytest.mark.parametrize("size", [7, 8, 16])
def test_max_pool_stem_backward(warm_cache, size, dynamic):
    x = torch.randn(2, 3, size, size)
    got, eager = grad_of(lambda x: F.max_pool2d(x, 3, 2, 1).pow(2).sum(), x, dynamic)
    torch.testing.assert_close(got, eager)


@DYNAMIC
def test_scatter_add_repeated_last_dim(warm_cache, dynamic):
    index = torch.arange(336).reshape(2, 3, 7, 8) % 3
    x = torch.randn(2, 3, 7, 8, requires_grad=True)

    def f(x, index):
        return torch.zeros(2, 3, 7, 3).scatter_add(-1, index, x)

    torch.testing.assert_close(compiled(f, dynamic)(x, index), f(x, index))


@DYNAMIC
def test_nearest_upsample_backward(warm_cache, dynamic):
    x = torch.randn(2, 3, 5, 5)
    got, eager = grad_of(
        lambda x: F.interpolate(x, scale_factor=2, mode="nearest").pow(2).sum(), x, dynamic
    )
    torch.testing.assert_close(got, eager)
