"""Pooling as window reductions over the last two dims: one loop nest per output."""
import sympy

from .ctypes_map import compute_ctype, infinity_or_limit
from .lowering import lowering
from .lowering_extra import _new_buffer
from .sym import IDiv, loop_index


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
        k.line(f"acc += {k.masked(inside, lambda: x.load(k, outer[:-2] + [h, w]), '0', 'double')};")

    def post(k, outer):
        count = _avg_divisor(k, x.sizes, outer[-2:], kernel, stride, padding,
                             count_include_pad, divisor)
        out.store(k, outer, f"acc / static_cast<double>({count})")

    g.kernel(out.sizes, pre=lambda k, o: k.line("double acc = 0;"),
             inner=[(0, kernel[0]), (0, kernel[1])], body=body, post=post)
    return out


def _avg_divisor(k, in_sizes, window, kernel, stride, padding, count_include_pad, divisor):
    """ATen's divisor for the window at output position `window` (oh, ow)."""
    if divisor:
        return str(divisor)
    spans = []
    for d, (size, o) in enumerate(zip(in_sizes[-2:], window)):
        start = k.index(o * stride[d] - padding[d])
        end = f"dicp::min_of<int64_t>({start} + {kernel[d]}, {k.index(size + padding[d])})"
        if not count_include_pad:
            start, end = (f"dicp::max_of<int64_t>({start}, 0L)",
                          f"dicp::min_of<int64_t>({end}, {k.index(size)})")
        spans.append(f"({end} - {start})")
    return " * ".join(spans)


@lowering("AvgPool2dBackward")
def avg_pool2d_backward(g, node, grad, x, kernel, stride, padding, ceil_mode, count_include_pad,
                        divisor):
    grad, x = g.value(grad), g.value(x)
    out = _new_buffer(g, node.meta["val"])
    outer = loop_index(len(out.sizes))

    def window_range(d):
        """Output positions whose window may cover input index outer[d]: at most ceil(k/s)."""
        pos = outer[d - 2] + padding[d]
        hi = sympy.Min(IDiv(pos, stride[d]) + 1, grad.sizes[d - 2])
        return sympy.Max(hi - (kernel[d] + stride[d] - 1) // stride[d] - 1, 0), hi

    def body(k, outer, inner):
        covers = " && ".join(
            f"({k.index(o * stride[d] - padding[d])} <= {k.index(outer[d - 2])} && "
            f"{k.index(outer[d - 2])} < {k.index(o * stride[d] - padding[d] + kernel[d])})"
            for d, o in enumerate(inner))
        count = _avg_divisor(k, x.sizes, inner, kernel, stride, padding, count_include_pad,
                             divisor)
        value = k.masked(covers, lambda: k.emit(
            f"{grad.load(k, outer[:-2] + inner)} / static_cast<double>({count})", "double"),
            "0", "double")
        k.line(f"acc += {value};")

    g.kernel(out.sizes, pre=lambda k, o: k.line("double acc = 0;"),
             inner=[window_range(0), window_range(1)], body=body,
             post=lambda k, o: out.store(k, o, "acc"))
    return out


@lowering("MaxPool2dWithIndicesBackward")
def max_pool2d_backward(g, node, grad, x, kernel, stride, padding, dilation, ceil_mode, indices):
    """Each input element gathers the gradients of the windows whose saved index picked it:
    a loop over the output positions whose window can cover it, comparing their index with
    its own. Every store is to the loop's own element, so the loops run in parallel and as
    SIMD, where scattering through the indices would have to run serially."""
    grad, indices = g.value(grad), g.value(indices)
    out = _new_buffer(g, node.meta["val"])
    outer = loop_index(len(out.sizes))

    def window_range(d):
        """Output positions (along dim d) whose window may cover input index outer[d]: the
        last one starts at or before it; a window spans (kernel - 1) * dilation + 1."""
        hi = sympy.Min(IDiv(outer[d - 2] + padding[d], stride[d]) + 1, grad.sizes[d - 2])
        count = (kernel[d] - 1) * dilation[d] // stride[d] + 1
        return sympy.Max(hi - count, 0), hi

    def body(k, outer, inner):
        here = k.index(outer[-2] * out.sizes[-1] + outer[-1])
        picked = f"({indices.load(k, outer[:-2] + inner)} == {here})"
        k.line(f"acc += {k.masked(picked, lambda: grad.load(k, outer[:-2] + inner), '0', 'double')};")

    g.kernel(out.sizes, pre=lambda k, o: k.line("double acc = 0;"),
             inner=[window_range(0), window_range(1)], body=body,
             post=lambda k, o: out.store(k, o, "acc"))
    return out


@lowering("AdaptiveAvgPool2d")
def adaptive_avg_pool2d(g, node, x, output_size):
    x = g.value(x)
    out = _new_buffer(g, node.meta["val"])
    in_h, in_w = x.sizes[-2:]
    out_h, out_w = out.sizes[-2:]

    bounds = _adaptive_bounds

    def body(k, outer, inner):
        k.line(f"acc += {x.load(k, outer[:-2] + inner)};")

    def post(k, outer):
        (h0, h1), (w0, w1) = bounds(outer[-2], in_h, out_h), bounds(outer[-1], in_w, out_w)
        count = f"(({k.index(h1)} - {k.index(h0)}) * ({k.index(w1)} - {k.index(w0)}))"
        out.store(k, outer, f"acc / static_cast<double>{count}")

    outer_vars = loop_index(len(out.sizes))
    g.kernel(out.sizes, pre=lambda k, o: k.line("double acc = 0;"),
             inner=[bounds(outer_vars[-2], in_h, out_h), bounds(outer_vars[-1], in_w, out_w)],
             body=body, post=post)
    return out


def _adaptive_bounds(i, size_in, size_out):
    return IDiv(i * size_in, size_out), IDiv((i + 1) * size_in + size_out - 1, size_out)


@lowering("AdaptiveAvgPool2dBackward")
def adaptive_avg_pool2d_backward(g, node, grad, x):
    grad = g.value(grad)
    out = _new_buffer(g, node.meta["val"])
    in_h, in_w = out.sizes[-2:]
    out_h, out_w = grad.sizes[-2:]
    outer = loop_index(len(out.sizes))

    def body(k, outer, inner):
        (h0, h1), (w0, w1) = (_adaptive_bounds(inner[0], in_h, out_h),
                              _adaptive_bounds(inner[1], in_w, out_w))
        h, w = k.index(outer[-2]), k.index(outer[-1])
        covers = (f"({k.index(h0)} <= {h} && {h} < {k.index(h1)} && "
                  f"{k.index(w0)} <= {w} && {w} < {k.index(w1)})")
        area = f"(({k.index(h1)} - {k.index(h0)}) * ({k.index(w1)} - {k.index(w0)}))"
        value = k.masked(covers, lambda: k.emit(
            f"{grad.load(k, outer[:-2] + inner)} / static_cast<double>{area}", "double"),
            "0", "double")
        k.line(f"acc += {value};")

    # output positions whose window can contain input h: [h*OH/H, ceil((h+1)*OH/H))
    inner = [_adaptive_bounds(outer[-2], out_h, in_h), _adaptive_bounds(outer[-1], out_w, in_w)]
    g.kernel(out.sizes, pre=lambda k, o: k.line("double acc = 0;"), inner=inner, body=body,
             post=lambda k, o: out.store(k, o, "acc"))
    return out
