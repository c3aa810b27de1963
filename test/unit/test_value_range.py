"""erf computes its central polynomial alone where value_range.py proves |x| < 1 (GELU of a
softmax or a sigmoid), and both branches everywhere else. The two agree there, so every case
compares with eager, special values and gradients included; a bound proved where it does not
hold would take erf's central polynomial past 1, where it is wrong, and fail the comparison."""

import math

import pytest
import torch
import torch.nn.functional as F

from dicp.vendor.new_backendGraph.codegen.value_range import (
    UNBOUNDED,
    Interval,
    _mul,
    _reciprocal,
    _widened,
)

from .helpers import cold_cache, compiled, kernel_sources  # noqa: F401  (fixture)

CENTRAL = "dicp::erf_central<"


def _masked_softmax(t):
    rows, cols = t.shape[-2], t.shape[-1]
    mask = torch.ones(rows, cols, dtype=torch.bool).tril()
    return torch.softmax(t.masked_fill(~mask, float("-inf")), -1)


def _over_other_rows(t):
    """exp(x - row max) divided by column sums: not a softmax, values above 1."""
    e = torch.exp(t - t.amax(-1, keepdim=True))
    return e / e.sum(0, keepdim=True)


PROVED = {
    "gelu(softmax)": lambda t: F.gelu(torch.softmax(t, -1)),
    "gelu(softmax over dim 0)": lambda t: F.gelu(torch.softmax(t, 0)),
    "gelu(masked softmax)": lambda t: F.gelu(_masked_softmax(t)),
    "gelu(sigmoid)": lambda t: F.gelu(torch.sigmoid(t)),
    "erf(0.99 tanh)": lambda t: torch.erf(torch.tanh(t) * 0.99),
    "erf(clamp)": lambda t: torch.erf(torch.clamp(t, -0.9, 0.5)),
    "erf(cos / 2)": lambda t: torch.erf(torch.cos(t) / 2),
}
NOT_PROVED = {
    "gelu(x)": F.gelu,
    "erf(tanh)": lambda t: torch.erf(torch.tanh(t)),
    "erf(softmax)": lambda t: torch.erf(torch.softmax(t, -1)),  # 1 in a row of one
    "erf(2 softmax)": lambda t: torch.erf(2 * torch.softmax(t, -1)),
    "erf(x - row max)": lambda t: torch.erf(t - t.amax(-1, keepdim=True)),
    "erf(exp(x - row max) / column sums)": lambda t: torch.erf(_over_other_rows(t)),
    "erf(1.5 sigmoid)": lambda t: torch.erf(1.5 * torch.sigmoid(t)),
    "erf(clamp to 1)": lambda t: torch.erf(torch.clamp(t, -1, 1)),
}
SHAPES = [(1, 1), (3, 5), (4, 8), (7, 1024)]


def _inputs(shape, special):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(sum(shape))) * 4
    if special is not None:
        x[0, -1] = special
    return x


def _check(fn, shape, specials, cache):
    """fn compiled once (a special value changes no guard), each input compared with eager,
    values and gradients; the C++ it built."""
    compiled_fn = compiled(fn)
    for special in specials:
        x = _inputs(shape, special).requires_grad_()
        got = compiled_fn(x)
        where = f"{shape}, special value {special}"
        torch.testing.assert_close(got, fn(x), equal_nan=True, msg=lambda m: f"{where}: {m}")
        grad = torch.randn_like(got)
        torch.testing.assert_close(
            torch.autograd.grad(got, x, grad)[0],
            torch.autograd.grad(fn(x), x, grad)[0],
            equal_nan=True,
            msg=lambda m: f"{where}, gradient: {m}",
        )
    return kernel_sources(cache)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", PROVED)
def test_erf_of_a_bounded_value_is_its_central_branch(cold_cache, name, shape):
    specials = [None, float("inf"), -float("inf"), float("nan"), 1e30]
    assert CENTRAL in _check(PROVED[name], shape, specials, cold_cache)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", NOT_PROVED)
def test_erf_of_any_other_value_keeps_both_branches(cold_cache, name, shape):
    assert CENTRAL not in _check(NOT_PROVED[name], shape, [None, float("nan")], cold_cache)


def test_dynamic_row_length(cold_cache):
    fn = compiled(PROVED["gelu(softmax)"], dynamic=True)
    for shape in [(3, 5), (4, 9), (2, 1)]:
        x = _inputs(shape, None)
        torch.testing.assert_close(fn(x), PROVED["gelu(softmax)"](x))
    assert CENTRAL in kernel_sources(cold_cache)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_other_float_types(cold_cache, dtype):
    fn = PROVED["gelu(softmax)"]
    x = _inputs((6, 40), None).to(dtype)
    torch.testing.assert_close(compiled(fn)(x), fn(x))


def test_fully_masked_rows_stay_nan(cold_cache):
    """A row of -inf has max -inf, and -inf - -inf is NaN: eager's NaN, not a bound."""
    x = torch.full((3, 4), float("-inf"))
    got = compiled(PROVED["gelu(masked softmax)"])(x)
    torch.testing.assert_close(got, PROVED["gelu(masked softmax)"](x), equal_nan=True)
    assert got.isnan().any()


def test_unknown_products_are_unbounded():
    assert _mul(Interval(0.0, 1.0), UNBOUNDED) == UNBOUNDED  # 0 * inf
    assert _mul(Interval(-2.0, 1.0), Interval(3.0, 4.0)) == Interval(-8.0, 4.0)


def test_a_reciprocal_of_values_around_zero_is_unbounded():
    assert _reciprocal(Interval(-1.0, 2.0)) == UNBOUNDED
    assert _reciprocal(Interval(2.0, math.inf)) == Interval(0.0, 0.5)


def test_widening_past_a_types_range_is_infinite():
    node = torch.fx.Graph().placeholder("x")
    node.meta["val"] = torch.empty(2, dtype=torch.float16)
    widened = _widened(Interval(-1.0, 70000.0), node)
    assert widened.hi == math.inf and -1.001 < widened.lo < -1.0


def test_python_loops_target(cold_cache, monkeypatch):
    monkeypatch.setenv("DICP_NEW_BACKENDGRAPH_TARGET", "python_loops")
    fn, x = PROVED["gelu(softmax)"], _inputs((3, 7), float("nan"))
    torch.testing.assert_close(compiled(fn)(x), fn(x), equal_nan=True)


# Random chains of bounded and unbounded steps ending in erf: whatever value_range proves about
# them, erf must agree with eager (a bound proved where it does not hold takes the central
# polynomial past 1, where it is off by up to 0.16).
STEPS = {
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "cos": torch.cos,
    "sin": torch.sin,
    "relu": torch.relu,
    "abs": torch.abs,
    "neg": torch.neg,
    "exp": torch.exp,
    "softmax": lambda t: torch.softmax(t, -1),
    "erf": torch.erf,
    "reciprocal": lambda t: 1 / (t.abs() + 1),
    "rsqrt": lambda t: torch.rsqrt(t.abs() + 1),
    "max minus": lambda t: t - t.amax(-1, keepdim=True),
    "scale": None,
    "shift": None,
    "clamp": None,
}


def _random_chain(seed):
    rng = torch.Generator().manual_seed(seed)
    names = list(STEPS)
    chain, labels = [], []
    for _ in range(int(torch.randint(1, 5, (), generator=rng))):
        name = names[int(torch.randint(len(names), (), generator=rng))]
        c = round(float(torch.rand((), generator=rng)) * 1.7 + 0.3, 2)
        step = {
            "scale": lambda t, c=c: t * c,
            "shift": lambda t, c=c: t + (c - 1),
            "clamp": lambda t, c=c: t.clamp(-c, c),
        }.get(name, STEPS[name])
        chain.append(step)
        labels.append(f"{name} {c}" if STEPS[name] is None else name)

    def fn(t):
        for step in chain:
            t = step(t)
        return torch.erf(t)

    return fn, " -> ".join(labels)


@pytest.mark.parametrize("seed", range(40))
def test_random_chains_into_erf_match_eager(cold_cache, seed):
    fn, chain = _random_chain(seed)
    x = _inputs((5, 33), None)
    x[0, :6] = torch.tensor([float("inf"), -float("inf"), float("nan"), 0.0, -0.0, 1e30])
    torch.testing.assert_close(compiled(fn)(x), fn(x), equal_nan=True, msg=chain)
