"""FusedConvolution: a convolution with its folded epilogue (conv_epilogue.py) and an optional
ReLU, run as one oneDNN call where oneDNN takes its operands."""

import torch

from . import gemm, onednn

aten = torch.ops.aten


def in_channels_last(x, weight):
    """Both operands channels-last: oneDNN's fastest layout, and the result's too
    (ConvolutionNHWC; FusedConvolution with `channels_last`)."""
    return tuple(t.contiguous(memory_format=torch.channels_last) for t in (x, weight))


# --- 1x1 convolutions as the matrix products they are ------------------------------------
# A 1x1 convolution without padding over channels-last pixels is a product of the pixels it
# reads as rows ([N*H*W, Cin], a view at stride 1) and the weight ([Cout, Cin]); so are its
# input and weight gradients. oneDNN's call costs more than the product for the small ones: a
# MobileNetV2 block's [8, 56, 2, 2] -> 336 channels took 42 us forward and 104 us backward,
# the products 20 and 31 (AMD EPYC, two threads), and such convolutions are two of a
# depthwise block's three. The result takes the layout ATen's oneDNN call gives a
# channels-last input: channels-last. Only small ones: oneDNN's fixed cost is what the
# products save, and from some thousand pixels its backward is faster ([8, 64, 8, 8] -> 256:
# 135 against 197 us; ResNet-50's [32, 64, 14, 14] -> 256: 0.93 against 2.2 ms).
PRODUCT_MAX_WORK = 2**21  # pixels x input channels x output channels
PRODUCT_MAX_PIXELS = 128  # or as many pixels, of any channels ([8, 112, 2, 2] -> 1280: 0.5x)


def convolution_kernel(
    x, weight, bias, stride, padding, dilation, transposed, output_padding, groups
):
    """aten.convolution, a 1x1 one over channels-last pixels as a matrix product."""
    if not _pixel_product(x, weight, stride, padding, dilation, transposed, groups):
        return torch.convolution(
            x, weight, bias, stride, padding, dilation, transposed, output_padding, groups
        )
    pixels = _sampled(x, stride)
    rows, columns = _rows(pixels), _weight_matrix(weight).t()
    return _as_pixels(gemm.aten_product(bias, rows, columns), pixels)


def convolution_nhwc_kernel(x, weight, bias, *rest):
    """ConvolutionNHWC's: both operands channels-last, then convolution_kernel."""
    return convolution_kernel(*in_channels_last(x, weight), bias, *rest)


def convolution_backward_kernel(grad, x, weight, bias_sizes, stride, padding, dilation, *rest):
    """aten.convolution_backward, a 1x1 one over channels-last pixels as matrix products:
    the input's gradient is grad's rows times the weight, the weight's grad's rows
    transposed times the input's, the bias's the column sums of grad's rows."""
    transposed, _, groups, mask = rest
    if not _pixel_product(x, weight, stride, padding, dilation, transposed, groups):
        return aten.convolution_backward.default(
            grad, x, weight, bias_sizes, stride, padding, dilation, *rest
        )
    rows, pixels = _rows(grad), _sampled(x, stride)
    grad_x = _input_grad(rows, weight, x, pixels, stride) if mask[0] else None
    grad_weight = (
        gemm.aten_product(None, rows.t(), _rows(pixels)).view(weight.shape) if mask[1] else None
    )
    grad_bias = rows.sum(0) if mask[2] else None
    return grad_x, grad_weight, grad_bias


def _input_grad(rows, weight, x, pixels, stride):
    """The gradient of `x`: grad's rows times the weight at the pixels read (`pixels`, every
    stride-th of x's), zero elsewhere."""
    grad = _as_pixels(gemm.aten_product(None, rows, _weight_matrix(weight)), pixels)
    if pixels is x:
        return grad
    grad_x = torch.zeros_like(x)
    grad_x[:, :, :: stride[0], :: stride[1]] = grad
    return grad_x


def convolution_backward_nhwc_kernel(grad, x, weight, *rest):
    """ConvolutionBackwardNHWC's: the input and weight channels-last, then
    convolution_backward_kernel."""
    return convolution_backward_kernel(grad, *in_channels_last(x, weight), *rest)


def _pixel_product(x, weight, stride, padding, dilation, transposed, groups):
    """Whether the convolution is a product of pixels and weight whose result ATen gives
    channels-last: a small 1x1 kernel without padding, one group, float32 CPU operands, and
    a channels-last (not also contiguous) input that ATen runs with oneDNN.
    The cheapest tests first: every convolution of a graph passes here at every step."""
    return (
        weight.shape[-2:] == (1, 1)
        and groups == 1
        and not transposed
        and x.dim() == 4
        and not any(padding)
        and x.dtype == weight.dtype == torch.float32
        and x.device.type == "cpu"
        and channels_last_only(x)
        and _small(x, weight, stride)
        and aten_takes_onednn(x, weight, stride, dilation, groups)
    )


def _small(x, weight, stride):
    n, cin, h, w = x.shape
    pixels = n * -(-h // stride[0]) * -(-w // stride[1])
    return pixels <= PRODUCT_MAX_PIXELS or pixels * cin * weight.shape[0] <= PRODUCT_MAX_WORK


def _sampled(x, stride):
    """The pixels of `x` a 1x1 convolution of `stride` reads: every stride-th (a view)."""
    if stride[0] == 1 and stride[1] == 1:
        return x
    return x[:, :, :: stride[0], :: stride[1]]


def _rows(t):
    """A [N, C, H, W] tensor as its [N*H*W, C] pixel rows: a view of a channels-last one, a
    copy of another layout."""
    return t.permute(0, 2, 3, 1).reshape(-1, t.shape[1])


def _weight_matrix(weight):
    return weight.reshape(weight.shape[0], weight.shape[1])


def _as_pixels(rows, like):
    """[N*H*W, C] rows as the channels-last [N, C, H, W] tensor of `like`'s pixels."""
    n, _, h, w = like.shape
    return rows.view(n, h, w, rows.shape[1]).permute(0, 3, 1, 2)


def fused_impl(x, weight, bias, stride, padding, dilation, groups, channels_last, relu):
    """The reference: ATen's convolution (channels-last operands where `channels_last`, as
    ConvolutionNHWC runs it), then ReLU."""
    if channels_last:
        x, weight = in_channels_last(x, weight)
    result = torch.convolution(
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
