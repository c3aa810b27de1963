"""oneDNN's fused operators, reached through `torch.ops.mkldnn`: the private entry Inductor
calls for the same purpose. torch has no public entry to oneDNN's inner product or to a
convolution with a fused activation, so they are used only here (gemm.py and the convolution
epilogues of conv_epilogue.py call these functions).
"""

from functools import lru_cache

import torch


@lru_cache(maxsize=None)
def has(op_name):
    """Whether this torch build reaches oneDNN's `op_name` (a CPU build without oneDNN, or one
    from before the op, does not)."""
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, op_name)


def linear(a, weight, bias):
    """a @ weight.t() (+ bias), weight being [N, K]."""
    return torch.ops.mkldnn._linear_pointwise(a, weight, bias, "none", [], "")


def convolution(x, weight, bias, stride, padding, dilation, groups, activation):
    """A convolution with `activation` ("none" or "relu") applied to its result in the same
    pass. Its result has aten.convolution's layout (channels-last when the input or the
    weight is) and, for ReLU, exactly relu(aten.convolution(...))'s values where ATen's
    convolution is oneDNN's too."""
    return torch.ops.mkldnn._convolution_pointwise(
        x, weight, bias, padding, stride, dilation, groups, activation, [], ""
    )
