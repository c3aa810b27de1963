"""The subject of test_cold_warm.py: a compiled step run cold and then warm by `pytest
--cold-warm`. It checks nothing against eager on purpose (named so pytest does not collect it
by itself): a warm-only fault then changes the results without failing either run, and only
the mode's comparison can see it."""

import torch


def test_compiled_training_step():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    @torch.compile(backend="new_backendgraph")
    def step(x):
        loss = (model(x) * x[:, :1]).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.detach()

    x = torch.randn(5, 6)
    assert all(torch.isfinite(step(x)) for _ in range(2))
