"""Float sums of values that cannot be negative (exponentials, squares, absolute values) add
chunks of 16 elements a vector lane in float and the chunks' totals in double; every other
float sum keeps a double accumulator (lowering_reduce.SUM_CHUNK). Both stay within 2 ulp of the
exact sum."""

import pytest
import torch

from .helpers import cold_cache, compiled, kernel_sources  # noqa: F401  (fixture)

NEVER_NEGATIVE = {
    "exp": lambda x: torch.exp(x).sum(-1),
    "square": lambda x: (x * x).sum(-1),
    "abs": lambda x: x.abs().sum(-1),
    "rms": lambda x: x.pow(2).mean(-1),
}
EITHER_SIGN = {"plain": lambda x: x.sum(-1), "shifted": lambda x: (x - 0.5).sum(-1)}
LENGTHS = [1, 7, 255, 256, 257, 1024, 4097, 200003]


@pytest.mark.parametrize("name", NEVER_NEGATIVE)
def test_a_sum_of_values_never_negative_runs_in_float_chunks(cold_cache, name):
    x = torch.randn(8, 1000)
    torch.testing.assert_close(compiled(NEVER_NEGATIVE[name])(x), NEVER_NEGATIVE[name](x))
    assert "chunk_acc" in kernel_sources(cold_cache)


@pytest.mark.parametrize("name", EITHER_SIGN)
def test_a_sum_of_values_of_either_sign_keeps_its_double_accumulator(cold_cache, name):
    x = torch.randn(8, 1000)
    torch.testing.assert_close(compiled(EITHER_SIGN[name])(x), EITHER_SIGN[name](x))
    source = kernel_sources(cold_cache)
    assert "chunk_acc" not in source and "double acc" in source


@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize("name", NEVER_NEGATIVE)
def test_chunked_sums_stay_within_two_ulp_of_exact(cold_cache, name, length):
    fn = NEVER_NEGATIVE[name]
    x = torch.randn(16, length, generator=torch.Generator().manual_seed(length))
    got = compiled(fn)(x)
    exact = fn(x.double())
    ulp = exact.abs() * torch.finfo(torch.float32).eps
    assert ((got.double() - exact).abs() <= 2 * ulp).all()
    torch.testing.assert_close(got, fn(x))


@pytest.mark.parametrize("length", [1, 221, 257, 4097])
@pytest.mark.parametrize("build", ["native", "x86-64", "generic", "bounds_check"])
def test_chunked_sums_of_equal_squares_stay_within_two_ulp_at_every_vector_width(
    cold_cache, monkeypatch, build, length
):
    """Equal values are a sequential float sum's worst case. A chunk of 256 gave SSE's 4 lanes
    64 additions each (6 ulp off), and a bounds-checked (scalar) build 256 (21 ulp)."""
    if build == "bounds_check":
        monkeypatch.setenv("DICP_BOUNDS_CHECK", "1")
    else:
        monkeypatch.setenv("DICP_CHIP_VARIANT", build)
    x = torch.arange(1.1, 4.1).unsqueeze(1).expand(3, length).contiguous()  # not a broadcast
    fn = NEVER_NEGATIVE["square"]
    got, exact = compiled(fn)(x), fn(x.double())
    ulp = exact.abs() * torch.finfo(torch.float32).eps
    assert ((got.double() - exact).abs() <= 2 * ulp).all(), (got.double() - exact) / ulp
    assert "chunk_acc" in kernel_sources(cold_cache)


@pytest.mark.parametrize("length", [1, 255, 257, 1024])
def test_softmax_with_chunked_sums_matches_eager_forward_and_backward(cold_cache, length):
    x = torch.randn(5, length, dtype=torch.float32, requires_grad=True)
    fn = lambda t: torch.softmax(t, -1) * torch.arange(length)
    got = compiled(fn)(x)
    torch.testing.assert_close(got, fn(x))
    grad = torch.randn_like(got)
    torch.testing.assert_close(
        torch.autograd.grad(got, x, grad)[0], torch.autograd.grad(fn(x), x, grad)[0]
    )


@pytest.mark.parametrize("bounds_check", ["0", "1"])
def test_chunked_sums_with_dynamic_lengths_and_bounds_checks(cold_cache, monkeypatch, bounds_check):
    monkeypatch.setenv("DICP_BOUNDS_CHECK", bounds_check)
    fn = compiled(NEVER_NEGATIVE["exp"], dynamic=True)
    for length in (3, 300, 513):
        x = torch.randn(4, length)
        torch.testing.assert_close(fn(x), NEVER_NEGATIVE["exp"](x))
    assert "chunk_acc" in kernel_sources(cold_cache)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", ["exp", "rms"])
def test_chunked_sums_of_half_types_match_eager(cold_cache, name, dtype):
    x = torch.randn(6, 777).to(dtype)
    fn = NEVER_NEGATIVE[name]
    torch.testing.assert_close(compiled(fn)(x), fn(x))
    assert "chunk_acc" in kernel_sources(cold_cache)


def test_a_float64_sum_of_float_values_keeps_its_double_accumulator(cold_cache):
    """sum(dtype=float64) of float32 squares: eager adds them in float64 (float chunks were
    1e-8 off)."""
    x = torch.randn(4, 3000)
    fn = lambda t: (t * t).sum(-1, dtype=torch.float64)
    got, want = compiled(fn)(x), fn(x)
    assert ((got - want).abs() <= 1e-12 * want.abs()).all()
    assert "chunk_acc" not in kernel_sources(cold_cache)
