"""Eager fallback results in the layout they were traced with.

An op run as eager ATen may return a layout that follows its input's: adaptive_max_pool2d of
a channels-last tensor is channels-last. A backend that computes an input in another layout
than the trace (a convolution run channels-last) then gets a result whose strides differ from
the traced ones, and code generated from the trace reads it as traced: the wrong elements,
silently (a convolution, adaptive_max_pool2d, max_pool2d: errors of 1.2).
The wrapper passes each fallback result through `as_traced`.
"""

import torch


def as_traced(tensor, sizes, strides):
    """`tensor`, or a copy of it with `strides` where its own differ (dims of size 1 aside)."""
    if all(size <= 1 or have == want for have, want, size in zip(tensor.stride(), strides, sizes)):
        return tensor
    return torch.empty_strided(sizes, strides, dtype=tensor.dtype, device=tensor.device).copy_(
        tensor
    )
