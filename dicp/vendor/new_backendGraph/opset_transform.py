"""The new_backendgraph pass pipeline: ATen graph -> vendor graph, one flat function."""

import torch

from dicp.api import convert, rewrite_patterns

from .conv_epilogue import fold_convolution_epilogues
from .pattern_replacement import REWRITES


def opset_transform(gm: torch.fx.GraphModule, ctx) -> torch.fx.GraphModule:
    # 1. ATen -> vendor ops through the conversion table; the rest stays ATen (fallback).
    gm = convert(gm, ctx)
    # 2. Vendor-level rewrites (round-trip casts and friends).
    gm = rewrite_patterns(gm, REWRITES)
    # 3. Per-channel affine ops and ReLU after a convolution folded into it (batch norm).
    gm = fold_convolution_epilogues(gm)
    return gm
