"""Convolution epilogues folded into the convolution.

A convolution whose result only feeds a chain of per-channel affine ops (inference batch
norm: (y - mean) * rsqrt(var + eps) * gamma + beta; a bias; a scale) and then maybe a ReLU
becomes one FusedConvolution: the chain is y * S + B with per-channel S and B, so it is
conv(x, weight * S) + (bias * S + B), and oneDNN applies the ReLU as it writes the result.
The batch norm's pass over the result (about 240 us per 4 MB block on two cores) is gone;
folding the scale into the weight costs a pass over the weight, which is far smaller.
Rounding differs from the unfolded chain by an ulp or so of the scale, as with Inductor's
batch-norm folding under freezing.
"""

from dataclasses import dataclass

import torch
import torch.fx as fx

from dicp.api import ORIGIN, shape_of

from .opset import ops

CONVOLUTIONS = ("Convolution", "ConvolutionNHWC")
AFFINE = ("Add", "Sub", "Mul", "Div", "Neg")
Value = fx.Node | float  # a per-channel [C] vector or a number


@dataclass
class Epilogue:
    """A convolution's chain folded so far: its result is relu?(y * scale + shift)."""

    scale: Value = 1.0
    shift: Value = 0.0
    relu: bool = False


def fold_convolution_epilogues(gm: fx.GraphModule) -> fx.GraphModule:
    for conv in [n for n in gm.graph.nodes if _foldable(n)]:
        chain, steps = _chain(conv)
        if steps:
            with gm.graph.inserting_before(chain[-1]):
                _fold(gm.graph, chain, steps)
    gm.recompile()
    return gm


def _foldable(node):
    """A float32 batched convolution (not transposed) with a static channel count."""
    if node.op != "call_function" or getattr(node.target, "name", None) not in CONVOLUTIONS:
        return False
    x, weight, bias, stride, padding, dilation, transposed, output_padding, groups = node.args
    val = node.meta.get("val")
    return (
        val is not None
        and val.dtype == torch.float32
        and not transposed
        and type(weight.meta["val"].shape[0]) is int
        and val.dim() == weight.meta["val"].dim()
        and (bias is None or bias.meta["val"].dtype == torch.float32)
    )


def _chain(conv):
    """The single-user chain of per-channel affine ops (then a ReLU) reading conv's result:
    its nodes (conv first) and each op's step, which updates an Epilogue."""
    chain, steps = [conv], []
    channels = conv.args[1].meta["val"].shape[0]
    while len(chain[-1].users) == 1 and _relu_step not in steps:
        user = next(iter(chain[-1].users))
        step = _affine_step(user, chain[-1], conv, channels)
        if step is None:
            break
        chain.append(user)
        steps.append(step)
    return chain, steps


def _fold(graph, chain, steps):
    """Emit the epilogue's vector arithmetic and the FusedConvolution replacing `chain`."""
    conv, last = chain[0], chain[-1]
    epilogue = Epilogue()
    for step in steps:
        step(graph, epilogue)
    x, weight, bias, stride, padding, dilation, _, _, groups = conv.args
    channels = weight.meta["val"].shape[0]
    scale = epilogue.scale
    if isinstance(scale, fx.Node):  # [C] -> one value per output channel of the weight
        scale = _call(graph, ops.Reshape, scale, [-1] + [1] * (weight.meta["val"].dim() - 1))
    weight = _arith(graph, ops.Mul, weight, scale)
    bias = _bias(graph, bias, epilogue, channels, conv.meta["val"].device)
    fused = _call(
        graph,
        ops.FusedConvolution,
        x,
        weight,
        bias,
        stride,
        padding,
        dilation,
        groups,
        conv.target.name == "ConvolutionNHWC",
        epilogue.relu,
    )
    fused.meta[ORIGIN] = last.meta.get(ORIGIN)
    last.replace_all_uses_with(fused)
    for node in reversed(chain):  # each the single user of the one before
        graph.erase_node(node)


def _bias(graph, bias, epilogue, channels, device):
    """bias * S + B as a [C] tensor (on the weight's `device`), or None where it is zero."""
    if bias is not None:
        bias = _arith(graph, ops.Add, _arith(graph, ops.Mul, bias, epilogue.scale), epilogue.shift)
    elif _is_number(epilogue.shift, 0.0):
        return None
    else:
        bias = epilogue.shift
    if isinstance(bias, fx.Node):
        return bias
    full = graph.call_function(ops.Full, ([channels], bias, torch.float32), {"device": device})
    return full  # one shift for all channels


def _affine_step(user, y, conv, channels):
    """How `user` (reading y) updates the epilogue, or None where it is not per-channel
    affine in y (or not float32 of y's shape)."""
    name = getattr(user.target, "name", None)
    val = user.meta.get("val")
    if (
        user.op != "call_function"
        or not isinstance(val, torch.Tensor)
        or val.dtype != torch.float32
        or shape_of(val) != shape_of(conv.meta["val"])
        or user.kwargs
    ):
        return None
    if name == "Relu":
        return _relu_step
    if name not in AFFINE:
        return None
    if name == "Neg":
        return _neg_step
    a, b = user.args
    other, y_first = (b, True) if a is y else (a, False)
    if other is y or not _per_channel(other, conv, channels):
        return None
    if name == "Div" and not y_first:
        return None  # other / y is not affine in y
    return _operand_step(name, _vector_of(other, channels), y_first)


def _relu_step(graph, epilogue):
    epilogue.relu = True


def _neg_step(graph, epilogue):
    epilogue.scale = _arith(graph, ops.Neg, epilogue.scale)
    epilogue.shift = _arith(graph, ops.Neg, epilogue.shift)


def _operand_step(name, vector, y_first):
    def step(graph, epilogue):
        t = vector(graph)
        if name in ("Mul", "Div"):
            op = ops.Mul if name == "Mul" else ops.Div
            epilogue.scale = _arith(graph, op, epilogue.scale, t)
            epilogue.shift = _arith(graph, op, epilogue.shift, t)
        elif name == "Add" or y_first:  # y + t, t + y, y - t
            op = ops.Add if name == "Add" else ops.Sub
            epilogue.shift = _arith(graph, op, epilogue.shift, t)
        else:  # t - y = y * -1 + (t - shift)
            epilogue.scale = _arith(graph, ops.Neg, epilogue.scale)
            epilogue.shift = _arith(graph, ops.Sub, t, epilogue.shift)

    return step


def _per_channel(operand, conv, channels):
    """A number, or a float32 tensor that varies along the channel dim alone. It cannot read
    the convolution's result: every node of the chain before it has one user, the next."""
    if type(operand) in (int, float):
        return True
    if not isinstance(operand, fx.Node) or "val" not in operand.meta:
        return False
    val, rank = operand.meta["val"], conv.meta["val"].dim()
    if val.dtype != torch.float32 or val.dim() > rank:
        return False
    sizes = [1] * (rank - val.dim()) + list(shape_of(val))
    return all(size == 1 for i, size in enumerate(sizes) if i != 1) and sizes[1] in (1, channels)


def _vector_of(operand, channels):
    """The operand as a [C] vector (a number as it is)."""
    if not isinstance(operand, fx.Node):
        return lambda graph: float(operand)
    if operand.meta["val"].numel() == channels:
        return lambda graph: _call(graph, ops.Reshape, operand, [channels])
    return lambda graph: _call(
        graph, ops.Expand, _call(graph, ops.Reshape, operand, [1]), [channels]
    )


def _arith(graph, op, *values):
    """op over [C] vectors and numbers: numbers alone computed in float32 here, identities
    (1.0 * t, t / 1.0, t + 0.0, 0.0 - t) dropped, a number never the first operand (torch's
    Tensor ops take it second)."""
    if not any(isinstance(v, fx.Node) for v in values):
        return float(op.impl(*(torch.tensor(v, dtype=torch.float32) for v in values)))
    if op is ops.Neg:
        return _call(graph, op, *values)
    a, b = values
    if op in (ops.Mul, ops.Add) and not isinstance(a, fx.Node):
        a, b = b, a
    identity = 1.0 if op in (ops.Mul, ops.Div) else 0.0
    if _is_number(b, identity):
        return a
    if op is ops.Sub and not isinstance(a, fx.Node):  # number - t
        return _arith(graph, ops.Add, _call(graph, ops.Neg, b), a)
    if op is ops.Div and not isinstance(a, fx.Node):  # number / t
        return _arith(graph, ops.Mul, _call(graph, ops.Reciprocal, b), a)
    return _call(graph, op, a, b)


def _is_number(value, number):
    return not isinstance(value, fx.Node) and value == number


def _call(graph, op, *args):
    return graph.call_function(op, args)
