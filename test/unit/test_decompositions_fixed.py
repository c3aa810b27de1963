"""dicp's replacements for torch decompositions that disagree with eager (decompositions_fixed.py),
checked bit for bit against eager; each case failed with torch's own decomposition."""

import pytest
import torch

from dicp.bridge.pipeline.decompositions_fixed import FIXED
from dicp.bridge.pipeline.torch_compat import get_decompositions

aten = torch.ops.aten


@pytest.mark.parametrize("columns", [(7,), ()])
@pytest.mark.parametrize("alpha", [1, 1.5])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_index_add_rounds_as_eager(dtype, alpha, columns):
    # 151 adds onto 2 rows: eager adds in float32 and rounds once when alpha is 1 and x has 2
    # dims, else it rounds every add
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(2, *columns, generator=g) * 10).to(dtype)
    source = (torch.randn(151, *columns, generator=g) * 10).to(dtype)
    rows = torch.randint(0, 2, (151,), generator=g)
    expected = x.index_add(0, rows, source, alpha=alpha)
    got = FIXED[aten.index_add.default](x, 0, rows, source, alpha=alpha)
    assert got.dtype == dtype
    if dtype == torch.float32:  # no rounding question: the decomposition reorders the adds
        torch.testing.assert_close(got, expected)
    else:
        assert torch.equal(got, expected)


def test_torch_decomposition_of_half_index_add_differs_from_eager():
    """The reason for the row above: if torch's decomposition changes to match eager, it goes."""
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(2, 7, generator=g) * 10).bfloat16()
    source = (torch.randn(151, 7, generator=g) * 10).bfloat16()
    rows = torch.randint(0, 2, (151,), generator=g)
    decomposed = get_decompositions([aten.index_add.default])[aten.index_add.default]
    assert not torch.equal(decomposed(x, 0, rows, source), x.index_add(0, rows, source))


@pytest.mark.parametrize("dynamic", [False, True])
def test_pow_of_bool_by_bool_stays_bool(dynamic):
    """pow(bool tensor, bool) is bool in eager; torch's meta kernel says int64, which the traced
    graph carried into dicp's output (found by the fuzzer). Other pow overloads keep their
    dtypes."""

    def fn(flags, ints):
        return (
            flags**True,
            flags**False,
            flags**2,
            ints**True,
            ints.float() ** False,
            torch.pow(torch.any(ints > 0, 0), False),
        )

    flags, ints = torch.tensor([True, False, True]), torch.tensor([[2, -3, 0], [1, 1, -1]])
    torch._dynamo.reset()
    got = torch.compile(fn, backend="new_backendgraph", dynamic=dynamic)(flags, ints)
    for g, want in zip(got, fn(flags, ints), strict=True):
        assert g.dtype == want.dtype
        assert torch.equal(g, want)


def _tanh_backward_error(fn, dtype):
    """The largest error of tanh's gradient through `fn(grad, y)` for |x| in [0, 9], relative
    to float64, where y = tanh(x) is rounded to `dtype`."""
    x = torch.linspace(-9.0, 9.0, 40001, dtype=torch.float64)
    y = x.tanh().to(dtype)
    exact = 1 - y.double() ** 2
    got = fn(torch.ones_like(y), y).double()
    nonzero = exact != 0  # y rounded to +-1
    return ((got - exact)[nonzero].abs() / exact[nonzero]).max().item()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_tanh_backward_is_as_accurate_as_eager_where_tanh_saturates(dtype):
    fixed = _tanh_backward_error(FIXED[aten.tanh_backward.default], dtype)
    eager = _tanh_backward_error(aten.tanh_backward.default, dtype)
    assert fixed <= max(eager, 1e-6), (fixed, eager)


def test_tanh_backward_compiled_matches_eager_at_large_x():
    """The fuzzer's case: the gradient of log1p(tanh(x)) at x = -4.4 was 4e-5 off."""
    x = torch.linspace(-9.0, 9.0, 2001, requires_grad=True)
    fn = torch.compile(lambda t: t.tanh().log1p(), backend="new_backendgraph")
    (got,) = torch.autograd.grad(fn(x).sum(), x)
    (want,) = torch.autograd.grad(x.tanh().log1p().sum(), x)
    torch.testing.assert_close(got, want, equal_nan=True)


def permuted_repeated_viewed(x):
    """WavLM's position bias: permuted, repeated over the batch, then viewed, which eager's
    contiguous repeat allows."""
    return (x.permute(0, 3, 1, 2).repeat(2, 1, 1, 1).view(-1, x.shape[1], x.shape[2]) * 2).exp()


def test_repeat_is_contiguous_as_eager():
    x = torch.randn(1, 3, 5, 4).permute(0, 3, 1, 2)
    got = FIXED[aten.repeat.default](x, [2, 1, 1, 1])
    assert got.is_contiguous() and torch.equal(got, x.repeat(2, 1, 1, 1))
    decomposed = get_decompositions([aten.repeat.default])[aten.repeat.default]
    assert not decomposed(x, [2, 1, 1, 1]).is_contiguous()  # the reason for the row


@pytest.mark.parametrize("dynamic", [False, True])
def test_a_view_of_a_repeated_permuted_tensor_compiles_with_its_gradient(dynamic):
    torch._dynamo.reset()
    compiled = torch.compile(permuted_repeated_viewed, backend="new_backendgraph", dynamic=dynamic)
    for size in (5, 1, 6):
        x = torch.randn(1, size, size, 4, requires_grad=True)
        got = compiled(x)
        grad = torch.randn_like(got)
        want = permuted_repeated_viewed(x)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(
            torch.autograd.grad(got, x, grad), torch.autograd.grad(want, x, grad)
        )


def _layer_norm_gradients(fn, x, weight, bias, grad, dtype=None):
    leaves = [t.clone().to(dtype or t.dtype).requires_grad_() for t in (x, weight, bias)]
    out = fn(*leaves)
    return torch.autograd.grad(out, leaves, grad.to(out.dtype))


def _rms_error(got, exact):
    return ((got.double() - exact) ** 2).mean().sqrt().item()


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("shape", [(224, 224), (3, 97, 65), (1, 1)], ids=str)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_layer_norm_gradients_are_as_accurate_as_eager(dtype, shape, dynamic):
    """A layer norm over all of a float16 tensor's elements (the fuzzer's: a 224x224 product,
    mean 16, std 3.7): torch's decomposition computed rstd / N in float16, subnormal there, and
    the input's gradient came out 10x eager's error against float64. Every gradient within 1.5x
    eager's error (the sums' order differs), at one element, odd sizes and even ones."""
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(shape, generator=g, dtype=torch.float64) * 3.7 + 16).to(dtype)
    weight, bias = (torch.randn(shape, generator=g, dtype=torch.float64).to(dtype) for _ in "wb")
    grad = torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)

    def fn(x, weight, bias):
        return torch.nn.functional.layer_norm(x, shape, weight, bias, eps=0.1)

    _assert_gradients_within(1.5, fn, (x, weight, bias), grad, dynamic)


def _assert_gradients_within(factor, fn, leaves, grad, dynamic):
    """Each gradient of fn(x, weight, bias) compiled within `factor` times eager's rms error
    against float64, in eager's dtype."""
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="new_backendgraph", dynamic=dynamic)
    exact = _layer_norm_gradients(fn, *leaves, grad, torch.float64)
    eager = _layer_norm_gradients(fn, *leaves, grad)
    got = _layer_norm_gradients(compiled, *leaves, grad)
    for name, c, e, r in zip("x weight bias".split(), got, eager, exact, strict=True):
        assert c.dtype == e.dtype
        assert _rms_error(c, r) <= factor * _rms_error(e, r) + 1e-7, name


def _group_norm_case(shape, groups, shift, eps):
    g = torch.Generator().manual_seed(len(shape) * 100 + shape[-1])
    x = torch.randn(shape, generator=g) * 0.5 + shift
    weight, bias, grad = (torch.randn(s, generator=g) for s in (shape[1], shape[1], shape))

    def fn(x, weight, bias):
        return torch.nn.functional.group_norm(x, groups, weight, bias, eps=eps)

    return fn, x, weight, bias, grad


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize(
    "shape, groups, shift, eps",
    [((3, 1), 1, 0.0, 1e-6), ((8, 4, 1), 4, 0.0, 1e-6), ((3, 1, 1), 1, 0.0, 1e-6)],
    ids=str,
)
def test_group_norm_gradient_over_groups_of_one_element_is_zero(shape, groups, shift, eps, dynamic):
    """Over a group of one element a group norm's output is its bias, and the input's gradient
    is exactly 0. torch's decomposition (eager's kernel too) cancels two products scaled by
    rstd cubed (1e9 at eps 1e-6): 2e-5 where eager happened to give 0 (fuzzer, seed 7242), and
    eager 2.4e-4 on (3, 1, 1). The weight's gradient is exactly 0 too (its x - mean is 0)."""
    fn, x, weight, bias, grad = _group_norm_case(shape, groups, shift, eps)
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="new_backendgraph", dynamic=dynamic)
    got = _layer_norm_gradients(compiled, x, weight, bias, grad)
    assert (got[0] == 0).all() and (got[1] == 0).all()
    torch.testing.assert_close(got[2], grad.sum([0, *range(2, grad.dim())]))


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize(
    "shape, groups, shift",
    [
        ((4, 8, 16, 16), 2, 1000.0),
        ((4, 8, 16, 16), 2, 0.0),
        ((2, 6, 5), 3, 300.0),
        ((3, 6, 7), 6, 0.0),
    ],
    ids=str,
)
def test_group_norm_gradients_are_as_accurate_as_eager(shape, groups, shift, dynamic):
    """Every gradient within eager's error against float64 (1.2x: the sums' order differs), at
    odd and even sizes, also for a mean far from 0 (where ds - db mean cancels)."""
    fn, x, weight, bias, grad = _group_norm_case(shape, groups, shift, 1e-5)
    _assert_gradients_within(1.2, fn, (x, weight, bias), grad, dynamic)
