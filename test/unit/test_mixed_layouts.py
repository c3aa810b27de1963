"""A compiled module's backward that mixes layouts: a convolution runs channels-last inside
the graph, while AOTAutograd hands the gradient of the module's NCHW output in NCHW. The batch
norm backward's column sums read the gradient through a copy in the activations' layout
(CppCodegen.copy_to_walk), and a tiling max pool's lazy gradient reads a copy
of its NCHW gradient in the saved indices' layout (lowering_pool._in_layout_of): no kernel
but the copy reads the NCHW gradient across channels. Gradients must equal eager's, for
channel counts of 1, odd and even, static and dynamic.

Bools are stored as bytes (ctypes_map): g++ vectorizes no load of a C++ bool, so a kernel
reading a mask takes it through a uint8_t pointer; values written as bools read back as
eager's."""

import re

import pytest
import torch
import torch.nn as nn

from .helpers import cold_cache, compiled, kernel_sources  # noqa: F401  (fixture)
from .test_channels_last_kernels import strict  # noqa: F401  (fixture)


HEADS = {
    "bn-relu": lambda c: [nn.BatchNorm2d(c), nn.ReLU()],
    "bn-relu-pool": lambda c: [nn.BatchNorm2d(c), nn.ReLU(), nn.MaxPool2d(2)],
    # sums over a view of the gradient, [n, groups, c // groups * h * w]
    "gn-silu": lambda c: [nn.GroupNorm(1 if c == 1 else c // 2 if c % 2 == 0 else c, c), nn.SiLU()],
}


def stem(channels, head):
    torch.manual_seed(0)
    conv = nn.Conv2d(3, channels, 3, 1, 1, bias=False)
    return nn.Sequential(conv, *HEADS[head](channels)).train()


def pooled(head, height, width):
    return (height // 2, width // 2) if head.endswith("pool") else (height, width)


def gradients(model, x, weight):
    """The input's and the parameters' gradients of (model(x) * weight).sum()."""
    leaf = x.clone().requires_grad_()
    model.zero_grad()
    (model(leaf) * weight).sum().backward()
    return [leaf.grad, *(p.grad.clone() for p in model.parameters())]


def kernels(cache):
    return re.split(r'(?=extern "C" void kernel_)', kernel_sources(cache))


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("channels", [1, 5, 16])
def test_gradients_with_an_nchw_output_gradient_equal_eagers(strict, channels, head):
    model = stem(channels, head)
    x = torch.randn(4, 3, 12, 10)
    weight = torch.randn(4, channels, *pooled(head, 12, 10))  # NCHW, as AOTAutograd's tangent
    got = gradients(torch.compile(model, backend="new_backendgraph"), x, weight)
    want = gradients(model, x, weight)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("head", HEADS)
def test_only_a_copy_reads_the_nchw_gradient(strict, head):
    """The tangent is read by one kernel, which copies it by tiles into the layout the
    normalization's backward and the max pool's saved indices have."""
    model = stem(16, head)
    torch._dynamo.reset()
    x, weight = torch.randn(2, 3, 16, 16), torch.randn(2, 16, *pooled(head, 16, 16))
    gradients(torch.compile(model, backend="new_backendgraph"), x, weight)
    readers = [k for k in kernels(strict) if "in_tangents" in k]
    assert len(readers) == 1 and "tile[" in readers[0], readers


@pytest.mark.parametrize("head", HEADS)
def test_dynamic_sizes_keep_eagers_gradients(strict, head):
    model = stem(6, head)
    compiled_model = torch.compile(model, backend="new_backendgraph", dynamic=True)
    torch._dynamo.reset()
    for batch, height, width in [(2, 8, 6), (3, 10, 14), (1, 4, 4)]:
        x = torch.randn(batch, 3, height, width)
        weight = torch.randn(batch, 6, *pooled(head, height, width))
        for g, w in zip(gradients(compiled_model, x, weight), gradients(model, x, weight)):
            torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("size", [1, 7, 64, 1001])
def test_masks_read_as_bytes_give_eagers_values(strict, size):
    def fn(x, mask):
        kept = torch.where(mask, x, -x)
        return kept, kept > 0.5, mask.logical_not() & (x < 0)

    x = torch.randn(size)
    mask = torch.rand(size) > 0.5
    for got, want in zip(compiled(fn)(x, mask), fn(x, mask)):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert "const uint8_t* __restrict__ in_arg1_1" in kernel_sources(strict)
    assert "bool*" not in kernel_sources(strict)


@pytest.mark.parametrize("rows", [1, 33, 256])
def test_row_statistics_copy_nothing(strict, rows):
    """A row's maximum read beside the logits walks the row dim, as a column would, but is a
    statistic of the rows summed over: the sum stays a row sum, with no copy of the logits
    (a cross entropy's logsumexp had them copied column-major)."""
    x, target = torch.randn(rows, 300), torch.randint(300, (rows,))

    def fn(x, target):
        return torch.nn.functional.cross_entropy(x, target), torch.logsumexp(x * 2, 1)

    for got, want in zip(compiled(fn)(x, target), fn(x, target)):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert "tile[" not in kernel_sources(strict)
