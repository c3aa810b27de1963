"""A compiled `optimizer.step()` updates the parameters and state as eager's does, natively.

Dynamo writes the steps' `addcmul_`, `addcdiv_` and `add_` with a value as `prims.fma`; the
steps run under DICP_STRICT=1, so a missing converter fails instead of falling back."""

import pytest
import torch
import torch.nn as nn

from ..common.tolerance import assert_close_or_as_accurate
from .helpers import compiled, warm_cache  # noqa: F401  (fixture)

STEPS = 3
OPTIMIZER_TOLERANCE = {torch.float32: (1e-5, 1e-6)}  # (rtol, atol)
OPTIMIZERS = {
    "sgd_nesterov": lambda p, **kw: torch.optim.SGD(
        p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-2, **kw
    ),
    "adam": lambda p, **kw: torch.optim.Adam(p, lr=1e-2, **kw),
    "adamw_amsgrad": lambda p, **kw: torch.optim.AdamW(
        p, lr=1e-2, weight_decay=0.1, amsgrad=True, **kw
    ),
    "rmsprop_centered": lambda p, **kw: torch.optim.RMSprop(
        p, lr=1e-2, momentum=0.5, centered=True, **kw
    ),
    "adagrad": lambda p, **kw: torch.optim.Adagrad(p, lr=1e-2, **kw),
    "nadam": lambda p, **kw: torch.optim.NAdam(p, lr=1e-2, **kw),
}


def train(optimizer_factory, foreach, compile_step, dtype=torch.float32):
    """The parameters and optimizer state after STEPS steps of a small MLP."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(7, 16), nn.Tanh(), nn.Linear(16, 3)).to(dtype)
    x, y = torch.randn(5, 7).to(dtype), torch.randn(5, 3).to(dtype)
    optimizer = optimizer_factory(model.parameters(), foreach=foreach)
    step = compiled(optimizer.step) if compile_step else optimizer.step
    for _ in range(STEPS):
        optimizer.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        step()
    state = [t for s in optimizer.state.values() for t in s.values() if isinstance(t, torch.Tensor)]
    return [p.detach() for p in model.parameters()], state


@pytest.mark.parametrize("foreach", [True, False], ids=["foreach", "for_loop"])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_compiled_step_matches_eager(warm_cache, monkeypatch, name, foreach):
    monkeypatch.setenv("DICP_STRICT", "1")
    params, state = train(OPTIMIZERS[name], foreach, compile_step=True)
    eager_params, eager_state = train(OPTIMIZERS[name], foreach, compile_step=False)
    # centered RMSprop divides by sqrt(E[g^2] - E[g]^2): the cancellation turns a rounding
    # difference (a fused multiply-add) into 1e-5, so a value off by more than 1e-5 must be
    # about as close as eager's to the same steps in float64
    reference, reference_state = train(OPTIMIZERS[name], foreach, False, torch.float64)
    assert len(state) == len(eager_state)
    for got, expected, exact in zip(
        params + state, eager_params + eager_state, reference + reference_state, strict=True
    ):
        assert_close_or_as_accurate(got, expected, exact, table=OPTIMIZER_TOLERANCE)
