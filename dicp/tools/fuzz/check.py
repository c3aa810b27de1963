"""Judging a compiled result against eager: dtype and shape exactly, values within
dicp/tolerance.py's per-dtype table (exact for integers and bool).

A fused kernel keeps intermediates in float registers where eager rounds every op to its
storage type, so a program's result may miss eager's by more than one op's tolerance while
being as close to exact arithmetic. As in the op suite, the arbiter is then the same program
run in float64 (`reference`): an element passes if it is within the table of eager or of the
float64 result (for integers and bools: equal to either, e.g. a comparison of values that
rounding moved across each other), or if it is ill-conditioned (below), else the whole result
passes if its root mean square and largest errors against float64 are at most PyTorch's
multiplier times eager's.

An element is ill-conditioned where eager itself is off from float64 by more than
ILL_CONDITIONED_ULPS units of the dtype's precision: the program amplifies rounding there
(1 / gelu(x) for x < -3 divides by 1 + erf(x), a cancellation), and a transcendental a few ulps
off (dicp's vectorizable erf is 1.15 ulp, eager's 0.54) shows up as a large difference. Such an
element passes if its error is at most ILL_CONDITIONED_FACTOR times eager's. A wrong index or a
wrong op gives errors of the order of the values, far beyond either bound.
"""

import contextlib
import math
import warnings
from dataclasses import dataclass

import torch
from torch.overrides import TorchFunctionMode

from dicp.tolerance import TOLERANCES, compare, fp64_multiplier, tolerance_for

ILL_CONDITIONED_ULPS = 16
ILL_CONDITIONED_FACTOR = 16
_HALF_TYPES = (torch.float16, torch.bfloat16)


@dataclass(frozen=True)
class Mismatch:
    kind: str  # shape, dtype, value, exact, missing
    detail: str

    def __str__(self):
        return f"{self.kind}: {self.detail}"


def judge(actual, expected, reference=None, dtype=None, rounded=None, ties=None):
    """None if `actual` passes against eager's `expected`, else a Mismatch. `reference` is the
    float64 run's result, or a callable computing it (only called when needed). `dtype`: the
    float dtype whose tolerance applies (default: expected's own). `rounded` (or a callable
    computing it): more answers an integer or bool output may equal (an output's tuple from
    `rounded_run`). `ties` (or a callable computing it): a bool mask of a gradient's elements
    that are not defined (ties.tie_affected), judged only if the whole fails."""
    mismatch = _judge(actual, expected, reference, dtype, rounded)
    if mismatch is None or mismatch.kind != "value" or ties is None:
        return mismatch
    ties = ties() if callable(ties) else ties
    if ties is None or ties.shape != actual.shape:
        return mismatch
    left_out = torch.where(ties, expected, actual)
    if _judge(left_out, expected, reference, dtype, rounded) is not None:
        return mismatch
    return None


def _judge(actual, expected, reference, dtype, rounded):
    if actual is None or expected is None:
        if actual is None and expected is None:
            return None
        return Mismatch("missing", f"compiled gives {_what(actual)}, eager {_what(expected)}")
    table = TOLERANCES
    if dtype is not None and expected.is_floating_point():
        table = {expected.dtype: tolerance_for(dtype)}
    difference = compare(actual, expected, table)
    if difference.close:
        return None
    if actual.shape != expected.shape:
        return Mismatch("shape", difference.reason)
    if actual.dtype != expected.dtype:
        return Mismatch("dtype", difference.reason)
    reference = reference() if callable(reference) else reference
    kind = "value" if expected.is_floating_point() else "exact"
    detail = f"{difference}; {_worst(actual, expected, tolerance_for(expected.dtype, table))}"
    if reference is None or reference.shape != expected.shape:
        return Mismatch(kind, detail)
    if not expected.is_floating_point() and rounded is not None:
        rounded = rounded() if callable(rounded) else rounded
    verdict = _against_float64(
        actual.detach(),
        expected.detach(),
        reference.detach(),
        tolerance_for(expected.dtype, table),
        dtype or expected.dtype,
        None if expected.is_floating_point() else rounded,
    )
    return None if verdict is None else Mismatch(kind, f"{detail}; {verdict}")


def _worst(actual, expected, tolerance):
    """The first element outside the tolerance, with both values (nan and inf included)."""
    a, e = actual.detach().to(torch.float64), expected.detach().to(torch.float64)
    bad = ~torch.isclose(a, e, *tolerance, equal_nan=True)
    at = tuple(int(i) for i in torch.nonzero(bad)[0]) if bad.any() else ()
    return f"first at {at}: compiled {a[at].item():.6g}, eager {e[at].item():.6g}"


def _what(value):
    return "no tensor" if value is None else f"{value.dtype}{list(value.shape)}"


def _against_float64(actual, expected, reference, tolerance, dtype, rounded=None):
    a, e, r = (t.to(torch.float64) for t in (actual, expected, reference))
    rtol, atol = tolerance
    near_eager = torch.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
    near_exact = torch.isclose(a, r, rtol=rtol, atol=atol, equal_nan=True)
    # the float64 result rounded to the output's type is the best answer there is: inf where
    # it overflows (a float16 prod computed in float32 is inf where eager's, rounding every
    # step, came out 60736 and the exact one is 66204)
    near_exact |= torch.isclose(
        a, reference.to(actual.dtype).to(torch.float64), rtol=rtol, atol=atol, equal_nan=True
    )
    for answer in rounded if isinstance(rounded, (tuple, list)) else (rounded,):
        if answer is not None and answer.shape == actual.shape:
            near_exact |= actual == answer
    if (near_eager | near_exact).all():
        return None
    if not expected.is_floating_point():
        return f"differs from both eager and float64 at {_first(~(near_eager | near_exact))}"
    ours, eagers = (a - r).abs(), (e - r).abs()
    # eager's NaN where the exact result is finite is an overflow of its own, as its inf there
    # is: an error without bound (fuzzer, seed 7218: a layer norm of a row holding 7e24, whose
    # square overflows float32; eager's Welford step made NaN of it, dicp and Inductor return
    # the bias, as eager itself does for a row holding 3e19 and -3e19)
    eagers = torch.where(e.isnan() & r.isfinite(), math.inf, eagers)
    ill = eagers > ILL_CONDITIONED_ULPS * torch.finfo(dtype).eps * r.abs()
    left = ~(near_eager | near_exact | (ill & (ours <= ILL_CONDITIONED_FACTOR * eagers)))
    if not left.any():
        return None
    # elements already judged (an inf both give) do not fail the rest (fuzzer, seed 6060: a
    # bfloat16 sinh, inf in both at one element, failed the whole output on that inf)
    finite = eagers.isfinite() & ours.isfinite()
    if (left & ~finite).any():
        return f"non-finite error against float64 at {_first(left & ~finite)}"
    ours, eagers = ours[finite], eagers[finite]
    multiplier = fp64_multiplier(expected)
    for name, measure in (
        ("rmse", lambda d: d.pow(2).mean().sqrt().item()),
        ("max error", lambda d: d.max().item()),
    ):
        mine, theirs = measure(ours), measure(eagers)
        if not mine <= multiplier * theirs + atol / 10:
            return f"{name} against float64 {mine:.3e} exceeds {multiplier} x eager's {theirs:.3e}"
    return None


def _first(mask):
    at = tuple(int(i) for i in torch.nonzero(mask)[0]) if mask.any() else ()
    return f"index {at}"


class _HalfTypesInFloat64(TorchFunctionMode):
    """Every float16/bfloat16 a program names (a cast, a dtype argument) becomes float64."""

    target = torch.float64
    names = _HALF_TYPES
    casts: tuple = (torch.Tensor.half, torch.Tensor.bfloat16)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        args = _widened(args, self.names, self.target)
        kwargs = _widened(kwargs or {}, self.names, self.target)
        if func in self.casts:
            func, args = _TO[self.target], args[:1]
        return func(*args, **kwargs)


class _HalfTypesInFloat32(_HalfTypesInFloat64):
    """Half types computed in float32, as fused kernels keep their intermediates."""

    target = torch.float32


class _FloatTypesInFloat64(_HalfTypesInFloat64):
    """Every float type a program names becomes float64, float32 too: a program casting an
    input to float32 before a layer norm with float64 weights runs only so."""

    names = (torch.float32,) + _HALF_TYPES
    casts = _HalfTypesInFloat64.casts + (torch.Tensor.float,)


_TO = {torch.float64: torch.Tensor.double, torch.float32: torch.Tensor.float}


def _widened(value, names, target):
    if value in names:
        return target
    if isinstance(value, (list, tuple)):
        return type(value)(_widened(v, names, target) for v in value)
    if isinstance(value, dict):
        return {k: _widened(v, names, target) for k, v in value.items()}
    return value


def float64_reference_runs():
    """The contexts to compute the float64 reference in, in order of preference: the program
    as written (its casts to a half type round, as eager's do) with its reductions rounded
    once, then, where that cannot run (a value cast to bfloat16 meets a float64 input in
    index_add), the program with its half types in float64: exact arithmetic, without which
    such a program had no arbiter but eager's own rounding (a fused bfloat16 gradient closer to
    exact than eager's was a mismatch). In both, an integer tensor promoted to float (cosh of
    an int64) becomes float64, not the default float32 (see _default_float64). Last, every
    float type in float64 (x.float() meeting float64 weights in layer_norm: without it eager's
    rounding noise, -1.5e-5 where the exact gradient is 0, judged dicp's exact 0 a mismatch)."""
    return (
        _in_float64(_ReductionsRoundedOnce),
        _in_float64(_HalfTypesInFloat64),
        _in_float64(_FloatTypesInFloat64),
    )


def _in_float64(mode):
    return lambda: _default_float64(mode())


@contextlib.contextmanager
def _default_float64(mode):
    """`mode` with float64 as the default dtype, so ops promoting integers to float compute in
    float64. With float32 the reference repeated eager's rounding: argmin(cosh(i)) over an
    int64 column holding 1, -1, -1 has a three-way tie in exact arithmetic (first index 0,
    dicp's answer), but eager's vectorized cosh gave the last element one ulp less (index 6),
    and so did the float32 reference (seed 2711, program 522)."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with mode:
            yield
    finally:
        torch.set_default_dtype(previous)


_ACCUMULATING = {
    torch.sum,
    torch.Tensor.sum,
    torch.mean,
    torch.Tensor.mean,
    torch.prod,
    torch.Tensor.prod,
    torch.cumsum,
    torch.Tensor.cumsum,
    torch.cumprod,
    torch.Tensor.cumprod,
}
_ROUNDED_ONCE = (torch.float32,) + _HALF_TYPES


class _ReductionsRoundedOnce(TorchFunctionMode):
    """A sum, mean or product (plain or cumulative) of a float32, float16 or bfloat16 tensor
    computed in float64 and rounded once to its type. Eager's CPU prod rounds every step, so
    run as written the reference was eager's own rounding: a bfloat16 prod accumulated in float
    (closer to exact in every one of 124 differing draws) and then fed to fmod, which turns the
    1-ulp difference into a large relative one, was a mismatch against an eager error of 0."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in _ACCUMULATING and args and isinstance(args[0], torch.Tensor):
            result_dtype = kwargs.get("dtype") or args[0].dtype
            if result_dtype in _ROUNDED_ONCE:
                kwargs.pop("dtype", None)
                return func(args[0].double(), *args[1:], **kwargs).to(result_dtype)
        return func(*args, **kwargs)


def rounded_run(fn, inputs):
    """For each of `fn`'s outputs on `inputs`, the answers of float arithmetic done two other
    legitimate ways: in the program's own types with every float reduction computed in float64
    and rounded once, and with its half types computed in float32, as fused kernels keep their
    intermediates (dicp/tolerance.py). An integer or bool made from a float that sits within
    an ulp of an integer may take either side: a correctly rounded sum put sum(x) - x one
    integer off from eager's and from float64's, and a float16 sum kept in float32 put a
    power's fractional part at 0 (frac of 45488.0) where eager's rounded half gave 45441.42
    (fuzzer seeds 2711, 2712). None where neither can run."""
    runs = [
        _outputs(fn, inputs, _ReductionsRoundedOnce),
        _outputs(
            fn, [t.float() if t.dtype in _HALF_TYPES else t for t in inputs], _HalfTypesInFloat32
        ),
    ]
    runs = [run for run in runs if run is not None]
    return [tuple(answers) for answers in zip(*runs)] if runs else None


def _outputs(fn, inputs, mode):
    try:
        with torch.no_grad(), warnings.catch_warnings(), mode():
            warnings.simplefilter("ignore")
            return list(fn(*[t.detach().clone() for t in inputs]))
    except RuntimeError:
        return None


def float64_inputs(tensors):
    """Contiguous copies of `tensors` with floating ones in float64 (same shape and values;
    gradients tracked where the originals track them). Contiguous, so the arbiter does not
    share a layout bug of eager's: CPU batch_norm's backward reads a strided weight as if it
    were contiguous (torch 2.11 and 2.13; weight `w[::3]`), and the float64 run, given the same
    strided weight, repeated eager's wrong gradient against dicp's right one (seed 4040)."""
    out = []
    for t in tensors:
        dtype = torch.float64 if t.is_floating_point() else t.dtype
        copy = t.detach().to(dtype, memory_format=torch.contiguous_format, copy=True)
        out.append(copy.requires_grad_(t.requires_grad and copy.is_floating_point()))
    return out
