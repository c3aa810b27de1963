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
