"""A float converted to an integer and back is an integer's value: +0 for x in (-1, 0).

Kernels build with -fno-trapping-math, under which g++ 12 rewrites (float)(int64_t)x as
trunc(x), and trunc(-0.9) is -0: x / x.to(int64) came out +inf where eager gives -inf (found by
the fuzzer: mean(x) / mean(x).to(int64)). The runtime header's int_to_float adds +0 to every
integer converted to a float; these tests fail if the compiler drops that add.
"""

import pytest
import torch

FLOAT_TYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
INTEGER_TYPES = [torch.int64, torch.int32, torch.int16, torch.int8]


def _values(dtype):
    """-3 to 3 in steps of 1/6: values in (-1, 0), their negatives, 0 and whole numbers."""
    return torch.linspace(-3.0, 3.0, 37).to(dtype)


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("integer_type", INTEGER_TYPES)
@pytest.mark.parametrize("dtype", FLOAT_TYPES)
def test_division_by_a_truncated_value_keeps_the_sign(dtype, integer_type, dynamic):
    def fn(x):
        return x / x.to(integer_type).to(x.dtype)

    x = _values(dtype)
    torch._dynamo.reset()
    got = torch.compile(fn, backend="new_backendgraph", dynamic=dynamic)(x)
    torch.testing.assert_close(got, fn(x), equal_nan=True)


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("dtype", FLOAT_TYPES)
def test_a_reduced_value_round_trips_to_positive_zero(dtype, dynamic):
    """The fuzzer's program: a mean in (-1, 0), truncated, converted back in the same loop."""

    def fn(x):
        mean = x.mean(dim=1, keepdim=True)
        return mean.to(torch.int64).to(x.dtype), mean / mean.to(torch.int64)

    x = -_values(torch.float32).abs().reshape(1, 37)[:, 1:].reshape(4, 9).to(dtype) / 4
    torch._dynamo.reset()
    got_zero, got_quotient = torch.compile(fn, backend="new_backendgraph", dynamic=dynamic)(x)
    want_zero, want_quotient = fn(x)
    assert torch.equal(got_zero.signbit(), want_zero.signbit())
    torch.testing.assert_close(got_quotient, want_quotient, equal_nan=True)
