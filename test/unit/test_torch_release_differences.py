"""Ops whose torch decomposition differs between supported releases run natively on each.

torch's decomposition tables change between releases (docs/torch-versions.md). Three of those
changes reach the conversion table: `max_pool2d_with_indices_backward` and `hann_window` have a
decomposition from torch 2.13 on only (max-pool's bows out under deterministic algorithms), and
`linalg_vector_norm` is in the core table from 2.15 on only. Before they were handled (converters
for the first two, an explicit entry in the backend's decomposition list for the third), torch
2.11 failed the max-pool backward op test in strict mode and ran hann_window as eager fallback,
and every release below 2.15 ran vector norms as eager fallback. The version runner
(test/scripts/torch_versions.sh) runs these on each release.
"""

import pytest
import torch
import torch.nn.functional as F

from dicp.bridge.pipeline.conversion import overloads_of
from dicp.vendor.new_backendGraph import config as backend_config

from ..common.tolerance import assert_close
from .helpers import compiled, torch_setting, warm_cache  # noqa: F401  (fixture)

DYNAMIC = pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])


@pytest.fixture
def strict(warm_cache, monkeypatch):
    """Strict mode: an op that reaches the conversion table without a converter fails."""
    monkeypatch.setenv("DICP_STRICT", "1")


@pytest.fixture(params=[False, True], ids=["default", "deterministic"])
def deterministic(request):
    """torch's own max-pool backward decomposition returns NotImplemented in this mode."""
    enabled, use = torch.are_deterministic_algorithms_enabled, torch.use_deterministic_algorithms
    with torch_setting(enabled, use, request.param) as mode:
        yield mode


def test_each_listed_decomposition_exists_in_this_torch():
    table = backend_config.decompositions()
    missing = [
        str(packet)
        for packet in backend_config.EXTRA_DECOMPOSITIONS
        if not any(overload in table for overload in overloads_of([packet]))
    ]
    assert not missing, (
        f"torch {torch.__version__} has no decomposition for {missing}: "
        "give them a converter instead of listing them in "
        "EXTRA_DECOMPOSITIONS"
    )


def input_grad(f, x, dynamic):
    x = x.detach().requires_grad_()
    eager = torch.autograd.grad(f(x), x)[0]
    got = torch.autograd.grad(compiled(f, dynamic)(x), x)[0]
    return got, eager


# (kernel, stride, padding, dilation, ceil_mode): overlapping windows, padding, ceil_mode and
# dilation, so several windows pick one element and some windows hang over the edge.
POOLS = [(3, 2, 1, 1, False), (3, 1, 1, 1, False), (2, 2, 0, 1, True), (3, 2, 1, 2, True)]
# input sizes 1, odd and even, where the (dilated) window fits the padded input
CASES = [
    (pool, size)
    for pool in POOLS
    for size in (1, 7, 8)
    if (pool[0] - 1) * pool[3] + 1 <= size + 2 * pool[2]
]


def pool_id(case):
    (kernel, stride, padding, dilation, ceil_mode), size = case
    return f"k{kernel}s{stride}p{padding}d{dilation}{'ceil' if ceil_mode else ''}-size{size}"


@DYNAMIC
@pytest.mark.parametrize("case", CASES, ids=pool_id)
def test_max_pool2d_backward(strict, deterministic, case, dynamic):
    (kernel, stride, padding, dilation, ceil_mode), size = case
    # a constant row makes ties: the picked element is the first of its window, as in eager
    x = torch.randn(2, 3, size, size + 1)
    x[:, :, 0] = 0.5

    def f(x):
        return F.max_pool2d(x, kernel, stride, padding, dilation, ceil_mode).pow(2).sum()

    got, eager = input_grad(f, x, dynamic)
    torch.testing.assert_close(got, eager)


@DYNAMIC
@pytest.mark.parametrize("size", [1, 6])
def test_max_pool1d_backward(strict, size, dynamic):
    x = torch.randn(2, 3, size)
    got, eager = input_grad(lambda x: F.max_pool1d(x, 3, 1, 1).pow(2).sum(), x, dynamic)
    torch.testing.assert_close(got, eager)


@DYNAMIC
@pytest.mark.parametrize("ord", [2, 1, 0, 3.5, float("inf"), float("-inf")])
def test_vector_norm(strict, ord, dynamic):
    x = torch.randn(3, 5, 4)
    x[0, 0, 0] = 0

    def f(x):
        return torch.linalg.vector_norm(x, ord, -1), torch.linalg.vector_norm(x, ord, (0, 2), True)

    for got, eager in zip(compiled(f, dynamic)(x), f(x), strict=True):
        torch.testing.assert_close(got, eager)


@DYNAMIC
def test_vector_norm_backward(strict, dynamic):
    got, eager = input_grad(lambda x: x.norm(dim=-1).sum(), torch.randn(4, 7), dynamic)
    torch.testing.assert_close(got, eager)


@pytest.mark.parametrize("length", [1, 2, 5, 8])
@pytest.mark.parametrize("periodic", [True, False], ids=["periodic", "symmetric"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_hann_window(strict, length, periodic, dtype):
    def f(x):
        return x * torch.hann_window(length, periodic, dtype=dtype)

    x = torch.randn(length).to(dtype)
    # eager rounds every step to float16, dicp computes in float32: the per-dtype table
    assert_close(compiled(f)(x), f(x))
