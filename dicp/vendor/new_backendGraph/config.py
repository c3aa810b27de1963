"""Knobs of new_backendgraph and its decomposition table.

DICP_NEW_BACKENDGRAPH_TARGET  cpp (default) or python: which kernels codegen renders
DICP_CHIP_VARIANT             native (default) or an x86-64 level / -march value
DICP_CXX                      the C++ compiler (default g++)
"""
import os

import torch

from dicp.dynamo_bridge.decompositions import build_decompositions

aten = torch.ops.aten

TARGETS = ("cpp", "python")

# Composite ops decomposed into the vocabulary before conversion (on top of torch's core
# ATen decompositions).
EXTRA_DECOMPOSITIONS = [
    aten.gelu, aten.gelu_backward, aten.silu, aten.silu_backward, aten.hardswish,
    aten.hardswish_backward, aten.hardsigmoid, aten._softmax, aten._log_softmax,
    aten._softmax_backward_data, aten._log_softmax_backward_data, aten.native_layer_norm,
    aten.native_layer_norm_backward, aten.native_group_norm, aten.native_group_norm_backward,
    aten.native_batch_norm_backward,
    aten.nll_loss_forward, aten.nll_loss_backward,
    aten.embedding, aten.embedding_dense_backward, aten.threshold_backward,
    aten.sigmoid_backward, aten.tanh_backward, aten.upsample_nearest2d,
    aten.native_dropout, aten.native_dropout_backward, aten.repeat, aten.squeeze,
    aten.stack, aten.split, aten.split_with_sizes, aten.slice_scatter, aten.select_scatter,
    aten.masked_fill, aten.addcmul, aten.rsub, aten.square, aten.mse_loss,
    aten.mse_loss_backward, aten.leaky_relu, aten.leaky_relu_backward, aten.elu,
    aten.elu_backward, aten.hardtanh, aten.hardtanh_backward, aten.logsumexp, aten.lerp,
    aten.glu, aten.new_empty_strided, aten.empty_like, aten.zero, aten.fill,
    aten.max_pool2d_with_indices_backward,
]
# Ops the conversion table handles better than the generic decomposition.
KEEP = [aten.clamp_min, aten.clamp_max]


def decompositions():
    return build_decompositions(EXTRA_DECOMPOSITIONS, KEEP)


def codegen_target() -> str:
    target = os.environ.get("DICP_NEW_BACKENDGRAPH_TARGET", "cpp").strip().lower()
    if target not in TARGETS:
        raise ValueError(f"DICP_NEW_BACKENDGRAPH_TARGET={target!r}: expected one of {TARGETS}")
    return target


def chip_variant() -> str:
    return os.environ.get("DICP_CHIP_VARIANT", "native").strip()


def compiler() -> str:
    return os.environ.get("DICP_CXX", "g++")
