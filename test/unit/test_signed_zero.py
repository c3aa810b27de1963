"""The sign of a zero result matches eager's where eager is consistent (1 / x tells +0 from -0):
clamp, clamp_min/max and relu keep x when it equals the bound, amax/amin keep the first of
equal elements. Sizes 1, 3 and 64 take eager's scalar and vector loops. (torch.maximum on a
tie is not checked: eager's vector loop returns the second operand, its scalar loop the first.)
Found by the fuzzer: 1 / clamp(x, -1.5, 0.0) was inf for x = -0.0 where eager gives -inf."""

import pytest
import torch

from .helpers import compiled, warm_cache  # noqa: F401  (fixture)

OPS = {
    "clamp": lambda x: torch.clamp(x, min=-1.5, max=0.0),
    "clamp_negative_zero_bound": lambda x: torch.clamp(x, min=-0.0, max=1.0),
    "clamp_min": lambda x: x.clamp_min(0.0),
    "clamp_max": lambda x: x.clamp_max(0.0),
    "relu": torch.relu,
    "amax": lambda x: torch.amax(torch.stack([x, -x], -1), -1),
    "amin": lambda x: torch.amin(torch.stack([x, -x], -1), -1),
}


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("size", [1, 3, 64])
@pytest.mark.parametrize("name", sorted(OPS))
def test_zero_sign_matches_eager(warm_cache, name, size, dynamic):
    fn = OPS[name]
    x = torch.tensor([0.0, -0.0, 2.0, -2.0]).repeat(size)
    actual, expected = compiled(fn, dynamic)(x), fn(x)
    assert torch.equal(actual, expected)
    assert torch.equal(torch.signbit(actual), torch.signbit(expected)), (actual, expected)


def both_zeros(x):
    """-0.0 and 0.0 in one kernel: Python says -0.0 == 0.0, so a CSE keyed on the number
    itself made the second clamp reuse the first (x = -1 gave -0.0 where eager gives +0.0)."""
    return (
        torch.clamp(x, min=-0.0, max=1.0) + torch.clamp(x, min=0.0, max=1.0) * 0,
        torch.where(x > 5, x, -0.0) - torch.where(x > 5, x, 0.0),
    )


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_zero_constants_of_both_signs_in_one_kernel(warm_cache, dynamic):
    x = torch.tensor([0.0, -0.0, -1.0, 1.0, 7.0])
    for actual, expected in zip(compiled(both_zeros, dynamic)(x), both_zeros(x), strict=True):
        assert torch.equal(actual, expected)
        assert torch.equal(torch.signbit(actual), torch.signbit(expected)), (actual, expected)
