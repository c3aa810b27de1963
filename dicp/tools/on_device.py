"""Running a compiled function of host tensors on its backend's device, for the checks that
compare with eager on the host (the fuzzer, the OpInfo run, torch's module samples): a backend
with a device of its own (`Backend.device`, e.g. emugraph's `emu`) gets its inputs there and
must return its outputs there; the check sees host tensors either way.

    compiled = on_device(torch.compile(fn, backend=name), backend_device(name))
"""

import torch

from dicp.api import get_backend

HOST = "cpu"


def backend_device(backend) -> str:
    """The device of dynamo backend `backend`: `Backend.device` for a registered dicp backend
    (by name), the host for others (inductor, aot_eager, a callable)."""
    if not isinstance(backend, str):
        return HOST
    try:
        return get_backend(backend).device
    except KeyError:
        return HOST


def on_device(compiled, device):
    """`compiled` called with its tensor arguments copied to `device` (differentiably, so
    gradients reach the host tensors) and `device` the default device (a factory naming none
    makes its tensor there, as on the host), and its tensor outputs, which must be on
    `device`, copied back to the host; `compiled` itself for the host."""
    if torch.device(device).type == HOST:
        return compiled

    def call(*args, **kwargs):
        args, kwargs = to_device((args, kwargs), device)
        with torch.device(device):
            outputs = compiled(*args, **kwargs)
        return to_host(outputs, device)

    return call


def to_device(value, device):
    """`value` (nested tuples, lists and dicts) with every tensor copied to `device`. A tensor
    that is not its whole storage, contiguous (a view with an offset, of part of it, strided)
    arrives as the same view (offset, strides) of a copy of the storage, one copy per storage:
    eager ops read through it (as_strided of a partial view), and views sharing it see each
    other's writes."""
    storages = {}

    def one(tensor):
        if not isinstance(tensor, torch.Tensor):
            return tensor
        if _is_whole_storage(tensor):
            return tensor.to(device)
        key = tensor.untyped_storage().data_ptr()
        if key not in storages:
            storages[key] = _storage_to(tensor, device)
        return _SameView.apply(tensor, storages[key])

    return _tree_map(one, value)


def _is_whole_storage(tensor):
    if tensor.layout != torch.strided or tensor.is_conj() or tensor.is_neg():
        return True  # no storage to view, or a view bit a copy of the storage would lose
    return (
        tensor.storage_offset() == 0
        and tensor.is_contiguous()
        and tensor.untyped_storage().nbytes() == tensor.numel() * tensor.element_size()
    )


def _storage_to(tensor, device):
    """`tensor`'s whole storage as a 1-d tensor of its dtype, copied to `device`."""
    size = tensor.untyped_storage().nbytes() // tensor.element_size()
    whole = torch.empty(0, dtype=tensor.dtype, device=tensor.device)
    return whole.set_(tensor.untyped_storage(), 0, (size,), (1,)).detach().to(device)


class _SameView(torch.autograd.Function):
    """`tensor`'s view of `storage` (its storage, on another device); gradients go back to
    `tensor`'s device."""

    @staticmethod
    def forward(ctx, tensor, storage):
        ctx.device = tensor.device
        return storage.as_strided(tensor.shape, tensor.stride(), tensor.storage_offset())

    @staticmethod
    def backward(ctx, grad):
        return grad.to(ctx.device), None


def to_host(value, device):
    """`value` with every tensor, each checked to be on `device`, copied to the host."""

    def one(tensor):
        if not isinstance(tensor, torch.Tensor):
            return tensor
        assert tensor.device.type == torch.device(device).type, (
            f"a compiled output is on {tensor.device}, not on the backend's {device}"
        )
        return tensor.to(HOST)

    return _tree_map(one, value)


def _tree_map(fn, value):
    if isinstance(value, (tuple, list)):
        return type(value)(_tree_map(fn, item) for item in value)
    if isinstance(value, dict):
        return {key: _tree_map(fn, item) for key, item in value.items()}
    return fn(value)
