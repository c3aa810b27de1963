"""Autograd, no_grad, in-place ops, views, serialization and .to() behave as on CUDA."""

import io

import pytest
import torch


def mixed(x, w):
    """Native ops (mm, relu, mul, sum) and fallbacks (atan, cumsum, softmax)."""
    h = torch.relu(x @ w) * 2
    return (torch.atan(h).cumsum(1) + torch.softmax(h, 1)).sum()


def test_autograd_gives_the_cpu_gradients():
    x, w = torch.randn(4, 5), torch.randn(5, 3)
    grads = []
    for device in ("cpu", "emu"):
        xd = x.to(device).detach().requires_grad_()
        wd = w.to(device).detach().requires_grad_()
        mixed(xd, wd).backward()
        assert xd.grad.device.type == device
        grads.append((xd.grad.cpu(), wd.grad.cpu()))
    for got, want in zip(grads[1], grads[0]):
        torch.testing.assert_close(got, want)


def test_no_grad():
    w = torch.randn(3, device="emu", requires_grad=True)
    with torch.no_grad():
        y = w * 2 + torch.atan(w)
    assert not y.requires_grad and y.grad_fn is None
    assert (w * 2).requires_grad


def test_in_place_ops_bump_the_version_and_autograd_sees_it():
    w = torch.randn(3, device="emu", requires_grad=True)
    h = w * 1
    y = torch.sigmoid(h)  # saves its result for the backward
    version = y._version
    y.add_(1)  # native in-place
    y.atan_()  # in-place fallback
    assert y._version == version + 2
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


VIEWS = {
    "slice": lambda t: t[1:, ::2],
    "transpose": lambda t: t.t(),
    "view": lambda t: t.view(4, 3),
    "diagonal": lambda t: t.diagonal(),
    "unfold": lambda t: t.unfold(1, 2, 1),
    "expand": lambda t: t[:1].expand(5, 4),
    "select": lambda t: t[2],
    "real": lambda t: torch.view_as_real(t.to(torch.complex64)),
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_views_share_device_memory(name):
    base = torch.arange(12.0, device="emu").reshape(3, 4)
    view = VIEWS[name](base)
    assert view.device.type == "emu"
    expected = VIEWS[name](torch.arange(12.0).reshape(3, 4))
    assert torch.equal(view.cpu(), expected)
    if name != "real":  # a complex copy has storage of its own
        assert view.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
        base.add_(100)
        assert torch.equal(view.cpu(), expected + 100)


def test_writing_through_a_view_writes_the_base():
    base = torch.zeros(3, 4, device="emu")
    base[:, 1].fill_(7.0)
    base.t()[2].copy_(torch.ones(3))
    expected = torch.zeros(3, 4)
    expected[:, 1], expected[:, 2] = 7.0, 1.0
    assert torch.equal(base.cpu(), expected)


def test_save_and_load():
    state = {"x": torch.randn(3, 4, device="emu"), "y": torch.arange(5, device="emu:1")}
    buffer = io.BytesIO()
    torch.save(state, buffer)
    for location, devices in [
        (None, ("emu:0", "emu:1")),
        ("cpu", ("cpu", "cpu")),
        ({"emu:1": "emu:0"}, ("emu:0", "emu:0")),
    ]:
        buffer.seek(0)
        loaded = torch.load(buffer, map_location=location)
        assert (str(loaded["x"].device), str(loaded["y"].device)) == devices
        assert torch.equal(loaded["x"].cpu(), state["x"].cpu())
        assert torch.equal(loaded["y"].cpu(), state["y"].cpu())


def test_to_between_devices_and_dtypes():
    x = torch.randn(6)
    on_emu = x.to("emu")
    assert on_emu.device == torch.device("emu", 0)
    on_1 = on_emu.to("emu:1", torch.float64)
    assert on_1.device.index == 1 and on_1.dtype == torch.float64
    assert torch.equal(on_1.cpu(), x.double())
    pinned = x.pin_memory()
    assert pinned.is_pinned()
    asynchronous = pinned.to("emu", non_blocking=True)
    assert torch.equal(asynchronous.cpu(), x)
    assert on_emu.to("emu") is on_emu and on_emu.emu() is on_emu
    assert torch.nn.Linear(2, 2).emu().weight.device.type == "emu"
