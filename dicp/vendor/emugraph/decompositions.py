"""emugraph's decomposition table: new_backendgraph's, with the ops whose torch decomposition
depends on the device type decomposed as for the host. The device's eager ops are the CPU's
(its fallback runs them there), so a compiled graph must give what the CPU gives."""

import inspect

import torch

from dicp.api import get_decompositions

from ..new_backendGraph import config as host_config

aten = torch.ops.aten

# Batch norm's decompositions (torch's native_batch_norm_helper) save statistics as CUDA's
# kernel does on any device but the CPU: in eval mode the running ones where the CPU saves
# empty tensors, and in float32 where the CPU saves them in the input's dtype.
BATCH_NORMS = (
    aten.native_batch_norm.default,
    aten._native_batch_norm_legit.default,
    aten._native_batch_norm_legit.no_stats,
    aten._native_batch_norm_legit_no_training.default,
    aten._native_batch_norm_legit_functional.default,
)


def native_layer_norm(input, normalized_shape, weight, bias, eps):
    """The CPU's result dtypes: mean and rstd in the input's dtype (torch's decomposition keeps
    them in float32 on any device but the CPU)."""
    decomposition = get_decompositions([aten.native_layer_norm.default])
    out, mean, rstd = decomposition[aten.native_layer_norm.default](
        input, normalized_shape, weight, bias, eps
    )
    return out, mean.to(input.dtype), rstd.to(input.dtype)


def batch_norm_as_on_host(op):
    """torch's decomposition of batch norm op `op`, its saved mean and rstd (results 1 and 2)
    the CPU's: empty in eval mode, in the input's dtype."""
    decomposition = get_decompositions([op])[op]
    signature = inspect.signature(decomposition)

    def decomposed(*args, **kwargs):
        out, mean, rstd, *rest = decomposition(*args, **kwargs)
        arguments = signature.bind(*args, **kwargs).arguments
        input = arguments["input"]
        if not arguments.get("training", False):  # _no_training has no argument: eval
            mean = rstd = input.new_zeros((0,))
        return (out, mean.to(input.dtype), rstd.to(input.dtype), *rest)

    return decomposed


def decompositions():
    return {
        **host_config.decompositions(),
        aten.native_layer_norm.default: native_layer_norm,
        **{op: batch_norm_as_on_host(op) for op in BATCH_NORMS},
    }
