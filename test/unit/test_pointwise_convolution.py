"""1x1 convolutions over channels-last pixels run as matrix products (convolution.py): the
forward, the input's, weight's and bias's gradients. Each must give ATen's values in ATen's
layout (the kernels after a library call index it with the traced strides: another layout
would be a silent wrong result), at sizes 1, odd and even and strides 1 to 3, each dim its
own; and where the product does not apply, the result is ATen's own."""

import pytest
import torch
import torch.nn as nn

from dicp.vendor.new_backendGraph import convolution
from dicp.vendor.new_backendGraph.opset import ops

from .helpers import cold_cache, compiled  # noqa: F401

aten = torch.ops.aten
NHWC = torch.channels_last

# (batch, in channels, out channels, height, width): ATen runs each with oneDNN (one image
# only from 20,480 elements: convolution.aten_takes_onednn)
SHAPES = [
    (1, 48, 5, 1, 451),
    (3, 17, 1, 5, 4),
    (8, 56, 336, 2, 2),
    (2, 6, 8, 7, 6),
    (4, 2, 3, 9, 9),
]
# float32 products of up to 336 terms in another order than oneDNN's; a layout mix-up is off by
# whole values
TOLERANCE = {"rtol": 1e-4, "atol": 1e-4}


def same_layout(got, want):
    """Equal strides wherever a dim has more than one element (the others address nothing)."""
    return got.shape == want.shape and all(
        g == w for g, w, size in zip(got.stride(), want.stride(), got.shape) if size > 1
    )


def operands(n, cin, cout, h, w, bias):
    x = torch.randn(n, cin, h, w).contiguous(memory_format=NHWC)
    weight = torch.randn(cout, cin, 1, 1)
    return x, weight, torch.randn(cout) if bias else None


def arguments(stride):
    return list(stride), [0, 0], [1, 1], False, [0, 0], 1


STRIDES = [(1, 1), (2, 2), (3, 3), (1, 2), (3, 2)]


@pytest.mark.parametrize("bias", [False, True], ids=["no bias", "bias"])
@pytest.mark.parametrize("stride", STRIDES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_forward_is_atens_in_values_and_layout(shape, stride, bias):
    x, weight, b = operands(*shape, bias)
    args = arguments(stride)
    assert convolution._pixel_product(x, weight, args[0], args[1], args[2], False, 1)
    got = convolution.convolution_kernel(x, weight, b, *args)
    want = aten.convolution.default(x, weight, b, *args)
    assert same_layout(got, want), (got.stride(), want.stride())
    torch.testing.assert_close(got, want, **TOLERANCE)


@pytest.mark.parametrize("mask", [(True, True, True), (True, False, False), (False, True, True)])
@pytest.mark.parametrize("stride", STRIDES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_gradients_are_atens_in_values_and_layout(shape, stride, mask):
    x, weight, _ = operands(*shape, bias=False)
    out = aten.convolution.default(x, weight, None, *arguments(stride))
    for grad in (torch.randn_like(out), torch.randn(out.shape)):  # channels-last, NCHW
        args = ([weight.shape[0]], *arguments(stride), list(mask))
        got = convolution.convolution_backward_kernel(grad, x, weight, *args)
        want = aten.convolution_backward.default(grad, x, weight, *args)
        for g, w in zip(got, want):
            assert (g is None) == (w is None)
            if w is not None:
                assert same_layout(g, w), (g.stride(), w.stride())
                torch.testing.assert_close(g, w, **TOLERANCE)


@pytest.mark.parametrize(
    "case",
    ["padding", "groups", "3x3", "nchw input", "float64", "transposed", "large"],
)
def test_other_convolutions_are_atens_own(case):
    x, weight, bias = operands(2, 4, 4, 5, 5, bias=True)
    stride, padding, dilation, transposed, output_padding, groups = arguments((1, 1))
    if case == "padding":
        padding = [1, 1]
    elif case == "groups":
        weight, groups = weight[:, :2].contiguous(), 2
    elif case == "3x3":
        weight = torch.randn(4, 4, 3, 3)
    elif case == "nchw input":
        x = x.contiguous()
    elif case == "float64":
        x, weight, bias = x.double(), weight.double(), bias.double()
    elif case == "transposed":
        transposed = True
    elif case == "large":  # oneDNN's backward is the faster there
        x, weight, bias = operands(8, 64, 256, 8, 8, bias=True)
    args = (stride, padding, dilation, transposed, output_padding, groups)
    assert not convolution._pixel_product(x, weight, stride, padding, dilation, transposed, groups)
    got = convolution.convolution_kernel(x, weight, bias, *args)
    assert torch.equal(got, aten.convolution.default(x, weight, bias, *args))


def test_compiled_graphs_call_the_product_kernels():
    assert ops.Convolution.runtime_kernel() is convolution.convolution_kernel
    assert ops.ConvolutionBackwardNHWC.runtime_kernel() is (
        convolution.convolution_backward_nhwc_kernel
    )


def separable_block(channels, expanded):
    """MobileNetV2's: a 1x1 expansion, a depthwise 3x3, a 1x1 projection (and a strided 1x1)."""
    return nn.Sequential(
        nn.Conv2d(channels, expanded, 1),
        nn.ReLU6(),
        nn.Conv2d(expanded, expanded, 3, padding=1, groups=expanded),
        nn.ReLU6(),
        nn.Conv2d(expanded, channels, 1, bias=False),
        nn.Conv2d(channels, channels, 1, stride=2),
    )


@pytest.mark.parametrize("size", [1, 5, 8])
def test_a_separable_block_trains_as_eager_does(cold_cache, size):
    torch.manual_seed(0)
    block = separable_block(6, 24)
    x = torch.randn(3, 6, size, size).contiguous(memory_format=NHWC).requires_grad_()
    got = compiled(block)(x)
    grad = torch.randn_like(got)
    got_grads = torch.autograd.grad(got, [x, *block.parameters()], grad)
    want = block(x)
    want_grads = torch.autograd.grad(want, [x, *block.parameters()], grad)
    assert same_layout(got, want)
    torch.testing.assert_close(got, want, **TOLERANCE)
    for g, w in zip(got_grads, want_grads):
        assert same_layout(g, w), (g.stride(), w.stride())
        torch.testing.assert_close(g, w, **TOLERANCE)
