"""ovgraph's op vocabulary: OpenVINO opset ops, grouped by family.

Each op is named after its OpenVINO type and holds `fn`, the function of the opset module that
builds it; a vendor node's arguments are that function's arguments (tensors first, then the
attributes), so codegen renders `opset.<fn>(*args)` with no per-op code. `impl` is the op's
meaning in torch ops: on fake tensors it is the shape rule.
"""

import torch

from dicp.api import Operator

OPSET_MODULE = "openvino.opset16"  # the newest opset module openvino 2026.x ships complete


class OvOp(Operator):
    fn = ""  # function of the opset module


def _op(name, fn, impl):
    return type(name, (OvOp,), {"name": name, "fn": fn, "impl": staticmethod(impl)})()


def _reduce(torch_fn):
    def impl(x, axes, keep_dims):
        return torch_fn(x, list(axes), keep_dims) if axes else x.clone()

    return impl


def _amax_like(torch_fn):
    def impl(x, axes, keep_dims):
        return torch_fn(x, dim=list(axes), keepdim=keep_dims) if axes else x.clone()

    return impl


def _prod(x, axes, keep_dims):
    for axis in sorted((a % max(x.dim(), 1) for a in axes), reverse=True):
        x = torch.prod(x, axis, keepdim=keep_dims)
    return x


def _slice(x, start, stop, step, axes):
    index = [slice(None)] * x.dim()
    for b, e, s, a in zip(start, stop, step, axes):
        index[a] = slice(b, e, s)
    return x[tuple(index)]


def _gather(x, indices, axis, batch_dims=0):
    axis = axis % x.dim()
    flat = x.index_select(axis, indices.reshape(-1) % x.shape[axis])
    return flat.reshape([*x.shape[:axis], *indices.shape, *x.shape[axis + 1 :]])


def _gather_nd(x, indices, batch_dims=0):
    return x[tuple(indices[..., i] for i in range(indices.shape[-1]))]


def _squeeze(x, axes):
    for axis in sorted((a % x.dim() for a in axes), reverse=True):
        x = x.squeeze(axis)
    return x


def _unsqueeze(x, axes):
    for axis in sorted(axes):
        x = x.unsqueeze(axis)
    return x


def _divide(a, b):
    # OpenVINO's integer Divide truncates (checked on the CPU plugin of openvino 2026.4)
    return torch.div(a, b, rounding_mode=None if a.dtype.is_floating_point else "trunc")


def _matmul(a, b, transpose_a=False, transpose_b=False):
    return torch.matmul(
        a.transpose(-1, -2) if transpose_a else a, b.transpose(-1, -2) if transpose_b else b
    )


def _pad(x, pads_begin, pads_end, mode, value):
    pads = []
    for begin, end in reversed(list(zip(pads_begin, pads_end))):
        pads += [begin, end]
    padded = torch.nn.functional.pad(x, pads)
    inside = torch.nn.functional.pad(torch.ones_like(x, dtype=torch.bool), pads)
    return torch.where(inside, padded, value)


def _convolution(x, w, strides, pads_begin, pads_end, dilations):
    conv = {3: torch.conv1d, 4: torch.conv2d, 5: torch.conv3d}[x.dim()]
    return conv(x, w, stride=strides, padding=list(pads_begin), dilation=dilations)


def _group_convolution(x, w, strides, pads_begin, pads_end, dilations):
    conv = {4: torch.conv1d, 5: torch.conv2d, 6: torch.conv3d}[w.dim()]
    groups = w.shape[0]
    return conv(
        x,
        w.flatten(0, 1),
        stride=strides,
        padding=list(pads_begin),
        dilation=dilations,
        groups=groups,
    )


UNARY = {
    "Abs": ("abs", torch.abs),
    "Negative": ("negative", torch.neg),
    "Exp": ("exp", torch.exp),
    "Log": ("log", torch.log),
    "Sqrt": ("sqrt", torch.sqrt),
    "Sin": ("sin", torch.sin),
    "Cos": ("cos", torch.cos),
    "Tan": ("tan", torch.tan),
    "Tanh": ("tanh", torch.tanh),
    "Sigmoid": ("sigmoid", torch.sigmoid),
    "Relu": ("relu", torch.relu),
    "Erf": ("erf", torch.erf),
    "Floor": ("floor", torch.floor),
    "Ceiling": ("ceiling", torch.ceil),
    "Sign": ("sign", torch.sign),
    "Asin": ("asin", torch.asin),
    "Acos": ("acos", torch.acos),
    "Atan": ("atan", torch.atan),
    "Sinh": ("sinh", torch.sinh),
    "Cosh": ("cosh", torch.cosh),
    "LogicalNot": ("logical_not", torch.logical_not),
    "BitwiseNot": ("bitwise_not", torch.bitwise_not),
    "IsNaN": ("is_nan", torch.isnan),
    "IsInf": ("is_inf", torch.isinf),
    "Gelu": (
        "gelu",
        lambda x, mode="erf": torch.nn.functional.gelu(
            x, approximate="none" if mode == "erf" else "tanh"
        ),
    ),
    "Round": ("round", lambda x, mode: torch.round(x)),
    "Swish": ("swish", lambda x, beta: x * torch.sigmoid(beta * x)),
}
BINARY = {
    "Add": ("add", torch.add),
    "Subtract": ("subtract", torch.sub),
    "Multiply": ("multiply", torch.mul),
    "Divide": ("divide", _divide),
    "Power": ("power", torch.pow),
    "Maximum": ("maximum", torch.maximum),
    "Minimum": ("minimum", torch.minimum),
    "FloorMod": ("floor_mod", torch.remainder),
    "Mod": ("mod", torch.fmod),
    "Equal": ("equal", torch.eq),
    "NotEqual": ("not_equal", torch.ne),
    "Less": ("less", torch.lt),
    "LessEqual": ("less_equal", torch.le),
    "Greater": ("greater", torch.gt),
    "GreaterEqual": ("greater_equal", torch.ge),
    "LogicalAnd": ("logical_and", torch.logical_and),
    "LogicalOr": ("logical_or", torch.logical_or),
    "LogicalXor": ("logical_xor", torch.logical_xor),
    "BitwiseAnd": ("bitwise_and", torch.bitwise_and),
    "BitwiseOr": ("bitwise_or", torch.bitwise_or),
    "BitwiseXor": ("bitwise_xor", torch.bitwise_xor),
}
REDUCE = {
    "ReduceSum": ("reduce_sum", _reduce(torch.sum)),
    "ReduceMean": ("reduce_mean", _reduce(torch.mean)),
    "ReduceMax": ("reduce_max", _amax_like(torch.amax)),
    "ReduceMin": ("reduce_min", _amax_like(torch.amin)),
    "ReduceProd": ("reduce_prod", _prod),
    "ReduceLogicalOr": ("reduce_logical_or", _amax_like(torch.amax)),
    "ReduceLogicalAnd": ("reduce_logical_and", _amax_like(torch.amin)),
}
LAYOUT = {
    "Reshape": ("reshape", lambda x, shape, special_zero=False: x.reshape(list(shape))),
    # views as ATen makes them: the fake results carry ATen's layouts, which an eager call
    # reading storage (as_strided) gets when it takes an engine result (GraphEngineCodegen)
    "Transpose": ("transpose", lambda x, order: x.permute(list(order))),
    "Broadcast": ("broadcast", lambda x, shape: x.expand(list(shape))),
    "Slice": ("slice", _slice),
    "Concat": ("concat", lambda xs, axis: torch.cat(list(xs), axis)),
    "Squeeze": ("squeeze", _squeeze),
    "Unsqueeze": ("unsqueeze", _unsqueeze),
    "Pad": ("pad", _pad),
}
INDEX = {
    "Gather": ("gather", _gather),
    "GatherElements": ("gather_elements", lambda x, idx, axis: torch.gather(x, axis, idx)),
    "GatherND": ("gather_nd", _gather_nd),
}
OTHER = {
    "Select": ("select", torch.where),
    "Convert": ("convert", lambda x, dtype: x.to(dtype)),
    "Constant": ("constant", lambda value, dtype: torch.full((), value, dtype=dtype)),
    "Range": (
        "range",
        lambda start, stop, step, dtype: torch.arange(start, stop, step, dtype=dtype),
    ),
    "MatMul": ("matmul", _matmul),
    "Softmax": ("softmax", lambda x, axis: torch.softmax(x, axis)),
    "LogSoftmax": ("log_softmax", lambda x, axis: torch.log_softmax(x, axis)),
    "CumSum": ("cumsum", lambda x, axis: torch.cumsum(x, axis)),
    "Convolution": ("convolution", _convolution),
    "GroupConvolution": ("group_convolution", _group_convolution),
}

FAMILIES = {
    "unary": UNARY,
    "binary": BINARY,
    "reduce": REDUCE,
    "layout": LAYOUT,
    "index": INDEX,
    "other": OTHER,
}
OPS = {
    name: _op(name, fn, impl) for family in FAMILIES.values() for name, (fn, impl) in family.items()
}
