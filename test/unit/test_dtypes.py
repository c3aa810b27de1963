"""A pointwise op and a reduction per dtype equal eager (exact for integers and bool)."""

import pytest
import torch

from ..common.tolerance import assert_close
from .helpers import compiled, warm_cache  # noqa: F401  (fixture)

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int32, torch.int64]


def make(dtype, *shape):
    if dtype is torch.bool:
        return torch.rand(*shape) > 0.5
    if dtype.is_floating_point:
        return torch.randn(*shape).to(dtype)
    return torch.randint(-50, 50, shape, dtype=dtype)


def float_pointwise(a, b):
    return torch.where(a > b, a * b + 1, a - b * 0.5)


def float_reduction(a):
    return a.sum(1), a.amax(0)


def int_pointwise(a, b):
    return a * b + a - 3, torch.where(a > b, a, b) // 7


def int_reduction(a):
    return a.sum(1), a.amax(0), a.sum()


def bool_pointwise(a, b):
    return torch.logical_and(a, b) | ~a, torch.logical_xor(a, b), torch.where(a, b, ~b)


def bool_reduction(a):
    return a.any(1), a.any()


CASES = (
    [(d, float_pointwise, float_reduction) for d in FLOATS]
    + [(d, int_pointwise, int_reduction) for d in INTS]
    + [(torch.bool, bool_pointwise, bool_reduction)]
)


def as_tuple(value):
    return value if isinstance(value, tuple) else (value,)


def check(fn, *args, dynamic=False):
    got, want = as_tuple(compiled(fn, dynamic)(*args)), as_tuple(fn(*args))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_close(g, w)  # also checks shape and dtype


@pytest.mark.parametrize(
    "dtype, pointwise, reduction", CASES, ids=[str(case[0]).replace("torch.", "") for case in CASES]
)
def test_pointwise_and_reduction_match_eager(warm_cache, dtype, pointwise, reduction):
    torch.manual_seed(0)
    a, b = make(dtype, 6, 9), make(dtype, 6, 9)
    check(pointwise, a, b)
    check(reduction, a)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_sum_of_many_values_accumulates_in_float(warm_cache, dtype):
    x = torch.full((4, 4096), 0.1, dtype=dtype)
    check(lambda x: x.sum(1), x)


def test_mixed_dtype_promotion_matches_eager(warm_cache):
    a, b, c = make(torch.int32, 5, 4), make(torch.float16, 5, 4), make(torch.bool, 5, 4)
    check(lambda a, b, c: (a + b, a * c, b.masked_fill(c, -1.0)), a, b, c)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int32])
def test_float_constants_into_integer_types_convert_like_eager(warm_cache, dtype):
    # eager converts a float scalar to an integer type through int64 (truncating, then
    # wrapping); a C++ float-to-unsigned conversion of -4.0 is undefined (g++ folded it to 0)
    check(
        lambda: (torch.arange(0.1, -7.9, -4.0, dtype=dtype), torch.arange(0.5, 5, 1.5, dtype=dtype))
    )


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_float16_results_past_its_range_are_inf_wherever_they_are_used(warm_cache, dynamic):
    """A float16 op's result beyond 65504 is inf in eager. A kernel computing in float must
    round it too, not only when it stores it: the fuzzer (seed 5151) found normalize giving 0
    where eager gives NaN, the unrounded 66051 divided by a norm that had been rounded to inf."""
    x = torch.tensor(
        [[5.0469, -0.062164, 8.1172, -3.7849e-05], [1.0, 2.0, 3.0, 4.0], [3e-5, 1.0, -1.0, 2.0]],
        dtype=torch.float16,
    )

    def fn(x):
        y = -2.5 / x
        return torch.nn.functional.normalize(y, dim=-1), (x * 30000) / 4, (y * 2).sum(-1)

    for rows in (3, 2) if dynamic else (3,):
        check(fn, x[:rows], dynamic=dynamic)


def test_float16_conversions_equal_eagers_for_every_value(warm_cache):
    """Every float16 value to float, and floats at and around every float16 value and halfway
    point (the rounding boundaries), subnormals, overflow and NaN back to float16: bit for bit
    eager's (NaN: any NaN). The kernels convert without branches (dicp_runtime.h)."""
    halves = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(torch.float16)
    widened = compiled(lambda h: h.float())(halves)
    assert_bits_equal(widened, halves.float())
    exact = halves.float()[~halves.isnan()].sort().values
    bits = exact.view(torch.int32)
    floats = torch.cat(
        [(bits + step).view(torch.float32) for step in (-1, 0, 1, 4096, 8192)]
        + [
            (exact[:-1] + (exact[1:] - exact[:-1]) / 2),
            torch.tensor([65519.996, 65520.0, 1e-40, float("nan")]),
        ]
    )
    floats = floats[floats.isfinite() | floats.isnan()]
    assert_bits_equal(compiled(lambda f: f.half())(floats), floats.half())


def assert_bits_equal(got, want):
    same = got.view(torch.int16 if got.element_size() == 2 else torch.int32) == want.view(
        torch.int16 if want.element_size() == 2 else torch.int32
    )
    first = (~(same | (got.isnan() & want.isnan()))).nonzero()
    assert first.numel() == 0, f"at {first[0].item()}: {got[first[0]]} vs {want[first[0]]}"
