"""A small model trains on emu in eager mode with the CPU's losses, to float32 tolerance."""

import pytest
import torch

from dicp.emu import observe_ops


def train(device, optimizer_class, steps=6):
    torch.manual_seed(0)
    # No bias before the batch norm: its gradient is rounding noise around 0 (the norm removes
    # the mean), which Adam scales up to +-lr, so its value after a few steps is noise too.
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3, padding=1, bias=False),
        torch.nn.BatchNorm2d(4),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(4 * 8 * 8, 32),
        torch.nn.GELU(),
        torch.nn.Dropout(0.0),
        torch.nn.Linear(32, 5),
    ).to(device)
    optimizer = optimizer_class(model.parameters(), lr=0.01)
    images, labels = torch.randn(16, 1, 8, 8), torch.randint(0, 5, (16,))
    images, labels = images.to(device), labels.to(device)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses, [p.detach().cpu() for p in model.parameters()]


@pytest.mark.parametrize("optimizer", [torch.optim.SGD, torch.optim.Adam], ids=["SGD", "Adam"])
def test_losses_and_weights_match_the_cpu(optimizer):
    with observe_ops() as seen:
        emu_losses, emu_weights = train("emu", optimizer)
    cpu_losses, cpu_weights = train("cpu", optimizer)
    torch.testing.assert_close(emu_losses, cpu_losses, rtol=1.3e-5, atol=1e-5)
    for got, want in zip(emu_weights, cpu_weights):
        torch.testing.assert_close(got, want, rtol=1.3e-5, atol=1e-5)
    assert cpu_losses[-1] < cpu_losses[0]  # it did learn
    assert any(path == "native" for _, path in seen)  # both kinds of kernel ran
    assert any(path == "fallback" for _, path in seen)


# The recurrent modules: on a device torch calls the fused cell kernels, CUDA's only elsewhere.
RNNS = {
    "LSTMCell": lambda bias: torch.nn.LSTMCell(3, 4, bias=bias),
    "GRUCell": lambda bias: torch.nn.GRUCell(3, 4, bias=bias),
    "LSTM": lambda bias: torch.nn.LSTM(3, 4, num_layers=2, bias=bias, batch_first=True),
    "GRU": lambda bias: torch.nn.GRU(3, 4, bias=bias, bidirectional=True),
}


def run_rnn(name, bias, device, state_only):
    """Two steps of a cell (or one call of a layer) and backward; the outputs and gradients."""
    torch.manual_seed(0)
    module = RNNS[name](bias).to(device)
    x = torch.randn(2, 5, 3).to(device).requires_grad_()
    if name.endswith("Cell"):
        state = module(x[:, 0])
        state = module(x[:, 1], state)
        outputs = state if isinstance(state, tuple) else (state,)
        if state_only:  # the LSTM cell's cell state gets no gradient
            outputs = outputs[:1]
    else:
        output, _ = module(x)
        outputs = (output,)
    sum(out.mul(out.detach().add(1)).sum() for out in outputs).backward()
    grads = [x.grad] + [p.grad for p in module.parameters()]
    return [t.detach().cpu() for t in (*outputs, *grads)]


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize(
    "name, state_only",
    [(name, False) for name in RNNS] + [("LSTMCell", True)],
    ids=[*RNNS, "LSTMCell_hidden_only"],
)
def test_recurrent_modules_match_the_cpu(name, bias, state_only):
    emu = run_rnn(name, bias, "emu", state_only)
    cpu = run_rnn(name, bias, "cpu", state_only)
    assert len(emu) == len(cpu)
    for got, want in zip(emu, cpu):
        torch.testing.assert_close(got, want, rtol=1.3e-5, atol=1e-5)
