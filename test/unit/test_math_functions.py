"""The runtime header's own exp and erf (vectorizable, no libm call) against eager."""
import pytest
import torch

from ..common.utils import assert_close
from .helpers import compiled, warm_cache  # noqa: F401  (fixture)

SPECIAL = [float("-inf"), -1e4, -104.0, -88.0, -87.3, -20.0, -1e-30, 0.0, -0.0, 1e-30, 1e-6,
           20.0, 88.0, 88.5, 89.0, 1e4, float("inf"), float("nan")]


def inputs(low, high):
    dense = torch.linspace(low, high, 20001)
    return torch.cat([dense, torch.tensor(SPECIAL)])


@pytest.mark.parametrize("fn, low, high", [
    (torch.exp, -90.0, 90.0),
    (torch.erf, -6.0, 6.0),
    (torch.sigmoid, -90.0, 90.0),
    (torch.nn.functional.gelu, -10.0, 10.0),
    (torch.nn.functional.silu, -90.0, 90.0),
], ids=["exp", "erf", "sigmoid", "gelu", "silu"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_matches_eager_over_the_range_and_at_special_values(warm_cache, fn, low, high, dtype):
    x = inputs(low, high).to(dtype)
    actual, expected = compiled(fn)(x), fn(x)
    assert torch.equal(actual.isnan(), expected.isnan())
    assert torch.equal(actual.isinf(), expected.isinf())
    assert_close(actual, expected)
