"""The ovgraph pass pipeline: ATen graph -> OpenVINO op graph, one flat function."""

import torch

from dicp.api import convert


def opset_transform(gm: torch.fx.GraphModule, ctx) -> torch.fx.GraphModule:
    # ATen -> OpenVINO ops through the conversion table; the rest stays ATen. Codegen
    # partitions the result into OpenVINO subgraphs and eager calls (shared graph_engine.py).
    return convert(gm, ctx)
