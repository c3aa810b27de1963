"""Layouts other than the traced ones: eager fallback results, and a backward's saved tensors.

An op run as eager ATen may return a layout that follows its input's: adaptive_max_pool2d of
a channels-last tensor is channels-last. A backend that computes an input in another layout
than the trace (a convolution run channels-last) then gets a result whose strides differ from
the traced ones, and code generated from the trace reads it as traced: the wrong elements,
silently (a convolution, adaptive_max_pool2d, max_pool2d: errors of 1.2).
The wrapper passes each fallback result through `as_traced`.

A forward may return a tensor saved for the backward in another layout than traced (a
backend's `chooses_saved_layouts`); AOTAutograd then hands the backward compiler fake inputs
with those strides while the backward graph's placeholders still carry the traced ones.
`restride_inputs` gives the placeholders the real strides and keeps the traced value under
TRACED_VAL, for what addresses the storage itself (as_strided, an output viewing the input).
"""

import torch

TRACED_VAL = "dicp_traced_val"  # node.meta key: a placeholder's value before restride_inputs


def as_traced(tensor, sizes, strides):
    """`tensor`, or a copy of it with `strides` where its own differ (dims of size 1 aside).
    `strides` a tuple: the usual case, equal strides, is then one comparison."""
    if tensor.stride() == strides or all(
        size <= 1 or have == want for have, want, size in zip(tensor.stride(), strides, sizes)
    ):
        return tensor
    return torch.empty_strided(sizes, strides, dtype=tensor.dtype, device=tensor.device).copy_(
        tensor
    )


def restride_inputs(gm, example_inputs):
    """Give each placeholder of `gm` whose example input has other static strides (same sizes)
    that input as its value, the traced value kept under TRACED_VAL."""
    placeholders = gm.graph.find_nodes(op="placeholder")
    for node, example in zip(placeholders, example_inputs):
        traced = node.meta.get("val")
        if _restrided(traced, example):
            node.meta[TRACED_VAL] = traced
            node.meta["val"] = example


def traced_value(node):
    """The value `node` was traced with: a restrided placeholder's original, else its own."""
    return node.meta.get(TRACED_VAL, node.meta.get("val"))


def _restrided(traced, example) -> bool:
    if not isinstance(traced, torch.Tensor) or not isinstance(example, torch.Tensor):
        return False
    values = (*traced.shape, *traced.stride(), *example.shape, *example.stride())
    if not all(type(v) is int for v in values):
        return False
    return traced.shape == example.shape and traced.stride() != example.stride()
