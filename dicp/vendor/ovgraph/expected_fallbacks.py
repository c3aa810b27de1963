"""The ATen ops ovgraph knowingly runs as eager fallback, each with its reason.

Strict mode (DICP_STRICT=1) allows these and no other; the op test harness fails a test whose
graph falls back on an op not listed. Keys are fnmatch patterns over `aten.<op>.<overload>`.
"""

import torch

_RANDOM = "random numbers: OpenVINO's RandomUniform does not reproduce torch's generator"
_COMPLEX = "complex dtypes: OpenVINO has no complex element type"
_LATER = "no converter yet: OpenVINO's {} would run it; add the row in conversion.py"

EXPECTED_FALLBACKS = {
    "aten.view_as_complex.*": _COMPLEX,
    "aten.view_as_real.*": _COMPLEX,
    "aten.native_dropout.*": _RANDOM,
    "aten.bernoulli*": _RANDOM,
    "aten.rand*": _RANDOM,
    "aten.normal*": _RANDOM,
    "aten.uniform*": _RANDOM,
    # no storage in a graph engine: as_strided of a value that is not its own flat storage
    "aten.as_strided.default": "a strided view of storage, which the engine's values do not "
    "have, unless the tensor is contiguous from offset 0 and the "
    "strides stay within its elements (then a Gather converts it)",
    # Not converted yet; each names the OpenVINO op a converter would use.
    "aten.scatter_add.default": _LATER.format("ScatterElementsUpdate (reduction sum)"),
    "aten.scatter.*": _LATER.format("ScatterElementsUpdate"),
    "aten.index_put.default": _LATER.format("ScatterNDUpdate"),
    "aten.index.Tensor": "a boolean index: its result's shape depends on the data, which "
    "an engine Model's shape cannot (integer indices are converted)",
    "aten.slice_scatter.default": _LATER.format("SliceScatter"),
    "aten._scaled_dot_product_flash_attention_for_cpu.default": _RANDOM + " (with dropout)",
    "aten._scaled_dot_product_flash_attention_for_cpu_backward.*": _LATER.format(
        "MatMul and Softmax pieces"
    ),
    "aten.topk.default": _LATER.format("TopK"),
    "aten.sort.*": _LATER.format("TopK over the whole dim (stable order)"),
    "aten.repeat_interleave.Tensor": _LATER.format("a data-dependent output shape"),
    "aten.max_pool[23]d_with_indices*": _LATER.format("MaxPool-14 (with indices)"),
    "aten.avg_pool[23]d*": _LATER.format("AvgPool"),
    "aten._adaptive_avg_pool[23]d*": _LATER.format("AdaptiveAvgPool"),
    "aten.adaptive_max_pool[23]d*": _LATER.format("AdaptiveMaxPool"),
    "aten.replication_pad[123]d_backward.default": _LATER.format("ReduceSum over the edge copies"),
    "aten._native_batch_norm_legit*": _LATER.format("BatchNormInference and reductions"),
    "aten.convolution_backward.default": _LATER.format("ConvolutionBackpropData"),
    "aten.convolution.default": "transposed (OpenVINO's ConvolutionBackpropData would run it, "
    "no converter yet) or with a weight of symbolic shape (the "
    "CPU plugin refuses it); other convolutions are converted",
}

# Ops on these dtypes run eagerly whatever the op (Backend.dtype_fallbacks).
DTYPE_FALLBACKS = {
    torch.float64: "OpenVINO's CPU plugin computes float64 in float32 (checked on openvino "
    "2026.4: 1.0 + 1e-10 == 1.0), a silent precision loss",
    torch.bfloat16: "numpy, through which ovgraph feeds OpenVINO, has no bfloat16",
    torch.complex64: "OpenVINO has no complex element type",
    torch.complex128: "OpenVINO has no complex element type",
}
