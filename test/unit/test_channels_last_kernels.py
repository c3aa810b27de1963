"""Kernels that read a channels-last activation channel by channel: a max pool over blocks of
channels (values, indices and layout as eager's, ties going to the first maximum, NaN winning),
and batch-norm statistics summed row by row into per-channel accumulators. Channel counts of
1 (the plain kernels), odd, even and more than one block of 64 channels; windows with padding,
dilation and ceil mode; gradients through both."""

import re

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from .helpers import cold_cache, compiled, kernel_sources  # noqa: F401

NHWC = torch.channels_last


@pytest.fixture
def strict(cold_cache, monkeypatch):
    monkeypatch.setenv("DICP_STRICT", "1")  # a fallback to eager would test nothing
    return cold_cache


def with_ties_and_specials(shape, memory_format):
    """Values on a grid of 0.5 (so windows hold equal maxima), a NaN and a -inf."""
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(shape, generator=g) * 2).round() / 2
    flat = x.view(-1)
    flat[len(flat) // 3] = float("nan")
    flat[len(flat) // 2] = float("-inf")
    return x.contiguous(memory_format=memory_format)


POOLS = {
    # name -> (shape, kernel, stride, padding, dilation, ceil_mode)
    "2x2": ((2, 16, 8, 6), 2, 2, 0, 1, False),
    "odd channels 3x3 padded": ((3, 5, 7, 7), 3, 2, 1, 1, False),
    "two channel blocks": ((1, 70, 5, 6), 2, 1, 0, 1, False),
    "dilated ceil mode": ((2, 6, 9, 8), 2, 2, 0, 2, True),
    "one channel": ((2, 1, 6, 6), 2, 2, 0, 1, False),
    "one pixel": ((4, 3, 1, 1), 1, 1, 0, 1, False),
}


@pytest.mark.parametrize("name", POOLS)
def test_max_pool_of_channels_last_input_matches_eager(strict, name):
    shape, kernel, stride, padding, dilation, ceil_mode = POOLS[name]
    x = with_ties_and_specials(shape, NHWC)

    def fn(x):
        return F.max_pool2d(x, kernel, stride, padding, dilation, ceil_mode, return_indices=True)

    got, want = compiled(fn)(x), fn(x)
    for g, w in zip(got, want):
        assert g.stride() == w.stride()
        torch.testing.assert_close(g, w, equal_nan=True, rtol=0, atol=0)


def test_max_pool_reads_channels_last_input_by_channel_blocks(strict):
    x = with_ties_and_specials((2, 16, 8, 6), NHWC)
    compiled(lambda x: F.max_pool2d(x, 2, return_indices=True))(x)
    source = kernel_sources(strict)
    assert "best_index[" in source  # the arrays of the channel-block kernel
    # picks by ternaries, which g++ vectorizes as blends; dicp::pick's masks kept the loop
    # scalar (3.3x the time)
    assert "dicp::pick" not in source


@pytest.mark.parametrize("name", POOLS)
def test_max_pool_values_alone_match_eager(strict, name):
    """Inference reads only the maxima: the kernel keeps no indices, and the values (ties,
    NaN, -inf, padding) and layout are eager's."""
    shape, kernel, stride, padding, dilation, ceil_mode = POOLS[name]
    x = with_ties_and_specials(shape, NHWC)

    def fn(x):
        return F.max_pool2d(x, kernel, stride, padding, dilation, ceil_mode)

    with torch.no_grad():
        got, want = compiled(fn)(x), fn(x)
    assert got.stride() == want.stride()
    torch.testing.assert_close(got, want, equal_nan=True, rtol=0, atol=0)
    if shape[1] > 1:  # one channel: not the channel-block kernel
        assert "best_index" not in kernel_sources(strict)


def test_max_pool_values_alone_under_dynamic_shapes_match_eager(strict):
    fn = compiled(lambda x: F.max_pool2d(x, 3, 2, 1), dynamic=True)
    for size in (5, 8):
        x = with_ties_and_specials((size - 4, 6, size, size + 1), NHWC)
        with torch.no_grad():
            torch.testing.assert_close(
                fn(x), F.max_pool2d(x, 3, 2, 1), equal_nan=True, rtol=0, atol=0
            )


def test_max_pool_3d_of_channels_last_input_matches_eager(strict):
    x = with_ties_and_specials((2, 5, 5, 4, 6), torch.channels_last_3d)

    def fn(x):
        return F.max_pool3d(x, 2, (1, 2, 2), 1, return_indices=True)

    got, want = compiled(fn)(x), fn(x)
    for g, w in zip(got, want):
        assert g.stride() == w.stride()
        torch.testing.assert_close(g, w, equal_nan=True, rtol=0, atol=0)


@pytest.mark.parametrize("batch", [1, 2, 3])
@pytest.mark.parametrize("channels", [1, 3, 16, 70])
def test_max_pool_gradient_of_channels_last_input_matches_eager(strict, channels, batch):
    """Overlapping windows (3x3, stride 2) picking one element more than once: the scatter,
    run pixel by pixel with the channels inside, adds each element's gradients in eager's
    order."""
    g = torch.Generator().manual_seed(1)
    x = (torch.randn(batch, channels, 7, 6, generator=g).round()).contiguous(memory_format=NHWC)
    weight = torch.randn(batch, channels, 4, 3, generator=g)  # the pool's output shape

    def loss(x):
        return (F.max_pool2d(x, 3, 2, 1) * weight).sum()

    got = torch.autograd.grad(compiled(loss)(x.requires_grad_()), x)[0]
    want = torch.autograd.grad(loss(x), x)[0]
    torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_max_pool_3d_gradient_of_channels_last_input_matches_eager(strict):
    x = with_ties_and_specials((3, 5, 5, 4, 7), torch.channels_last_3d)
    weight = torch.randn(3, 5, 3, 2, 4, generator=torch.Generator().manual_seed(2))

    def loss(x):
        return (F.max_pool3d(x, 3, 2, 1) * weight).sum()

    grads = []
    for fn in (compiled(loss), loss):
        leaf = x.clone().requires_grad_()
        grads.append(torch.autograd.grad(fn(leaf), leaf)[0])
    torch.testing.assert_close(*grads, rtol=0, atol=0, equal_nan=True)


def test_max_pool_under_dynamic_shapes_matches_eager(strict):
    fn = compiled(lambda x: F.max_pool2d(x, 2, return_indices=True), dynamic=True)
    for size in (6, 9):
        x = with_ties_and_specials((2, 4, size, size + 1), NHWC)
        for g, w in zip(fn(x), F.max_pool2d(x, 2, return_indices=True)):
            torch.testing.assert_close(g, w, equal_nan=True, rtol=0, atol=0)


@pytest.mark.parametrize("channels", [1, 3, 16, 70])
def test_batch_norm_training_on_channels_last_input_matches_eager(strict, channels):
    torch.manual_seed(0)
    norm = nn.BatchNorm2d(channels)
    x = torch.randn(3, channels, 5, 7).contiguous(memory_format=NHWC) * 3 + 1
    x.requires_grad_()
    target = torch.randn(3, channels, 5, 7)

    def loss(x):
        return (torch.relu(norm(x)) * target).sum()

    got = torch.autograd.grad(compiled(loss)(x), [x, norm.weight, norm.bias])
    want = torch.autograd.grad(loss(x), [x, norm.weight, norm.bias])
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_over_batch_and_positions_of_channels_last_input_matches_eager(strict, keepdim):
    x = torch.randn(5, 70, 3, 9).contiguous(memory_format=NHWC)

    def fn(x):
        return (x * x).sum((0, 2, 3), keepdim=keepdim), x.sum((0, 2, 3), keepdim=keepdim)

    got, want = compiled(fn)(x), fn(x)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
    # summed row by row, channels innermost, both sums in one kernel
    assert "column_acc1[" in kernel_sources(strict)


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("channels", [1, 3, 16, 70])
def test_column_sums_over_the_same_rows_share_a_kernel(strict, channels, dynamic):
    """Sums of different values and dtypes over the same rows of a channels-last activation
    (a batch norm backward's two), one of them read by two consumers, computed by one kernel,
    and a sum over other rows by another; each equals eager's."""
    torch.manual_seed(0)
    x = torch.randn(4, channels, 3, 5).contiguous(memory_format=NHWC)
    y = torch.randn(4, channels, 3, 5).contiguous(memory_format=NHWC)

    def fn(x, y):
        first = (x * y).sum((0, 2, 3))
        second = (y.half() * 2).sum((0, 2, 3), dtype=torch.float16)
        other = x.sum((0, 1))
        return first, first * 2, x * (first * 3).view(1, -1, 1, 1), second, other

    got, want = compiled(fn, dynamic=dynamic)(x, y), fn(x, y)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-3, atol=1e-3)
    if channels > 1 and not dynamic:  # symbolic strides: the channel sums loop per channel
        assert "column_acc1[" in kernel_sources(strict)


@pytest.mark.parametrize(
    "shape",
    [(16, 16, 32, 32), (3, 70, 16, 17), (11, 5, 32, 32)],
    ids=["8 chunks of the batch", "3 chunks, two channel blocks", "2 chunks of the height"],
)
def test_column_sums_of_many_rows_in_parallel_chunks(strict, shape):
    """Sums over the rows of a channels-last activation with too few channel blocks for the
    threads: chunks of rows summed in parallel, then the chunks' partial sums added. Each
    sum and its gradient against float64 eager, no further off than float32 eager."""
    torch.manual_seed(0)
    x = torch.randn(shape).contiguous(memory_format=NHWC).requires_grad_()
    y = torch.randn(shape).contiguous(memory_format=NHWC) + 3

    def fn(x, y):
        return x.sum((0, 2, 3)), (x * y).sum((0, 2, 3))

    got = compiled(fn)(x, y)
    want, exact = fn(x, y), fn(x.double(), y.double())
    for g, w, e in zip(got, want, exact, strict=True):
        assert (g.double() - e).abs().max() <= 2 * (w.double() - e).abs().max() + 1e-6
    weights = [torch.randn(shape[1]) for _ in got]
    grads = [
        torch.autograd.grad(sum((o * w).sum() for o, w in zip(out, weights)), x)[0]
        for out in (got, want)
    ]
    torch.testing.assert_close(*grads)
    chunk_loop = r"for \(int64_t r\d+ = (?!0L;)"  # a row loop over one chunk's rows
    assert re.search(chunk_loop, kernel_sources(strict))
