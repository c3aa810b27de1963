"""The half-precision model rule: agree with eager, or be about as accurate as eager is."""
import pytest
import torch

from ..common.tolerance import FP64_ERROR_MULTIPLIER, assert_close_or_as_accurate

REFERENCE = torch.linspace(-10, 10, 1000, dtype=torch.float64)
EAGER_NOISE = 0.1 * torch.sin(torch.arange(1000, dtype=torch.float64) * 1.7)


def test_closer_to_float64_than_eager_passes_outside_the_table():
    eager = (REFERENCE + EAGER_NOISE).bfloat16()
    ours = (REFERENCE - 0.5 * EAGER_NOISE).bfloat16()   # 0.15 from eager, beyond 0.08
    assert_close_or_as_accurate(ours, eager, REFERENCE)


def test_much_less_accurate_than_eager_fails_and_says_why():
    eager = (REFERENCE + EAGER_NOISE).bfloat16()
    ours = (REFERENCE - (FP64_ERROR_MULTIPLIER + 1) * EAGER_NOISE).bfloat16()
    with pytest.raises(AssertionError, match="exceeds .* eager's"):
        assert_close_or_as_accurate(ours, eager, REFERENCE)
