"""A max pool's gradient where its windows tile the input (as wide as their stride, undilated,
no element past the last window): each element takes its own window's gradient if that window
picked it, as a lazy value fused into the kernel that reads it (lowering_pool's
_picked_in_own_window). Elsewhere, zeros plus a scatter of each window's gradient. Both must
equal eager's gradient exactly: values on a grid (windows with equal maxima), a NaN and a
-inf; sizes 1, odd and even; NCHW and channels-last; 2-d and 3-d; static and dynamic."""

import pytest
import torch
import torch.nn.functional as F

from .helpers import cold_cache, compiled, kernel_sources  # noqa: F401  (fixture)
from .test_channels_last_kernels import strict, with_ties_and_specials  # noqa: F401  (fixture)


def grid_values(shape, channels_last):
    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    return with_ties_and_specials(shape, memory_format)


POOLS = {
    # name -> (input shape, kernel, stride, padding, ceil_mode); the first four tile
    "2x2 even": ((2, 3, 8, 6), 2, 2, 0, False),
    "3x3 stride 3 padded": ((2, 5, 7, 8), 3, 3, 1, False),
    "2x2 ceil mode odd": ((1, 3, 5, 7), 2, 2, 0, True),
    "one element": ((1, 1, 1, 1), 1, 1, 0, False),
    "2x2 odd floor": ((2, 3, 5, 7), 2, 2, 0, False),  # the last row and column: no window
    "3x3 stride 2": ((2, 3, 7, 7), 3, 2, 1, False),  # overlapping windows
}


def relu_pool_loss(kernel, stride, padding, ceil_mode):
    def fn(x, weight):
        y = F.max_pool2d(torch.relu(x), kernel, stride, padding, ceil_mode=ceil_mode)
        return (y * weight).sum()

    return fn


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
@pytest.mark.parametrize("pool", POOLS.values(), ids=POOLS)
def test_gradients_equal_eagers(strict, pool, channels_last):
    shape, *window = pool
    fn = relu_pool_loss(*window)
    x = grid_values(shape, channels_last)
    with torch.no_grad():
        out = F.max_pool2d(x, *window[:3], ceil_mode=window[3])
    weight = torch.randn(out.shape)
    grads = []
    for f in (compiled(fn), fn):
        leaf = x.clone().requires_grad_()
        f(leaf, weight).backward()
        grads.append(leaf.grad)
    torch.testing.assert_close(*grads, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("shape", [(2, 3, 4, 6, 8), (1, 2, 3, 5, 7)], ids=["tiled", "odd"])
def test_3d_gradients_equal_eagers(strict, shape):
    x = grid_values(shape, False).requires_grad_()

    def fn(x):
        return F.max_pool3d(x, 2, ceil_mode=True).sum()

    got = torch.autograd.grad(compiled(fn)(x), x)[0]
    want = torch.autograd.grad(fn(x), x)[0]
    torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_dynamic_sizes_stay_right(strict):
    fn = relu_pool_loss(2, 2, 0, False)
    compiled_fn = compiled(fn, dynamic=True)
    for shape in [(2, 3, 8, 6), (3, 3, 5, 7), (1, 3, 10, 12)]:
        x = grid_values(shape, False)
        weight = torch.randn(shape[0], shape[1], shape[2] // 2, shape[3] // 2)
        grads = []
        for f in (compiled_fn, fn):
            leaf = x.clone().requires_grad_()
            f(leaf, weight).backward()
            grads.append(leaf.grad)
        torch.testing.assert_close(*grads, rtol=0, atol=0)


def test_tiled_windows_scatter_nothing(strict):
    """The gradient of a tiling pool is read where it is needed: no kernel zeroes a buffer
    for it or scatters into one (a computed index, checked by wrap_index)."""
    fn = relu_pool_loss(2, 2, 0, False)
    x = grid_values((2, 3, 8, 6), False).requires_grad_()
    compiled(fn)(x, torch.randn(2, 3, 4, 3)).backward()
    assert "wrap_index" not in kernel_sources(strict)
