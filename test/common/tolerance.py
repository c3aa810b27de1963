"""Per-dtype tolerances for comparing compiled results with eager, in one table.

Fused kernels keep intermediates in float registers and may reduce in another order than
eager, so half types differ from eager by a few ulps of the storage type.
"""
import torch

# dtype -> (rtol, atol)
TOLERANCES = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1.3e-5, 1e-5),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (2e-2, 2e-2),
}

# Normalization ops reduce, then divide by a standard deviation: eager's own result is off by
# more than a single op's bound. Measured against float64 (inputs with mean 50, 20 trials):
# fp32 group norm, eager err 1.3e-5 vs dicp 6.3e-6; bf16 layer-norm backward grad_bias,
# eager err 4.3e-2 vs dicp 1.8e-2. The bound covers eager's error, not dicp's.
NORM_TOLERANCES = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1.3e-5, 3e-5),
    torch.float16: (1e-2, 3e-2),
    torch.bfloat16: (2e-2, 5e-2),
}

# Models accumulate many ops; their outputs get a looser bound than a single op.
MODEL_TOLERANCES = {
    torch.float64: (1e-6, 1e-6),
    torch.float32: (1e-3, 1e-3),
    torch.float16: (5e-2, 5e-2),
    torch.bfloat16: (8e-2, 8e-2),
}


# Half-precision models: eager rounds every op to the storage type, so it is itself far from
# exact arithmetic, and an implementation that keeps float intermediates (as fused kernels do)
# differs from eager by more than one table bound while being closer to the truth. Measured on
# bfloat16 weights run in float64: LLaMA logits, eager rmse 0.026 / dicp 0.024 (max 0.11 /
# 0.097); SD latents, eager rmse 0.042 / dicp 0.037 (max 0.18 / 0.15). Such outputs may instead
# pass PyTorch's own accuracy rule (torch._dynamo.utils.same with fp64_ref): root mean square
# error against the float64 run at most this many times eager's.
FP64_ERROR_MULTIPLIER = 2.0


def tolerance_for(dtype, table=TOLERANCES):
    return table.get(dtype, (0.0, 0.0))


def diff_report(actual, expected):
    diff = (actual.double() - expected.double()).abs()
    diff = torch.nan_to_num(diff, nan=0.0)
    return f"max abs diff {diff.max().item():.3e}, mean abs error {diff.mean().item():.3e}"


def assert_close(actual, expected, table=TOLERANCES, dtype=None):
    """Compare with the per-dtype tolerance; exact for integer and bool tensors."""
    actual, expected = torch.as_tensor(actual).cpu(), torch.as_tensor(expected).cpu()
    assert actual.shape == expected.shape, f"shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != {expected.dtype}"
    if not (expected.is_floating_point() or expected.is_complex()):
        assert torch.equal(actual, expected), f"values differ: {diff_report(actual, expected)}"
        return
    rtol, atol = tolerance_for(dtype or expected.dtype, table)
    ok = torch.allclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
    assert ok, f"{expected.dtype} (rtol={rtol}, atol={atol}): {diff_report(actual, expected)}"


def rmse(actual, reference):
    return (actual.double() - reference.double()).pow(2).mean().sqrt().item()


def assert_close_or_as_accurate(actual, expected, reference, table=MODEL_TOLERANCES, dtype=None):
    """Agree with eager within `table`, or be about as accurate as eager against `reference`
    (the same computation in float64): rmse at most FP64_ERROR_MULTIPLIER times eager's."""
    try:
        assert_close(actual, expected, table=table, dtype=dtype)
    except AssertionError as not_close:
        ours, eagers = rmse(actual, reference), rmse(expected, reference)
        assert ours <= FP64_ERROR_MULTIPLIER * eagers, (
            f"{not_close}; against float64, rmse {ours:.3e} exceeds {FP64_ERROR_MULTIPLIER} x "
            f"eager's {eagers:.3e}")
