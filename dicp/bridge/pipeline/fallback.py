"""Eager fallback as data: the fallbacks a backend declares, and the ones compiles take.

A backend lists the ATen ops it knowingly runs as eager fallback in `Backend.expected_fallbacks`
(op pattern -> reason). Strict mode (DICP_STRICT=1) allows those and no other. Test harnesses
open `observe_fallbacks()` around a test to see every fallback its compiles took, declared,
forced by DICP_FALLBACK_OPS or not, and fail an op test on one the backend did not declare.
"""

import contextlib
from dataclasses import dataclass

from .utils import matches_any


@dataclass(frozen=True)
class Fallback:
    """One ATen node of a compiled graph left to run as eager fallback."""

    backend: str
    op: str  # "aten.add.Tensor"
    reason: str  # "no converter", "forced by DICP_FALLBACK_OPS", or a converter's reason
    dtype: str = ""  # "torch.float64" when the op fell back for a dtype the backend lacks


# The lists of the open observe_fallbacks() blocks: a registry of listeners, in the spirit of the
# backend registry, so no compile state lives in a global.
_observers: list = []


@contextlib.contextmanager
def observe_fallbacks():
    """Collect, into the yielded list, every Fallback taken by compiles inside the block."""
    seen: list = []
    _observers.append(seen)
    try:
        yield seen
    finally:
        # by identity: list.remove compares by value, and nested blocks that saw the same
        # fallbacks hold equal lists (it removed the outer one, then failed on the inner)
        del _observers[next(i for i, o in enumerate(_observers) if o is seen)]


def record_fallback(fallback: Fallback) -> None:
    for seen in _observers:
        seen.append(fallback)


def declared_reason(backend, op: str, dtype: str = ""):
    """The reason `backend` declares for falling back on `op` (on `dtype`, when the fallback
    was for a dtype it lacks), or None if it declares none."""
    for pattern, reason in backend.expected_fallbacks.items():
        if matches_any(op, [pattern]):
            return reason
    for declared_dtype, reason in backend.dtype_fallbacks.items():
        if dtype and str(declared_dtype) == dtype:
            return reason
    return None
