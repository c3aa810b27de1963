"""Pooling as window reductions over the last two dims: one loop nest per output."""
import sympy

from dicp.dynamo_bridge.symbolic import shape_of

from .ctypes_map import compute_ctype
from .loop_ir import Assign, Const, Declare, If, Op, Var
from .lowering import lowering
from .lowering_extra import _new_buffer, within
from .sym import IDiv, loop_index

ACC = Var("acc", "double")


def _window(k, out_index, x, kernel, stride, padding, dilation, inner):
    """Input (h, w) read by output position `out_index` at window offsets `inner`, and whether
    it lies inside the input (a bool IR value)."""
    h = out_index[-2] * stride[0] - padding[0] + inner[0] * dilation[0]
    w = out_index[-1] * stride[1] - padding[1] + inner[1] * dilation[1]
    return h, w, within(k, [h, w], x.sizes[-2:])


def _add_to_acc(k, value):
    k.add(Assign(ACC, value, combine="+"))


def _declare_acc(k, outer):
    k.add(Declare(ACC, Const(0, "double")))


def _max_with_index(g, node, x, inner, window):
    """Values and flat (h * W + w) indices of the maxima over each output's window, as ATen
    picks them: the first maximum, a NaN over any number. `window(k, outer, inner)` gives the
    input (h, w) and whether it lies inside the input."""
    values_val, indices_val = node.meta["val"]
    values, indices = _new_buffer(g, values_val), _new_buffer(g, indices_val)
    T = compute_ctype(x.dtype)
    best, best_index = Var("best", T), Var("best_index", "int64_t")

    def pre(k, outer):
        k.add(Declare(best, Const(-float("inf"), T)))
        k.add(Declare(best_index, Const(-1, "int64_t")))

    def body(k, outer, inner):
        h, w, inside = window(k, outer, inner)
        value = k.masked(inside, lambda: x.load(k, outer[:-2] + [h, w]),
                         Const(-float("inf"), T), T)
        position = k.index(h * x.sizes[-1] + w)
        wins = Op("PoolBetter", "bool", (inside, value, best, best_index))
        k.add(If(wins, (Assign(best, value), Assign(best_index, position))))

    def post(k, outer):
        values.store(k, outer, best)
        indices.store(k, outer, best_index)

    g.kernel(values.sizes, pre=pre, inner=inner, body=body, post=post)
    return values, indices


@lowering("MaxPool2dWithIndices")
def max_pool2d(g, node, x, kernel, stride, padding, dilation, ceil_mode):
    x = g.value(x)
    return _max_with_index(
        g, node, x, [(0, kernel[0]), (0, kernel[1])],
        lambda k, outer, inner: _window(k, outer, x, kernel, stride, padding, dilation, inner))


@lowering("AdaptiveMaxPool2d")
def adaptive_max_pool2d(g, node, x, output_size):
    """Output (oh, ow) takes the maximum over the same windows as AdaptiveAvgPool2d's."""
    x = g.value(x)
    out_sizes = shape_of(node.meta["val"][0])
    (in_h, in_w), (out_h, out_w) = x.sizes[-2:], out_sizes[-2:]
    outer = loop_index(len(out_sizes))
    inner = [_adaptive_bounds(outer[-2], in_h, out_h), _adaptive_bounds(outer[-1], in_w, out_w)]
    return _max_with_index(g, node, x, inner,
                           lambda k, outer, inner: (*inner, Const(True, "bool")))


@lowering("AvgPool2d")
def avg_pool2d(g, node, x, kernel, stride, padding, ceil_mode, count_include_pad, divisor):
    x = g.value(x)
    out = _new_buffer(g, node.meta["val"])

    def body(k, outer, inner):
        h, w, inside = _window(k, outer, x, kernel, stride, padding, (1, 1), inner)
        _add_to_acc(k, k.masked(inside, lambda: x.load(k, outer[:-2] + [h, w]),
                                Const(0, "double"), "double"))

    def post(k, outer):
        count = _avg_divisor(x.sizes, outer[-2:], kernel, stride, padding, count_include_pad,
                             divisor)
        out.store(k, outer, _divided(k, ACC, count))

    g.kernel(out.sizes, pre=_declare_acc, inner=[(0, kernel[0]), (0, kernel[1])], body=body,
             post=post)
    return out


def _divided(k, value, count):
    """`value` (double) divided by the integer index expression `count`."""
    return k.op("Div", "double", value, k.op("StaticCast", "double", k.index(count)))


def _avg_divisor(in_sizes, window, kernel, stride, padding, count_include_pad, divisor):
    """ATen's divisor for the window at output position `window` (oh, ow), an integer index
    expression."""
    if divisor:
        return sympy.Integer(divisor)
    count = sympy.Integer(1)
    for d, (size, o) in enumerate(zip(in_sizes[-2:], window)):
        start = o * stride[d] - padding[d]
        end = sympy.Min(start + kernel[d], size + padding[d])
        if not count_include_pad:
            start, end = sympy.Max(start, 0), sympy.Min(end, size)
        count = count * (end - start)
    return count


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
        covers = Const(True, "bool")
        for d, o in enumerate(inner):
            start = o * stride[d] - padding[d]
            inside = k.op("All", "bool", k.op("Le", "bool", k.index(start), k.index(outer[d - 2])),
                          k.op("Lt", "bool", k.index(outer[d - 2]), k.index(start + kernel[d])))
            covers = inside if d == 0 else k.op("All", "bool", covers, inside)
        count = _avg_divisor(x.sizes, inner, kernel, stride, padding, count_include_pad, divisor)
        _add_to_acc(k, k.masked(covers, lambda: _divided(k, grad.load(k, outer[:-2] + inner),
                                                         count), Const(0, "double"), "double"))

    g.kernel(out.sizes, pre=_declare_acc, inner=[window_range(0), window_range(1)], body=body,
             post=lambda k, o: out.store(k, o, ACC))
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
        picked = k.op("Eq", "bool", indices.load(k, outer[:-2] + inner), here)
        _add_to_acc(k, k.masked(picked, lambda: grad.load(k, outer[:-2] + inner),
                                Const(0, "double"), "double"))

    g.kernel(out.sizes, pre=_declare_acc, inner=[window_range(0), window_range(1)], body=body,
             post=lambda k, o: out.store(k, o, ACC))
    return out


@lowering("AdaptiveAvgPool2d")
def adaptive_avg_pool2d(g, node, x, output_size):
    x = g.value(x)
    out = _new_buffer(g, node.meta["val"])
    in_h, in_w = x.sizes[-2:]
    out_h, out_w = out.sizes[-2:]

    bounds = _adaptive_bounds

    def body(k, outer, inner):
        _add_to_acc(k, x.load(k, outer[:-2] + inner))

    def post(k, outer):
        (h0, h1), (w0, w1) = bounds(outer[-2], in_h, out_h), bounds(outer[-1], in_w, out_w)
        out.store(k, outer, _divided(k, ACC, (h1 - h0) * (w1 - w0)))

    outer_vars = loop_index(len(out.sizes))
    g.kernel(out.sizes, pre=_declare_acc,
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
        covers = k.op("All", "bool", _between(k, h0, outer[-2], h1), _between(k, w0, outer[-1], w1))
        _add_to_acc(k, k.masked(covers, lambda: _divided(
            k, grad.load(k, outer[:-2] + inner), (h1 - h0) * (w1 - w0)), Const(0, "double"),
            "double"))

    # output positions whose window can contain input h: [h*OH/H, ceil((h+1)*OH/H))
    inner = [_adaptive_bounds(outer[-2], out_h, in_h), _adaptive_bounds(outer[-1], out_w, in_w)]
    g.kernel(out.sizes, pre=_declare_acc, inner=inner, body=body,
             post=lambda k, o: out.store(k, o, ACC))
    return out


@lowering("AdaptiveMaxPool2dBackward")
def adaptive_max_pool2d_backward(g, node, grad, x, indices):
    """Each input element gathers the gradients of the outputs whose window can hold it and
    whose saved index picked it, as max_pool2d's backward: stores only to its own element."""
    grad, indices = g.value(grad), g.value(indices)
    out = _new_buffer(g, node.meta["val"])
    (in_h, in_w), (out_h, out_w) = out.sizes[-2:], grad.sizes[-2:]
    outer = loop_index(len(out.sizes))

    def body(k, outer, inner):
        here = k.index(outer[-2] * in_w + outer[-1])
        picked = k.op("Eq", "bool", indices.load(k, outer[:-2] + inner), here)
        _add_to_acc(k, k.masked(picked, lambda: grad.load(k, outer[:-2] + inner),
                                Const(0, "double"), "double"))

    # output positions whose window can contain input h: [h*OH/H, ceil((h+1)*OH/H))
    inner = [_adaptive_bounds(outer[-2], out_h, in_h), _adaptive_bounds(outer[-1], out_w, in_w)]
    g.kernel(out.sizes, pre=_declare_acc, inner=inner, body=body,
             post=lambda k, o: out.store(k, o, ACC))
    return out


def _between(k, lo, i, hi):
    """A bool IR value: lo <= i < hi (index expressions)."""
    return k.op("All", "bool", k.op("Le", "bool", k.index(lo), k.index(i)),
                k.op("Lt", "bool", k.index(i), k.index(hi)))
