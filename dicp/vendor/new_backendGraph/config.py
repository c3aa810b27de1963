"""Knobs of new_backendgraph (declared in dicp.config), its decomposition table, and what
`native` means on this machine."""

import platform
from pathlib import Path

import torch

from dicp.api import build_decompositions, config as dicp_config

aten = torch.ops.aten

TARGETS = ("cpp", "python", "python_loops")

OWNER = "new_backendgraph"
dicp_config.declare(
    "new_backendgraph_target",
    dicp_config.Choice(*TARGETS),
    "cpp",
    "`cpp`: generated C++ kernels; `python`: Python kernels (each vendor op as "
    "torch ops, no compiler needed); `python_loops`: the C++ target's loop "
    "nests printed as Python (no compiler, slow: for checking a schedule or "
    "a renderer on small inputs)",
    owner=OWNER,
)
dicp_config.declare(
    "chip_variant",
    dicp_config.Text(),
    "native",
    "`-march` value (`native`, `x86-64-v2`, `x86-64-v3`, ...; `generic` for "
    "none); part of the cache key",
    owner=OWNER,
)
dicp_config.declare("cxx", dicp_config.Text(), "g++", "the C++ compiler", owner=OWNER)
dicp_config.declare(
    "bounds_check",
    dicp_config.Flag(),
    False,
    "build kernels that check every load and store against its tensor's "
    "storage, and native entries that check each matrix product's operands: "
    "an access outside raises `BoundsError` naming the graph, kernel or "
    "product, buffer and element (slower; part of the cache key)",
    owner=OWNER,
)
dicp_config.declare(
    "native_entry",
    dicp_config.Flag(),
    True,
    "run each run of kernels and float32 matrix products between a "
    "graph's Python steps (fallbacks, library calls) from one generated C++ "
    "function, symbolic sizes passed to it as int64; off: a Python call per "
    "kernel",
    owner=OWNER,
)

# Composite ops decomposed into the vocabulary before conversion (on top of torch's core
# ATen decompositions).
EXTRA_DECOMPOSITIONS = [
    aten.gelu,
    aten.gelu_backward,
    aten.silu,
    aten.silu_backward,
    aten.hardswish,
    aten.hardswish_backward,
    aten.hardsigmoid,
    aten._softmax,
    aten._log_softmax,
    aten._softmax_backward_data,
    aten._log_softmax_backward_data,
    aten.native_layer_norm,
    aten.native_layer_norm_backward,
    aten.native_group_norm,
    aten.native_group_norm_backward,
    aten.native_batch_norm_backward,
    aten.nll_loss_forward,
    aten.nll_loss_backward,
    aten.embedding,
    aten.embedding_dense_backward,
    aten.threshold_backward,
    aten.sigmoid_backward,
    aten.tanh_backward,
    aten.upsample_nearest2d,
    aten.native_dropout,
    aten.native_dropout_backward,
    aten.repeat,
    aten.squeeze,
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
    aten.empty_like,
    aten.zero,
    aten.fill,
    aten.linalg_vector_norm,  # in torch's core table from 2.15 only
    aten._native_batch_norm_legit.no_stats,  # instance norm, batch norm without running stats
]
# Ops the conversion table handles better than the generic decomposition.
KEEP = [aten.clamp_min, aten.clamp_max, aten.hann_window, aten.slice_scatter]


def decompositions():
    return build_decompositions(EXTRA_DECOMPOSITIONS, KEEP)


def codegen_target() -> str:
    return dicp_config.new_backendgraph_target


def chip_variant() -> str:
    return dicp_config.chip_variant


def compiler() -> str:
    return dicp_config.cxx


def bounds_check() -> bool:
    return dicp_config.bounds_check


def native_entry() -> bool:
    """Native entries, unless DICP_PROFILE_KERNELS names each call for the profiler."""
    return dicp_config.native_entry and not dicp_config.profile_kernels


def host_cpu() -> str:
    """Part of the cache key for `native`, which means something different per machine."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return line
    except OSError:
        pass
    return platform.processor() or platform.machine()
