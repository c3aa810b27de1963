"""Comparing one sample's compiled output (and gradients) with eager's, naming the failure kind.

Kinds: `shape`, `dtype`, `value`, `structure` (a different output tree), and `grad` for any of
these in a gradient. Values use the per-dtype tolerance table (dicp/tolerance.py) and, where a
floating result misses eager's by more, the float64 rule of test/common/tolerance.py: it passes
if it is as accurate as eager against the same computation in float64.
"""

import math

import torch
from torch.utils import _pytree as pytree

from dicp.tolerance import tolerance_for

from ..common.tolerance import assert_close, widest


class Mismatch(Exception):
    def __init__(self, kind, detail):
        super().__init__(f"{kind}: {detail}")
        self.kind, self.detail = kind, detail


def leaves(value):
    return pytree.tree_leaves(value)


def check_outputs(actual, expected, reference, what="output"):
    """Raise Mismatch unless `actual` matches `expected` leaf by leaf. `reference()` gives the
    float64 outputs (same tree), or raises if the op has no float64 version."""
    got, want = leaves(actual), leaves(expected)
    if len(got) != len(want):
        raise Mismatch("structure", f"{what}: {len(got)} leaves where eager gives {len(want)}")
    for i, (a, e) in enumerate(zip(got, want)):
        label = f"{what} {i}" if len(want) > 1 else what
        if isinstance(e, torch.Tensor):
            check_tensor(a, e, lambda i=i: _leaf(reference, i), label)
        elif not _same_scalar(a, e):
            raise Mismatch("value", f"{label}: {a!r} where eager gives {e!r}")


def _leaf(reference, i):
    value = reference()
    return None if value is None else leaves(value)[i]


def check_tensor(actual, expected, reference, label):
    if not isinstance(actual, torch.Tensor):
        raise Mismatch("structure", f"{label}: {type(actual).__name__} where eager gives a tensor")
    actual, expected = actual.detach(), expected.detach()
    if actual.layout != expected.layout:
        raise Mismatch("structure", f"{label}: layout {actual.layout} != {expected.layout}")
    if expected.layout != torch.strided:
        actual, expected = actual.to_dense(), expected.to_dense()
    if actual.shape != expected.shape:
        raise Mismatch(
            "shape", f"{label}: shape {list(actual.shape)} where eager gives {list(expected.shape)}"
        )
    if actual.dtype != expected.dtype:
        raise Mismatch("dtype", f"{label}: dtype {actual.dtype} where eager gives {expected.dtype}")
    actual, expected = actual.resolve_conj().resolve_neg(), expected.resolve_conj().resolve_neg()
    if _close(actual, expected):
        return
    ref = reference() if (expected.is_floating_point() or expected.is_complex()) else None
    if isinstance(ref, torch.Tensor):
        ref = ref.detach().resolve_conj().resolve_neg()
    try:
        assert_close(actual, expected, reference=ref)
    except AssertionError as error:
        raise Mismatch("value", f"{label}: {error}") from None


def _close(actual, expected):
    if not (expected.is_floating_point() or expected.is_complex()):
        return torch.equal(actual, expected)
    rtol, atol = tolerance_for(expected.dtype)
    return bool(
        torch.isclose(widest(actual), widest(expected), rtol=rtol, atol=atol, equal_nan=True).all()
    )


def _same_scalar(a, e):
    if isinstance(e, float) and isinstance(a, float) and math.isnan(e):
        return math.isnan(a)
    try:
        return bool(a == e)
    except Exception:  # e.g. objects without equality; compare their text
        return repr(a) == repr(e)
