"""Per-dtype tolerances for comparing dicp's results with eager PyTorch, in one table.

Autocompare (dicp.bridge.debug.autocompare) and the test suites (test/common/tolerance.py)
both read these tables. Fused kernels keep intermediates in float registers and may reduce in
another order than eager, so half types differ from eager by a few ulps of the storage type.
"""

from dataclasses import dataclass

import torch

# dtype -> (rtol, atol): one op against eager on the same inputs. float64 is far tighter than
# float32's rounding (6e-8), so a float64 op computed in float32 fails (batch norm's training
# statistics were); a float64 result computed in another order is off by ~1e-15.
TOLERANCES = {
    torch.float64: (1e-10, 1e-10),
    torch.float32: (1.3e-5, 1e-5),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (2e-2, 2e-2),
}

# Models (and whole graphs) accumulate many ops; their outputs get a looser bound than one op.
MODEL_TOLERANCES = {
    torch.float64: (1e-6, 1e-6),
    torch.float32: (1e-3, 1e-3),
    torch.float16: (5e-2, 5e-2),
    torch.bfloat16: (8e-2, 8e-2),
}

# Eager rounds every op to the storage type, so it is itself off from exact arithmetic, and an
# implementation that keeps float intermediates (as fused kernels do) or reduces in another order
# can differ from eager by more than the table while being as close to the truth. The arbiter is
# the same computation in float64 (PyTorch's fp64_ref rule, torch._dynamo.utils.same): the
# compiled result's root mean square error against it may be at most a multiple of eager's.
# Models (assert_close_or_as_accurate in test/common/tolerance.py) use FP64_ERROR_MULTIPLIER;
# measured on bfloat16 weights run in float64: LLaMA logits, eager rmse 0.026 / dicp 0.024 (max
# 0.11 / 0.097); SD latents, eager rmse 0.042 / dicp 0.037 (max 0.18 / 0.15). Ops (assert_close)
# take PyTorch's multiplier (fp64_multiplier: 3 for half types and tensors under 1000 elements,
# where rounding noise dominates, else 2) for the root mean square and for the largest error, so
# that one wrong element among many correct ones still fails.
FP64_ERROR_MULTIPLIER = 2.0


def fp64_multiplier(tensor):
    """PyTorch's multiplier in torch._dynamo.utils.same (without its benchmark-only cases)."""
    if tensor.dtype in (torch.float16, torch.bfloat16) or tensor.numel() < 1000:
        return 3.0
    return 2.0


def tolerance_for(dtype, table=TOLERANCES):
    """(rtol, atol) for `dtype`; exact (0, 0) for integer and bool types."""
    return table.get(dtype, (0.0, 0.0))


@dataclass(frozen=True)
class Difference:
    """How far `actual` is from `expected`, and whether that is within the tolerance."""

    max_diff: float
    mean_abs_error: float
    max_rel_error: float
    rtol: float
    atol: float
    close: bool
    mismatched: int = 0  # elements outside the tolerance
    reason: str = ""  # shape or dtype mismatch, if any

    def __str__(self):
        if self.reason:
            return self.reason
        return (
            f"max_diff {self.max_diff:.3e}, MAE {self.mean_abs_error:.3e}, max relative "
            f"error {self.max_rel_error:.3e} ({self.mismatched} elements outside rtol "
            f"{self.rtol:g}, atol {self.atol:g})"
        )


def compare(actual, expected, table=TOLERANCES) -> Difference:
    """Compare two tensors with the per-dtype tolerance (exact for integers and bool).
    NaN matches NaN; infinities must match exactly."""
    actual, expected = torch.as_tensor(actual).detach().cpu(), torch.as_tensor(expected).cpu()
    rtol, atol = tolerance_for(expected.dtype, table)
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        reason = f"{_describe(actual)} where eager gives {_describe(expected)}"
        return Difference(float("inf"), float("inf"), float("inf"), rtol, atol, False, -1, reason)
    if actual.numel() == 0:
        return Difference(0.0, 0.0, 0.0, rtol, atol, True)
    a, e = actual.double(), expected.double()
    ok = torch.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
    diff = torch.nan_to_num((a - e).abs(), nan=0.0, posinf=float("inf"))
    diff = torch.where(ok & ~torch.isfinite(diff), torch.zeros_like(diff), diff)
    finite = torch.isfinite(diff)
    relative = diff / e.abs().clamp_min(torch.finfo(torch.float64).tiny)
    relative = torch.where(diff == 0, torch.zeros_like(relative), relative)
    mean = diff[finite].mean().item() if finite.any() else float("inf")
    return Difference(
        diff.max().item(), mean, relative.max().item(), rtol, atol, bool(ok.all()), int((~ok).sum())
    )


def _describe(t) -> str:
    return f"{str(t.dtype).replace('torch.', '')}{list(t.shape)}"
