"""A compiled module's backward that mixes layouts: a convolution runs channels-last inside
the graph, while AOTAutograd hands the gradient of the module's NCHW output in NCHW. The batch
norm backward's column sums read the gradient through a copy in the activations' layout
(CppCodegen.relayout_transposed_reads), and a tiling max pool's lazy gradient reads a copy
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


def stem(channels, pool):
    torch.manual_seed(0)
    layers = [nn.Conv2d(3, channels, 3, 1, 1, bias=False), nn.BatchNorm2d(channels), nn.ReLU()]
    return nn.Sequential(*layers, *([nn.MaxPool2d(2)] if pool else [])).train()


def gradients(model, x, weight):
    """The input's and the parameters' gradients of (model(x) * weight).sum()."""
    leaf = x.clone().requires_grad_()
    model.zero_grad()
    (model(leaf) * weight).sum().backward()
    return [leaf.grad, *(p.grad.clone() for p in model.parameters())]


def kernels(cache):
    return re.split(r'(?=extern "C" void kernel_)', kernel_sources(cache))


@pytest.mark.parametrize("pool", [False, True], ids=["bn-relu", "bn-relu-pool"])
@pytest.mark.parametrize("channels", [1, 5, 16])
def test_gradients_with_an_nchw_output_gradient_equal_eagers(strict, channels, pool):
    model = stem(channels, pool)
    x = torch.randn(4, 3, 12, 10)
    side = (6, 5) if pool else (12, 10)
    weight = torch.randn(4, channels, *side)  # NCHW: the tangent AOTAutograd hands over
    got = gradients(torch.compile(model, backend="new_backendgraph"), x, weight)
    want = gradients(model, x, weight)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("pool", [False, True], ids=["bn-relu", "bn-relu-pool"])
def test_only_a_copy_reads_the_nchw_gradient(strict, pool):
    """The tangent is read by one kernel, which copies it by tiles into the layout the
    batch norm backward and the max pool's saved indices have."""
    model = stem(16, pool)
    torch._dynamo.reset()
    side = (8, 8) if pool else (16, 16)
    gradients(
        torch.compile(model, backend="new_backendgraph"),
        torch.randn(2, 3, 16, 16),
        torch.randn(2, 16, *side),
    )
    readers = [k for k in kernels(strict) if "in_tangents" in k]
    assert len(readers) == 1 and "tile[" in readers[0], readers


@pytest.mark.parametrize("pool", [False, True], ids=["bn-relu", "bn-relu-pool"])
def test_dynamic_sizes_keep_eagers_gradients(strict, pool):
    model = stem(6, pool)
    compiled_model = torch.compile(model, backend="new_backendgraph", dynamic=True)
    torch._dynamo.reset()
    for batch, height, width in [(2, 8, 6), (3, 10, 14), (1, 4, 4)]:
        x = torch.randn(batch, 3, height, width)
        side = (height // 2, width // 2) if pool else (height, width)
        weight = torch.randn(batch, 6, *side)
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
