"""The accuracy rules: agree with eager, or be about as accurate as eager is against float64
(models: root mean square error; ops: element by element)."""

import pytest
import torch

from ..common.accuracy import recorded_reference, recording_eager_calls
from ..common.tolerance import (
    FP64_ERROR_MULTIPLIER,
    assert_close,
    assert_close_or_as_accurate,
    fp64_multiplier,
)

REFERENCE = torch.linspace(-10, 10, 1000, dtype=torch.float64)
EAGER_NOISE = 0.1 * torch.sin(torch.arange(1000, dtype=torch.float64) * 1.7)


def test_closer_to_float64_than_eager_passes_outside_the_table():
    eager = (REFERENCE + EAGER_NOISE).bfloat16()
    ours = (REFERENCE - 0.5 * EAGER_NOISE).bfloat16()  # 0.15 from eager, beyond 0.08
    assert_close_or_as_accurate(ours, eager, REFERENCE)


def test_much_less_accurate_than_eager_fails_and_says_why():
    eager = (REFERENCE + EAGER_NOISE).bfloat16()
    ours = (REFERENCE - (FP64_ERROR_MULTIPLIER + 1) * EAGER_NOISE).bfloat16()
    with pytest.raises(AssertionError, match="exceeds .* eager's"):
        assert_close_or_as_accurate(ours, eager, REFERENCE)


# ---- the op rule: per element, against a float64 run ----------------------------------------


def eager_and_exact():
    """An eager bfloat16 result far (0.1) from exact arithmetic everywhere."""
    return (REFERENCE + EAGER_NOISE).bfloat16(), REFERENCE


def test_op_result_closer_to_float64_than_eager_passes():
    eager, exact = eager_and_exact()
    assert_close(exact.bfloat16(), eager, reference=exact)


def test_op_result_within_the_multiple_of_eagers_error_passes():
    eager, exact = eager_and_exact()
    ours = (exact - 1.5 * EAGER_NOISE).bfloat16()  # 1.5x eager's error, beyond the table
    assert_close(ours, eager, reference=exact)


def test_op_result_beyond_the_multiple_of_eagers_error_fails():
    eager, exact = eager_and_exact()
    ours = (exact - (fp64_multiplier(eager) + 0.5) * EAGER_NOISE).bfloat16()
    with pytest.raises(AssertionError, match="rmse .* exceeds 3.0 x eager's"):
        assert_close(ours, eager, reference=exact)


def test_one_wrong_element_fails_even_where_eager_is_far_from_exact():
    eager, exact = eager_and_exact()
    ours = (exact - 0.5 * EAGER_NOISE).bfloat16()  # more accurate than eager...
    ours[123] += 1.0  # ...but for one element
    with pytest.raises(AssertionError, match=r"largest error .* worst at \(123,\)"):
        assert_close(ours, eager, reference=exact)


def test_without_a_reference_the_table_decides():
    eager, exact = eager_and_exact()
    with pytest.raises(AssertionError, match="rtol="):
        assert_close(exact.bfloat16(), eager)


def test_eager_overflow_does_not_excuse_a_wrong_infinity():
    exact = torch.tensor([1e5, 1.0], dtype=torch.float64)
    eager = torch.tensor([float("inf"), 1.0], dtype=torch.float16)
    with pytest.raises(AssertionError):
        assert_close(
            torch.tensor([-float("inf"), 1.0], dtype=torch.float16), eager, reference=exact
        )


# ---- float64 references of recorded eager calls ---------------------------------------------


class Cumsum(torch.nn.Module):
    def forward(self, x):
        return torch.cumsum(x, 0), x.sum()


def test_recorded_eager_call_gives_the_float64_reference():
    x = torch.randn(1000, dtype=torch.float16)
    with recording_eager_calls(Cumsum()) as model:
        cumsum, total = model(x)
        assert_close(recorded_reference(total), x.double().sum())
        assert_close(recorded_reference(cumsum), x.double().cumsum(0))
        assert recorded_reference(x) is None  # not an output
    assert recorded_reference(total) is None  # recording ended


class AddInPlace(torch.nn.Module):
    def forward(self, x):
        return x.add_(1).as_strided((2,), (3,), 1)


def test_reference_sees_inputs_before_the_call_in_their_storage_layout():
    base = torch.arange(12, dtype=torch.float32)
    x = base[2:].view(2, 5).t()  # offset 2, transposed
    with recording_eager_calls(AddInPlace()) as model:
        out = model(x)
        reference = recorded_reference(out)
    assert reference.dtype == torch.float64
    # as_strided read the same storage elements: base[1] outside the view, base[4] inside
    assert torch.equal(reference, torch.tensor([1.0, 5.0], dtype=torch.float64))
    assert torch.equal(out, torch.tensor([1.0, 5.0]))
    assert base[2].item() == 3.0  # the float64 run wrote to copies, not to eager's inputs
