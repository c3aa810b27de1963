"""A compiled `optimizer.step()` updates the parameters and state as eager's does, natively.

Dynamo writes the steps' `addcmul_`, `addcdiv_` and `add_` with a value as `prims.fma`; the
steps run under DICP_STRICT=1, so a missing converter fails instead of falling back."""
import pytest
import torch
import torch.nn as nn

from .helpers import compiled, warm_cache  # noqa: F401  (fixture)

STEPS = 3
OPTIMIZERS = {
    "sgd_nesterov": lambda p, **kw: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True,
                                                    weight_decay=1e-2, **kw),
    "adam": lambda p, **kw: torch.optim.Adam(p, lr=1e-2, **kw),
    "adamw_amsgrad": lambda p, **kw: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1,
                                                       amsgrad=True, **kw),
    "rmsprop_centered": lambda p, **kw: torch.optim.RMSprop(p, lr=1e-2, momentum=0.5,
                                                            centered=True, **kw),
    "adagrad": lambda p, **kw: torch.optim.Adagrad(p, lr=1e-2, **kw),
    "nadam": lambda p, **kw: torch.optim.NAdam(p, lr=1e-2, **kw),
}


def train(optimizer_factory, foreach, compile_step):
    """The parameters and optimizer state after STEPS steps of a small MLP."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(7, 16), nn.Tanh(), nn.Linear(16, 3))
    x, y = torch.randn(5, 7), torch.randn(5, 3)
    optimizer = optimizer_factory(model.parameters(), foreach=foreach)
    step = compiled(optimizer.step) if compile_step else optimizer.step
    for _ in range(STEPS):
        optimizer.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        step()
    state = [t for s in optimizer.state.values() for t in s.values()
             if isinstance(t, torch.Tensor)]
    return [p.detach() for p in model.parameters()], state


@pytest.mark.parametrize("foreach", [True, False], ids=["foreach", "for_loop"])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_compiled_step_matches_eager(warm_cache, monkeypatch, name, foreach):
    monkeypatch.setenv("DICP_STRICT", "1")
    params, state = train(OPTIMIZERS[name], foreach, compile_step=True)
    eager_params, eager_state = train(OPTIMIZERS[name], foreach, compile_step=False)
    assert len(state) == len(eager_state)
    for got, expected in zip(params + state, eager_params + eager_state, strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
