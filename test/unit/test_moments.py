"""Variance and standard deviation (dicp's two-pass moments) over
values that repeat along the reduced dims: the mean is exactly the repeated value and the
variance exactly 0, as eager's Welford gives. A deviation of one ulp there turned std's
gradient, which eager masks only where std is exactly 0, into 1.2 instead of 0 (fuzz seed
2715: std over an expanded dim; seed 2717: float64 std of gathered, repeating values)."""

import pytest
import torch

from .helpers import compiled

CASES = {
    "std over an expanded dim": lambda x: torch.std(x.expand(3, 3, -1, -1), dim=[0], correction=0),
    "var over repeated rows": lambda x: torch.var(x.repeat(5, 1, 1), dim=0),
    "std_mean of a constant row": lambda x: torch.std_mean(x[:, :1].expand(-1, 7), dim=-1),
    "std of gathered values": lambda x: torch.std(
        torch.gather(x, 1, torch.tensor([[0, 0, 0], [1, 1, 1], [2, 2, 2]])).exp2(),
        dim=-1,
        correction=2,
    ),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("case", CASES)
def test_repeated_values_have_exactly_zero_variance_and_eager_gradients(case, dynamic, dtype):
    fn = CASES[case]
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(0), dtype=dtype) * 3
    x.requires_grad_()
    got, want = compiled(fn, dynamic=dynamic)(x), fn(x)
    torch.testing.assert_close(got, want)
    weights = [torch.randn(w.shape) for w in (want if isinstance(want, tuple) else (want,))]
    grads = [
        torch.autograd.grad(
            sum((o * w).sum() for o, w in zip(out if isinstance(out, tuple) else (out,), weights)),
            x,
        )[0]
        for out in (got, want)
    ]
    torch.testing.assert_close(grads[0], grads[1])


BATCHES = {
    # name -> float32 activations (N, C, H, W) built from a standard normal z
    "standard": lambda z: z,
    "mean far from 0": lambda z: z + 1e4,
    "outlier first": lambda z: torch.cat([z[:1].index_fill(2, torch.tensor([0]), 1e6), z[1:]]),
    "constant channel": lambda z: z.index_fill(1, torch.tensor([0]), 0.1),
}


@pytest.mark.parametrize("channels_last", [False, True], ids=["NCHW", "NHWC"])
@pytest.mark.parametrize("channels", [1, 5, 16])
@pytest.mark.parametrize("batch", BATCHES)
def test_batch_norm_statistics_in_one_pass(batch, channels, channels_last):
    """A training batch norm sums x - k and its square in one pass (k: each channel's first
    value): its output, running statistics and input gradient against float64 eager, no
    further off than float32 eager; a constant channel normalizes to exactly 0."""
    z = torch.randn(4, channels, 3, 5, generator=torch.Generator().manual_seed(0))
    x = BATCHES[batch](z)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    results = {}
    for name, dtype, fn in [
        ("dicp", torch.float32, compiled(torch.nn.functional.batch_norm)),
        ("eager", torch.float32, torch.nn.functional.batch_norm),
        ("exact", torch.float64, torch.nn.functional.batch_norm),
    ]:
        xd = x.to(dtype).requires_grad_()
        stats = torch.zeros(channels, dtype=dtype), torch.ones(channels, dtype=dtype)
        out = fn(xd, *stats, training=True, momentum=0.1, eps=1e-5)
        (grad,) = torch.autograd.grad((out * out.detach().cos()).sum(), xd)
        results[name] = [t.double() for t in (out, *stats, grad)]
    for got, want, exact in zip(*results.values(), strict=True):
        allowed = (want - exact).abs().max().item()
        assert (got - exact).abs().max().item() <= 2 * allowed + 1e-5
    if batch == "constant channel":
        assert torch.equal(results["dicp"][0][:, 0], torch.zeros_like(results["dicp"][0][:, 0]))


def _huge(shape, seed=0):
    """float32 values of about 1e18 and, in every row and channel, some of 1.5e19: their
    squares sum past float's largest value, 3.4e38, though the variance (about 5e36) is far
    inside it."""
    x = torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * 1e18
    x.view(-1)[:: max(1, x.numel() // 40)] = 1.5e19
    return x


HUGE = {
    "var": lambda x: torch.var(x),
    "std over dim 0": lambda x: torch.std(x.flatten(1), dim=0),
    "var_mean": lambda x: torch.var_mean(x, dim=[1, 2, 3], correction=0),
    "batch norm": lambda x: torch.nn.functional.batch_norm(
        x, None, None, torch.ones(1, dtype=x.dtype), torch.zeros(1, dtype=x.dtype), training=True
    ),
    "batch norm, expanded": lambda x: torch.nn.functional.batch_norm(
        x[:1].expand(7, -1, -1, -1), None, None, training=True
    ),
    "layer norm": lambda x: torch.nn.functional.layer_norm(x, x.shape[1:]),
    # over one dim, the squares sum in float chunks (summed again in double where one overflows)
    "var over the last dim": lambda x: torch.var(x.flatten(1), -1),
    "layer norm over the last dim": lambda x: torch.nn.functional.layer_norm(x, x.shape[-1:]),
    "group norm": lambda x: torch.nn.functional.group_norm(x, 1),
}


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("case", HUGE)
def test_a_sum_of_squares_past_floats_range_keeps_a_finite_variance(case, dynamic):
    """The sum of squared deviations stays in double until divided: rounded to float first it
    was inf, and the variance with it, where eager's Welford (summing in double) gives about
    5e36; a batch norm over an expanded activation then normalized everything to 0 and its
    weight gradient came out -0 against -0.99 (fuzzer, seed 7231). Eager itself overflows on
    some of these paths (a contiguous batch norm, a layer norm): dicp is held to float64."""
    fn = HUGE[case]
    x = _huge((7, 1, 7, 7)).requires_grad_()
    got = compiled(fn, dynamic=dynamic)(x)
    exact = fn(x.detach().double())
    for g, e in zip(*(t if isinstance(t, tuple) else (t,) for t in (got, exact)), strict=True):
        assert g.isfinite().all()
        torch.testing.assert_close(g.double(), e, rtol=1e-5, atol=1e-5 * e.abs().max().item())
    if case.startswith("batch norm"):
        weight = torch.ones(1, requires_grad=True)
        norm = lambda t, w: torch.nn.functional.batch_norm(t, None, None, w, training=True)
        out = compiled(norm, dynamic=dynamic)(x.detach()[:1].expand(7, -1, -1, -1), weight)
        probe = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))
        (grad,) = torch.autograd.grad((out * probe).sum(), weight)
        exact_weight = weight.detach().double().requires_grad_()
        exact_out = norm(x.detach()[:1].expand(7, -1, -1, -1).double(), exact_weight)
        (exact_grad,) = torch.autograd.grad((exact_out * probe.double()).sum(), exact_weight)
        torch.testing.assert_close(grad.double(), exact_grad, rtol=1e-4, atol=1e-4)
