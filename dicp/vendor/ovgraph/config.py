"""Knobs of ovgraph (declared in dicp.config) and its decomposition table."""

import torch

from dicp.api import build_decompositions, config as dicp_config

aten = torch.ops.aten

OWNER = "ovgraph"
dicp_config.declare(
    "ovgraph_device",
    dicp_config.Text(),
    "CPU",
    "the OpenVINO device graphs compile for (`CPU`; `GPU`, `NPU` are the chip "
    "variants, `AUTO` lets OpenVINO choose)",
    owner=OWNER,
)
dicp_config.declare(
    "ovgraph_precision",
    dicp_config.Choice("f32", "f16", "bf16"),
    "f32",
    "OpenVINO's inference precision hint (its CPU plugin defaults to bf16 on "
    "chips with AMX/AVX-512 bf16: `f32` keeps eager's accuracy)",
    owner=OWNER,
)
dicp_config.declare(
    "ovgraph_model_cache",
    dicp_config.Flag(),
    True,
    "let OpenVINO cache compiled models under `<cache dir>/openvino`",
    owner=OWNER,
)

# Composite ops decomposed before conversion, on top of torch's core ATen decompositions:
# OpenVINO has no single op for them, and their pieces are converted.
EXTRA_DECOMPOSITIONS = [
    aten.gelu_backward,
    aten.silu_backward,
    aten.hardswish,
    aten.hardswish_backward,
    aten.hardsigmoid,
    aten._softmax_backward_data,
    aten._log_softmax_backward_data,
    aten.native_layer_norm,
    aten.native_layer_norm_backward,
    aten.native_group_norm,
    aten.native_group_norm_backward,
    aten.native_batch_norm_backward,
    aten.nll_loss_forward,
    aten.nll_loss_backward,
    aten.embedding_dense_backward,
    aten.threshold_backward,
    aten.sigmoid_backward,
    aten.tanh_backward,
    aten.repeat,
    aten.stack,
    aten.split,
    aten.split_with_sizes,
    aten.select_scatter,
    aten.masked_fill,
    aten.addcmul,
    aten.rsub,
    aten.mse_loss,
    aten.mse_loss_backward,
    aten.leaky_relu,
    aten.leaky_relu_backward,
    aten.elu,
    aten.elu_backward,
    aten.hardtanh,
    aten.hardtanh_backward,
    aten.logsumexp,
    aten.lerp,
    aten.glu,
    aten.new_empty_strided,
    aten.zero,
    aten.fill,
    aten.linalg_vector_norm,
]
# Ops OpenVINO has one op for: kept whole (Gelu, Swish, Softmax, LogSoftmax, Gather).
KEEP = [
    aten.gelu,
    aten.silu,
    aten._softmax,
    aten._log_softmax,
    aten.embedding,
    aten.clamp_min,
    aten.clamp_max,
]


def decompositions():
    return build_decompositions(EXTRA_DECOMPOSITIONS, KEEP)
