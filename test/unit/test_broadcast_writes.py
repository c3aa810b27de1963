"""A lazy value with a costly op on few elements that a much larger loop reads (batch norm's
rsqrt(var + eps) per channel) is written to memory by a kernel of its own, not recomputed
at every element of the loop (codegen/costs.py: it divides or calls). Values reading a reduction
stay fused."""

import pytest
import torch
import torch.nn as nn

from .helpers import allocates, cold_cache, compiled, dumps  # noqa: F401  (fixtures)
from .helpers import wrapper_sources as wrappers


def conv_bn(channels):
    """A batch norm after the ReLU: right after the convolution it would fold into it
    (conv_epilogue.py)."""
    model = nn.Sequential(
        nn.Conv2d(3, channels, 3, padding=1), nn.ReLU(), nn.BatchNorm2d(channels)
    ).eval()
    with torch.no_grad():  # statistics of a trained net, so the normalization matters
        model[2].running_mean.uniform_(-1, 1)
        model[2].running_var.uniform_(0.1, 4)
    return model


@pytest.mark.parametrize("channels", [1, 3, 8])
def test_batch_norm_scale_is_computed_once_per_channel(dumps, channels):
    model, x = conv_bn(channels), torch.randn(2, 3, 48 * 8 // channels, 48)
    with torch.no_grad():
        torch.testing.assert_close(compiled(model)(x), model(x))
    assert allocates(wrappers(dumps), f"({channels}, 1, 1)")


def test_a_small_loop_recomputes_the_scale(dumps):
    """Under BROADCAST_WRITE_MIN elements another kernel call costs more than it saves."""
    model, x = conv_bn(8), torch.randn(1, 3, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(compiled(model)(x), model(x))
    assert not allocates(wrappers(dumps), "(8, 1, 1)")


@pytest.mark.parametrize("dynamic", [False, True])
def test_scales_of_a_row_reduction_stay_in_its_kernel(dumps, dynamic):
    """Layer norm's rsqrt(var + eps) reads the row's reduction: one kernel, as before."""
    norm, x = nn.LayerNorm(64), torch.randn(1024, 64)
    with torch.no_grad():
        torch.testing.assert_close(compiled(norm, dynamic)(x), norm(x))
    assert wrappers(dumps).count("kernels.kernel_") == 1


def test_a_costly_per_row_value_read_by_a_broadcast(cold_cache):
    """exp of a column vector read by every element of a [rows, 4096] product."""
    fn = lambda x, v: (x * v.exp().sqrt()).sum(-1)
    x, v = torch.randn(16, 4096), torch.randn(16, 1)
    torch.testing.assert_close(compiled(fn)(x, v), fn(x, v))
