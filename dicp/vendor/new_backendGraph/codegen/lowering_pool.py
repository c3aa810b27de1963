"""Pooling as window reductions over the last two dims: one loop nest per output."""
import torch

from dicp.dynamo_bridge.symbolic import shape_of

from .ctypes_map import compute_ctype, infinity_or_limit
from .ir import Buffer
from .lowering import lowering
from .lowering_extra import _new_buffer
from .sym import IDiv, index_var


def _window(k, out_index, x, kernel, stride, padding, dilation, inner):
    """Input (h, w) read by output position `out_index` at window offsets `inner`."""
    h = out_index[-2] * stride[0] - padding[0] + inner[0] * dilation[0]
    w = out_index[-1] * stride[1] - padding[1] + inner[1] * dilation[1]
    inside = (f"({k.index(h)} >= 0 && {k.index(h)} < {k.index(x.sizes[-2])} && "
              f"{k.index(w)} >= 0 && {k.index(w)} < {k.index(x.sizes[-1])})")
    return h, w, inside


@lowering("MaxPool2dWithIndices")
def max_pool2d(g, node, x, kernel, stride, padding, dilation, ceil_mode):
    x = g.value(x)
    values_val, indices_val = node.meta["val"]
    values, indices = _new_buffer(g, values_val), _new_buffer(g, indices_val)
    T = compute_ctype(x.dtype)

    def pre(k, outer):
        k.line(f"{T} best = {infinity_or_limit(T, True)};")
        k.line("int64_t best_index = -1;")

    def body(k, outer, inner):
        h, w, inside = _window(k, outer, x, kernel, stride, padding, dilation, inner)
        value = k.masked(inside, lambda: x.load(k, outer[:-2] + [h, w]),
                         infinity_or_limit(T, True), T)
        position = k.index(h * x.sizes[-1] + w)
        k.line(f"if ({inside} && (best_index < 0 || {value} > best || dicp::is_nan({value}))) "
               f"{{ best = {value}; best_index = {position}; }}")

    def post(k, outer):
        values.store(k, outer, "best")
        indices.store(k, outer, "best_index")

    g.kernel(values.sizes, pre=pre, inner=[(0, kernel[0]), (0, kernel[1])], body=body,
             post=post)
    return values, indices


@lowering("AvgPool2d")
def avg_pool2d(g, node, x, kernel, stride, padding, ceil_mode, count_include_pad, divisor):
    x = g.value(x)
    out = _new_buffer(g, node.meta["val"])

    def body(k, outer, inner):
        h, w, inside = _window(k, outer, x, kernel, stride, padding, (1, 1), inner)
        value = k.masked(inside, lambda: x.load(k, outer[:-2] + [h, w]), "0", "double")
        k.line(f"acc += {value};")
        k.line(f"count += {inside} ? 1 : 0;")

    def post(k, outer):
        count = _divisor(k, x, outer, kernel, stride, padding, count_include_pad, divisor)
        out.store(k, outer, f"acc / static_cast<double>({count})")

    g.kernel(out.sizes, pre=lambda k, o: k.line("double acc = 0; int64_t count = 0;"),
             inner=[(0, kernel[0]), (0, kernel[1])], body=body, post=post)
    return out


def _divisor(k, x, outer, kernel, stride, padding, count_include_pad, divisor):
    if divisor:
        return str(divisor)
    if not count_include_pad:
        return "count"
    # the window clipped to the padded input, as ATen counts it
    spans = []
    for d, (size, i) in enumerate(zip(x.sizes[-2:], outer[-2:])):
        start = k.index(i * stride[d] - padding[d])
        end = f"dicp::min_of<int64_t>({start} + {kernel[d]}, {k.index(size + padding[d])})"
        spans.append(f"({end} - {start})")
    return " * ".join(spans)


@lowering("AdaptiveAvgPool2d")
def adaptive_avg_pool2d(g, node, x, output_size):
    x = g.value(x)
    out = _new_buffer(g, node.meta["val"])
    in_h, in_w = x.sizes[-2:]
    out_h, out_w = out.sizes[-2:]

    def bounds(i, size_in, size_out):
        return IDiv(i * size_in, size_out), IDiv((i + 1) * size_in + size_out - 1, size_out)

    def body(k, outer, inner):
        k.line(f"acc += {x.load(k, outer[:-2] + inner)};")

    def post(k, outer):
        (h0, h1), (w0, w1) = bounds(outer[-2], in_h, out_h), bounds(outer[-1], in_w, out_w)
        count = f"(({k.index(h1)} - {k.index(h0)}) * ({k.index(w1)} - {k.index(w0)}))"
        out.store(k, outer, f"acc / static_cast<double>{count}")

    outer_vars = _outer_vars(len(out.sizes))
    g.kernel(out.sizes, pre=lambda k, o: k.line("double acc = 0;"),
             inner=[bounds(outer_vars[-2], in_h, out_h), bounds(outer_vars[-1], in_w, out_w)],
             body=body, post=post)
    return out


def _outer_vars(rank):
    """The outer loop variables kernel() will use, for bounds that depend on them."""
    return [index_var("i", d) for d in range(rank)]
