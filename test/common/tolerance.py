"""Comparing compiled results with eager: exact for integers, the per-dtype table for floats,
and, where eager itself is further from exact arithmetic than the table, the float64 judge.

The tables and multipliers are dicp's own (dicp/tolerance.py), so the tests and autocompare
judge by the same bounds. No tolerance there is widened to make a test pass: where a compiled
result legitimately differs from eager by more (normalizations, long reductions), it passes by
being as accurate as eager against the same computation in float64.
"""

import torch

from dicp.tolerance import (
    FP64_ERROR_MULTIPLIER,
    MODEL_TOLERANCES,
    TOLERANCES,
    fp64_multiplier,
    tolerance_for,
)

from .accuracy import recorded_reference


def widest(tensor):
    """`tensor` in float64, or complex128 if complex, for error arithmetic."""
    return tensor.to(torch.complex128 if tensor.is_complex() else torch.float64)


def diff_report(actual, expected):
    diff = (widest(actual) - widest(expected)).abs()
    diff = torch.nan_to_num(diff, nan=0.0)
    return f"max abs diff {diff.max().item():.3e}, mean abs error {diff.mean().item():.3e}"


def assert_close(actual, expected, table=TOLERANCES, dtype=None, reference=None):
    """Compare with eager within the per-dtype tolerance; exact for integer and bool tensors.

    A floating result that misses eager's by more than the table may still be as accurate as
    eager, judged against `reference`, the same computation in float64 (in an op test the
    harness computes it from the recorded eager call, test/common/accuracy.py): it passes if
    each element is within the table of eager or of the float64 result, or else if its root
    mean square error and its largest error against float64 are at most fp64_multiplier times
    eager's.
    """
    eager_output = expected  # the object an op test's recorded eager call returned
    actual, expected = torch.as_tensor(actual).cpu(), torch.as_tensor(expected).cpu()
    assert actual.shape == expected.shape, f"shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != {expected.dtype}"
    if not (expected.is_floating_point() or expected.is_complex()):
        assert torch.equal(actual, expected), f"values differ: {diff_report(actual, expected)}"
        return
    rtol, atol = tolerance_for(dtype or expected.dtype, table)
    close = torch.isclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
    if close.all():
        return
    message = f"{expected.dtype} (rtol={rtol}, atol={atol}): {diff_report(actual, expected)}"
    if reference is None:
        reference = recorded_reference(eager_output)
    assert reference is not None, message
    reference = torch.as_tensor(reference).cpu()
    assert reference.shape == expected.shape, (
        f"{message}; the float64 reference has shape {tuple(reference.shape)}"
    )
    near_exact = torch.isclose(
        widest(actual), widest(reference), rtol=rtol, atol=atol, equal_nan=True
    )
    if (close | near_exact).all():
        return
    verdict = as_accurate_as_eager(actual, expected, reference, slack=atol / 10)
    assert verdict is None, f"{message}; against float64, {verdict}"


def as_accurate_as_eager(actual, expected, reference, slack):
    """None if `actual`'s errors against `reference` are at most fp64_multiplier times eager's
    (root mean square and largest), else what is not."""
    ours = (widest(actual) - widest(reference)).abs()
    eagers = (widest(expected) - widest(reference)).abs()
    if not eagers.isfinite().all():
        return "eager's own error is not finite, so it cannot excuse any"
    multiplier = fp64_multiplier(expected)
    for name, measure in ERROR_MEASURES.items():
        mine, theirs = measure(ours), measure(eagers)
        if not mine <= multiplier * theirs + slack:  # also fails on NaN
            worst = torch.nan_to_num(ours, nan=float("inf")).flatten().argmax()
            at = tuple(int(i) for i in torch.unravel_index(worst, ours.shape))
            return (
                f"{name} {mine:.3e} exceeds {multiplier} x eager's {theirs:.3e} "
                f"(+{slack:.1e}); worst at {at}: compiled {actual[at].item():.6g}, eager "
                f"{expected[at].item():.6g}, float64 {reference[at].item():.6g}"
            )
    return None


ERROR_MEASURES = {
    "rmse": lambda error: error.pow(2).mean().sqrt().item(),
    "largest error": lambda error: error.max().item(),
}


def rmse(actual, reference):
    return ERROR_MEASURES["rmse"]((widest(actual) - widest(reference)).abs())


def assert_close_or_as_accurate(actual, expected, reference, table=MODEL_TOLERANCES, dtype=None):
    """Agree with eager within `table`, or be about as accurate as eager against `reference`
    (the same computation in float64): rmse at most FP64_ERROR_MULTIPLIER times eager's."""
    try:
        assert_close(actual, expected, table=table, dtype=dtype)
    except AssertionError as not_close:
        ours, eagers = rmse(actual, reference), rmse(expected, reference)
        assert ours <= FP64_ERROR_MULTIPLIER * eagers, (
            f"{not_close}; against float64, rmse {ours:.3e} exceeds {FP64_ERROR_MULTIPLIER} x "
            f"eager's {eagers:.3e}"
        )
