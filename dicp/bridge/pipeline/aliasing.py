"""Graph outputs that are tensors of their own, as eager's are.

A compiled graph may return an output that eager computes as new memory as a view of a buffer
of its own instead: a product's result reshaped, a dropout with p=0 that is the identity. A
view returned by the autograd.Function AOTAutograd wraps a training graph in may not be
modified in place ("a view created inside a custom Function"): Hugging Face Wav2Vec2's
`hidden_states[mask] = ...` after its feature projection failed. The wrapper passes each such
output through `own`.
"""

import torch


def own(tensor):
    """`tensor`, or, if it is a view, a tensor on the same memory that is not one. A lazily
    conjugated or negated view (`_conj`, `_neg_view`) gets memory of its own with the values
    resolved: a tensor made on its storage would drop the bit, and its values with it
    (fft.ifft, whose graph ends in `_conj`, returned fft's conjugate, silently)."""
    if tensor._base is None:
        return tensor
    if tensor.is_conj() or tensor.is_neg():
        return tensor.resolve_conj().resolve_neg()
    return torch.empty((0,), dtype=tensor.dtype, device=tensor.device).set_(
        tensor.untyped_storage(), tensor.storage_offset(), tensor.size(), tensor.stride()
    )


def storages_apart(targets, others) -> bool:
    """Whether no tensor of `targets` shares its storage with another of them or with one of
    `others` (empty tensors, whose storages may all be at address 0, count as shared)."""
    storages = {t.untyped_storage().data_ptr() for t in targets}
    if len(storages) < len(targets):
        return False
    return not any(o.untyped_storage().data_ptr() in storages for o in others)
