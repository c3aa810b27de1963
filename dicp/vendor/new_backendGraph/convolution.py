"""FusedConvolution: a convolution with its folded epilogue (conv_epilogue.py) and an optional
ReLU, run as one oneDNN call where oneDNN takes its operands."""

import torch

from . import onednn


def in_channels_last(x, weight):
    """Both operands channels-last: oneDNN's fastest layout, and the result's too
    (ConvolutionNHWC; FusedConvolution with `channels_last`)."""
    return tuple(t.contiguous(memory_format=torch.channels_last) for t in (x, weight))


def fused_impl(x, weight, bias, stride, padding, dilation, groups, channels_last, relu):
    """The reference: ATen's convolution (channels-last operands where `channels_last`, as
    ConvolutionNHWC runs it), then ReLU."""
    if channels_last:
        x, weight = in_channels_last(x, weight)
    result = torch.ops.aten.convolution.default(
        x, weight, bias, stride, padding, dilation, False, [0] * len(stride), groups
    )
    return torch.relu_(result) if relu else result


def fused(x, weight, bias, stride, padding, dilation, groups, channels_last, relu):
    """fused_impl in one pass over the result: ReLU applied as the convolution writes it,
    where oneDNN takes the operands; elsewhere fused_impl itself."""
    if channels_last:
        x, weight = in_channels_last(x, weight)
    if not (
        _onednn_applies(x, weight, bias) and aten_takes_onednn(x, weight, stride, dilation, groups)
    ):
        return fused_impl(x, weight, bias, stride, padding, dilation, groups, False, relu)
    return onednn.convolution(
        x, weight, bias, stride, padding, dilation, groups, "relu" if relu else "none"
    )


def _onednn_applies(x, weight, bias):
    """Non-empty float32 CPU operands, each dense in the default or the channels-last order:
    the layouts whose result layout oneDNN picks as aten.convolution does (fused_impl's
    layout, which the kernels after it were generated for)."""
    tensors = [x, weight] + ([bias] if bias is not None else [])
    return all(
        t.dtype == torch.float32 and t.device.type == "cpu" and t.numel() and _dense(t)
        for t in tensors
    ) and onednn.has("_convolution_pointwise")


# ATen's convolution runs small float32 problems with its own direct algorithm rather than
# oneDNN's, which costs more to set up: a UNet's 1x32x16x16 3x3 convolutions took 45 us that
# way and 135 us as oneDNN's fused call, 0.6 ms of a 4.4 ms step. The fused call is taken
# where ATen would take oneDNN too, by the rule of ATen's Convolution.cpp (use_mkldnn), and
# such convolutions stay NCHW (conversion.py), where that algorithm runs.
ATEN_DIRECT_MAX_ELEMENTS = 20480


def aten_takes_onednn(x, weight, stride, dilation, groups):
    """Whether ATen's convolution would run these float32 operands with oneDNN, with the
    threads and oneDNN switch of this process (algorithm_state)."""
    if not torch.backends.mkldnn.enabled:
        return False
    if x.dim() != 4:
        return True  # 3-d convolutions: oneDNN's
    # ATen's rule reads shapes only: a channels-last 1x1 convolution of a small batch on one
    # thread runs its own algorithm too, copying the input NCHW first
    one_by_one = weight.shape[-1] == 1 and weight.shape[-2] == 1
    if not (
        any(s != 1 for s in stride)
        or any(d != 1 for d in dilation)
        or x.shape[0] >= 16
        or not one_by_one
        or torch.get_num_threads() > 1
    ):
        return False
    return (
        groups > 1
        or (weight.shape[-1] > 3 and weight.shape[-2] > 3)
        or x.shape[0] > 1
        or x.numel() > ATEN_DIRECT_MAX_ELEMENTS
    )


def algorithm_state() -> str:
    """What aten_takes_onednn reads beside the operands, which the layout the conversion
    picks for a convolution follows (Backend.process_state): a graph compiled with two
    threads ran its 1x1 convolutions channels-last; warm from the cache at one thread,
    where ATen runs them with its own NCHW algorithm, each backward converted its gradient
    back (0.9 ms a step of a 3.4 ms depthwise block)."""
    return f"threads>1={torch.get_num_threads() > 1} onednn={torch.backends.mkldnn.enabled}"


def channels_last_only(t):
    """Whether `t` is a channels-last 4-d tensor and not also a contiguous one."""
    return (
        t.dim() == 4
        and not t.is_contiguous()
        and t.is_contiguous(memory_format=torch.channels_last)
    )


def _dense(t):
    if t.is_contiguous():
        return True
    channels_last = {4: torch.channels_last, 5: torch.channels_last_3d}.get(t.dim())
    return channels_last is not None and t.is_contiguous(memory_format=channels_last)
