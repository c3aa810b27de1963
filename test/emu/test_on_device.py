"""dicp.tools.on_device: a compiled function of host tensors run on emu, compared with eager on
the host (the fuzzer, the OpInfo check, torch's module samples). Inputs must arrive as eager
would see them on the device: a view of a larger storage as the same view of that storage."""

import pytest
import torch

from dicp.tools.on_device import on_device, to_device

from .conftest import compiled

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def partial_view(requires_grad=False):
    """Elements 3..6 of a storage of 10 (OpInfo's as_strided partial_views samples)."""
    return torch.randn(10, requires_grad=requires_grad)[3:7]


def test_a_view_arrives_as_the_same_view_of_a_copy_of_its_storage():
    base = torch.randn(10)
    views = (base[3:7], base.as_strided((2, 2), (1, 2), 4), base[::3])
    for view, copy in zip(views, to_device(views, "emu")):
        assert copy.device.type == "emu"
        assert (copy.storage_offset(), copy.stride()) == (view.storage_offset(), view.stride())
        assert copy.untyped_storage().nbytes() == base.untyped_storage().nbytes()
        assert torch.equal(copy.cpu(), view)
    first, second = to_device((base[:6], base[4:]), "emu")
    first.add_(1)  # one copy of the storage: views see each other's writes
    assert torch.equal(second.cpu()[:2], base[4:6] + 1)


def reaches_past_the_view(x):
    return torch.as_strided(x, (2, 2), (1, 2), 5) * 2


def test_as_strided_reads_the_storage_behind_a_view_as_eager_does():
    x = partial_view()
    got = on_device(compiled(reaches_past_the_view), "emu")(x)
    assert torch.equal(got, reaches_past_the_view(x))


def test_gradients_of_a_view_reach_the_host_tensor():
    x = partial_view(requires_grad=True)
    x.retain_grad()
    on_device(compiled(reaches_past_the_view), "emu")(x).square().sum().backward()
    got, x.grad = x.grad, None
    reaches_past_the_view(x).square().sum().backward()
    torch.testing.assert_close(got, x.grad)
