"""Dynamic shapes: one C++ build serves every input size."""

import math
from pathlib import Path

import pytest
import torch

from .helpers import builds, cold_cache, compiled  # noqa: F401  (fixture)

SIZES = [(4, 8), (6, 8), (9, 8)]


def fused(x, y):
    # pointwise chain feeding a reduction, plus a broadcast: one fused loop nest each
    z = torch.tanh(x * 1.375 + y) - 0.0625 * x
    return z.sum(1), (z * z).amax(0), z.mean()


def test_three_sizes_match_eager_with_one_build(cold_cache):
    fn = compiled(fused, dynamic=True)
    before = builds()
    for size in SIZES:
        x, y = torch.randn(size), torch.randn(size[1])
        for got, want in zip(fn(x, y), fused(x, y)):
            torch.testing.assert_close(got, want)
    assert builds() - before == 1


def test_second_dimension_varies_too(cold_cache):
    fn = compiled(fused, dynamic=True)
    for size in [(5, 3), (5, 11), (2, 17)]:
        x, y = torch.randn(size), torch.randn(size[1])
        for got, want in zip(fn(x, y), fused(x, y)):
            torch.testing.assert_close(got, want)


def sliced(x):
    return (x[:, 1:] * 2 + x[:, :-1]).t().contiguous().sum(0)


def test_views_with_symbolic_strides_match_eager(cold_cache):
    fn = compiled(sliced, dynamic=True)
    for size in [(3, 5), (7, 4), (10, 7)]:
        x = torch.randn(size)
        torch.testing.assert_close(fn(x), sliced(x))


def test_retraced_graph_reuses_its_library(cold_cache):
    # a graph traced again (dynamo.reset, or a second model with the same graph) must produce
    # the same source, so the in-process cache serves it without a build
    x, y = torch.randn(5, 8), torch.randn(8)
    compiled(fused, dynamic=True)(x, y)
    before = builds()
    compiled(fused, dynamic=True)(torch.randn(7, 8), y)  # compiled() resets dynamo first
    assert builds() == before


def _windows(x, size):
    batch, height, width, channels = x.shape
    x = x.view(batch, height // size, size, width // size, size, channels)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, size, size, channels)


def _unwindows(windows, size, height, width):
    x = windows.view(-1, height // size, width // size, size, size, windows.shape[-1])
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, height, width, windows.shape[-1])


def shifted_windows(x):
    # Swin's shifted-window partition and reverse: chained reshapes of lazy values
    height, width = x.shape[1:3]
    x = torch.roll(x, shifts=(-2, -2), dims=(1, 2))
    return _unwindows(_windows(x, 4) * 2.0, 4, height, width) + 1.0


def longest_generated_line(cache):
    return max(
        len(line)
        for source in Path(cache).glob("kernels/*/*.cpp")
        for line in source.read_text().splitlines()
    )


def test_chained_window_views_keep_the_source_small(cold_cache):
    # Printed in full at every use, nested size expressions and div/mod index arithmetic
    # once made one line of this kernel 414 KB (27 MB and an 11 GB g++ for a Swin model)
    fn = compiled(shifted_windows, dynamic=True)
    for size in [(2, 8, 8, 3), (1, 12, 16, 5)]:
        x = torch.randn(size)
        torch.testing.assert_close(fn(x), shifted_windows(x))
    assert longest_generated_line(cold_cache) < 5000


# Python arithmetic on symbolic sizes that reaches a kernel as a number, as models write it:
# kornia's antialiased resize blurs with sigma = max(0.001, (h / 11 - 1) / 2)
SIZE_MATH = {
    "true division": lambda h, w: h / w,
    "square root": lambda h, w: math.sqrt(h),
    "float power": lambda h, w: h**-1.5,
    "floor, ceil": lambda h, w: math.floor(h / 3) - math.ceil(w / 3),
    "round": lambda h, w: round(h / 3),
    "int of a float": lambda h, w: int(-h * 0.7),
    "float floor division": lambda h, w: (h * 1.5) // 2,
    "float remainder": lambda h, w: (h * 1.0) % 3,
    "max of floats": lambda h, w: max((h / 11 - 1.0) / 2.0, 0.001),
    "min of mixed": lambda h, w: min(h / 4, w),
    "max of integers": lambda h, w: max(h, w, 3),
    "absolute value": lambda h, w: abs(w - h * 1.25),
    "exp, log, cos": lambda h, w: math.exp(-h / 10) + math.log(h) + math.cos(w),
}


@pytest.mark.parametrize("name", SIZE_MATH)
def test_numbers_computed_from_sizes_match_eager(cold_cache, name):
    """Max and Min printed as int64_t always (max(0.001, 0.27) was 0, silently), a float
    remainder went to an int64_t parameter, and round() had no C++ form."""

    def scaled(x):
        return x * SIZE_MATH[name](*x.shape) + 1

    fn = compiled(scaled, dynamic=True)
    for size in [(17, 4), (29, 9), (12, 5)]:
        x = torch.randn(size, dtype=torch.float64)
        torch.testing.assert_close(fn(x), scaled(x), rtol=1e-12, atol=1e-12)
