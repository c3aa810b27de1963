"""ATen -> BACKEND_NAME ops. A converter gets the conversion context and the ATen node's
arguments (tensors already converted) and returns the vendor node; `raise Unsupported(why)`
leaves the node to eager fallback."""

import torch

from dicp.api import Unsupported, register_conversion

from .opset import OPS

aten = torch.ops.aten
CONVERSIONS = {}


def same_dtype_tensors(ctx, *args):
    """The kernels take tensors of the result's dtype; anything else stays with eager."""
    out_dtype = ctx.out.dtype
    for arg in args:
        if not isinstance(ctx.val(arg), torch.Tensor):  # a number, or a symbolic size
            raise Unsupported("a scalar operand (this backend's kernels take tensors)")
        if ctx.val(arg).dtype != out_dtype:
            raise Unsupported(f"mixed dtypes ({ctx.val(arg).dtype} -> {out_dtype})")


def elementwise(vendor_name):
    def convert(ctx, *args, **kwargs):
        if kwargs.get("alpha", 1) != 1:
            raise Unsupported("alpha other than 1")
        tensors = args[:2] if vendor_name in ("Add", "Sub", "Mul", "Div") else args[:1]
        same_dtype_tensors(ctx, *tensors)
        return ctx.op(OPS[vendor_name], *tensors)

    return convert


ROWS = {
    aten.add.Tensor: "Add",
    aten.sub.Tensor: "Sub",
    aten.mul.Tensor: "Mul",
    aten.div.Tensor: "Div",
    aten.neg.default: "Neg",
    aten.relu.default: "Relu",
    aten.exp.default: "Exp",
    aten.sqrt.default: "Sqrt",
}
for aten_op, vendor_name in ROWS.items():
    register_conversion(CONVERSIONS, aten_op)(elementwise(vendor_name))
