"""emugraph's decomposition table: new_backendgraph's, with the ops whose torch decomposition
depends on the device type decomposed as for the host. The device's eager ops are the CPU's
(its fallback runs them there), so a compiled graph must give what the CPU gives."""
import torch

from ..new_backendGraph import config as host_config

aten = torch.ops.aten


def native_layer_norm(input, normalized_shape, weight, bias, eps):
    """The CPU's result dtypes: mean and rstd in the input's dtype (torch's decomposition keeps
    them in float32 on any device but the CPU)."""
    out, mean, rstd = torch._refs.native_layer_norm(input, normalized_shape, weight, bias, eps)
    return out, mean.to(input.dtype), rstd.to(input.dtype)


def decompositions():
    return {**host_config.decompositions(), aten.native_layer_norm.default: native_layer_norm}
