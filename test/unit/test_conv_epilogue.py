"""Per-channel affine ops and a ReLU after a convolution fold into one FusedConvolution
(conv_epilogue.py): weight * S, bias * S + B, ReLU applied by oneDNN as it writes. Results
match eager's; what is not per-channel affine in the convolution's result alone stays as it
was."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from dicp.vendor.new_backendGraph import convolution

from .helpers import cold_cache, compiled, dumps  # noqa: F401  (fixtures)
from .helpers import wrapper_sources as wrappers

FUSED = "vendor_ops['FusedConvolution']"


def trained_batch_norm(norm):
    with torch.no_grad():  # statistics of a trained net, so the normalization matters
        norm.running_mean.uniform_(-1, 1)
        norm.running_var.uniform_(0.1, 4)
        norm.weight.uniform_(0.5, 2)
        norm.bias.uniform_(-1, 1)
    return norm


def conv_bn_relu(dims, bias=False, groups=1, **conv_args):
    conv = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}[dims]
    norm = {1: nn.BatchNorm1d, 2: nn.BatchNorm2d, 3: nn.BatchNorm3d}[dims]
    return nn.Sequential(
        conv(4, 6, 3, bias=bias, groups=groups, **conv_args), trained_batch_norm(norm(6)), nn.ReLU()
    ).eval()


def check(fn, *args, dynamic=False, rtol=1.3e-6, atol=1e-5):
    with torch.no_grad():
        got, expected = compiled(fn, dynamic)(*args), fn(*args)
    torch.testing.assert_close(got, expected, rtol=rtol, atol=atol)
    assert got.stride() == expected.stride()


@pytest.mark.parametrize(
    "dims, size", [(1, (3, 4, 17)), (2, (2, 4, 9, 8)), (2, (1, 4, 1, 1)), (3, (2, 4, 5, 6, 7))]
)
@pytest.mark.parametrize("dynamic", [False, True])
def test_batch_norm_and_relu_fold_into_the_convolution(dumps, dims, size, dynamic):
    model = conv_bn_relu(dims, padding=1)
    check(model, torch.randn(size), dynamic=dynamic)
    assert FUSED in wrappers(dumps)
    after = wrappers(dumps).split(FUSED)[1].splitlines()
    # no batch norm after it: at most a copy into eager's layout, reading the result alone
    assert all(line.count(".data_ptr()") <= 2 for line in after if "kernels.kernel_" in line)


@pytest.mark.parametrize(
    "conv_args", [dict(bias=True), dict(groups=2), dict(stride=2), dict(dilation=2, padding=2)]
)
def test_convolution_forms(dumps, conv_args):
    check(conv_bn_relu(2, **conv_args), torch.randn(2, 4, 11, 10))
    assert FUSED in wrappers(dumps)


def test_channels_last_input(dumps):
    x = torch.randn(2, 4, 9, 8).contiguous(memory_format=torch.channels_last)
    check(conv_bn_relu(2, padding=1), x)
    assert FUSED in wrappers(dumps)


W, T, T1 = torch.randn(6, 4, 3, 3), torch.rand(6, 1, 1) + 0.5, torch.randn(1, 1, 1)
CHAINS = {
    "scale then shift": lambda y: y * 2.0 - T,
    "shift minus y": lambda y: T - y,
    "shift minus shifted y": lambda y: T - (y * T + 1.0),
    "divided": lambda y: y / T,
    "negated": lambda y: -y + T,
    "number shift": lambda y: F.relu(y + 3.0),
    "one-element tensor": lambda y: y * T1 + T1,
    "zero-dim tensor": lambda y: y * torch.tensor(1.5) - torch.tensor(0.25),
    "leading one": lambda y: y * T.view(1, 6, 1, 1) + 1,
}


@pytest.mark.parametrize("chain", CHAINS, ids=list(CHAINS))
def test_per_channel_chains_fold(dumps, chain):
    def fn(x):
        return CHAINS[chain](F.conv2d(x, W, padding=1))

    check(fn, torch.randn(2, 4, 7, 9))
    assert FUSED in wrappers(dumps)


NOT_FOLDED = {
    # the operand reads the convolution's result: an instance norm over a batch of one
    "operand of the result": lambda y: y - y.mean((0, 2, 3), keepdim=True),
    "divided by y": lambda y: T / y,
    "y times y": lambda y: y * y,
    "per pixel": lambda y: y * torch.linspace(0.5, 2, 9),
    "float64 operand": lambda y: y * T.double(),
}


@pytest.mark.parametrize("chain", NOT_FOLDED, ids=list(NOT_FOLDED))
def test_other_epilogues_stay_kernels(dumps, chain):
    def fn(x):  # a positive result: T / y stays well-conditioned
        return NOT_FOLDED[chain](F.conv2d(x.abs(), W.abs(), padding=1))

    check(fn, torch.randn(1, 4, 7, 9))
    assert FUSED not in wrappers(dumps)


def test_a_value_read_twice_ends_the_chain(dumps):
    """y = conv * T is read by two ops: the convolution absorbs the product, and both
    readers read its result."""

    def fn(x):
        y = F.conv2d(x, W, padding=1) * T
        return torch.relu(y) + torch.sigmoid(y)

    check(fn, torch.randn(2, 4, 7, 9))
    assert FUSED in wrappers(dumps)


def test_the_unfolded_result_read_elsewhere_keeps_the_convolution(dumps):
    def fn(x):
        y = F.conv2d(x, W, padding=1)
        return torch.relu(y * T) + y

    check(fn, torch.randn(2, 4, 7, 9))
    assert FUSED not in wrappers(dumps)


def test_training_with_frozen_batch_norm_matches_eager_gradients(cold_cache):
    model = conv_bn_relu(2, padding=1)
    model[0].train()  # the batch norm stays in eval mode, its statistics frozen
    x = torch.randn(2, 4, 9, 8, requires_grad=True)
    torch.manual_seed(0)
    out = compiled(model)(x)
    out.sum().backward()
    got = [x.grad] + [p.grad for p in model.parameters()]
    x.grad = None
    model.zero_grad()
    expected = model(x)
    expected.sum().backward()
    torch.testing.assert_close(out, expected, rtol=1.3e-6, atol=1e-5)
    torch.testing.assert_close(
        got, [x.grad] + [p.grad for p in model.parameters()], rtol=1e-5, atol=1e-5
    )


def test_bounds_checked(dumps, monkeypatch):
    monkeypatch.setenv("DICP_BOUNDS_CHECK", "1")
    check(conv_bn_relu(2, bias=True, padding=1), torch.randn(1, 4, 3, 5))
    assert FUSED in wrappers(dumps)


LAYOUTS = [torch.contiguous_format, torch.channels_last]


@pytest.mark.parametrize("x_format", LAYOUTS)
@pytest.mark.parametrize("weight_format", LAYOUTS)
@pytest.mark.parametrize("relu", [False, True])
def test_kernel_matches_its_reference_values_and_layout(x_format, weight_format, relu):
    """The oneDNN call returns what fused_impl, the shape rule the kernels after it were
    generated for, returns: the same values and the same strides."""
    x = torch.randn(2, 4, 9, 8).contiguous(memory_format=x_format)
    weight = torch.randn(6, 4, 3, 3).contiguous(memory_format=weight_format)
    args = (x, weight, torch.randn(6), [1, 1], [1, 1], [1, 1], 1, False, relu)
    got, expected = convolution.fused(*args), convolution.fused_impl(*args)
    torch.testing.assert_close(got, expected)
    assert got.stride() == expected.stride()


def test_kernel_takes_other_layouts_through_its_reference():
    x = torch.randn(2, 4, 9, 16)[..., ::2]  # strided: not a layout oneDNN is given
    args = (x, torch.randn(6, 4, 3, 3), None, [1, 1], [1, 1], [1, 1], 1, False, True)
    got, expected = convolution.fused(*args), convolution.fused_impl(*args)
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    assert got.stride() == expected.stride()
