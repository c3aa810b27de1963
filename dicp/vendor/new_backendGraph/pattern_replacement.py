"""Vendor-level rewrites: (pattern, replacement, checker) rows applied after conversion."""

import torch

from .opset import ops

# Casting through a wider float type and back is the identity for half types: drop the pair.
_WIDER = {
    torch.float16: (torch.float32, torch.float64),
    torch.bfloat16: (torch.float32, torch.float64),
    torch.float32: (torch.float64,),
}


def round_trip_cast_pattern(x, wide, narrow):
    return ops.Convert(ops.Convert(x, wide), narrow)


def round_trip_cast_replacement(x, wide, narrow):
    return x


def round_trip_cast_checker(match, original_graph, pattern_graph):
    outer = match.returning_nodes[0] if hasattr(match, "returning_nodes") else None
    inner = outer.args[0] if outer is not None else None
    if inner is None or "val" not in inner.args[0].meta:
        return False
    source = inner.args[0].meta["val"].dtype
    wide, narrow = inner.args[1], outer.args[1]
    return narrow == source and wide in _WIDER.get(source, ())


# Softmax's division by its row sum as a multiplication by the sum's reciprocal, as eager's
# kernel computes it (tmp_sum = 1 / tmp_sum; x * tmp_sum): one division per row instead of
# one per element (softmax+GELU over 512x1024: 318 -> 305 us). Exact to within an ulp only
# because the sum is at least 1, the row maximum's exp(0), and at most its length: the
# reciprocal is a normal float. A divisor that may be tiny or huge (a denormal 1 / d is inf)
# keeps its division, so only this pattern is rewritten.
def softmax_division_pattern(x, max_dims, max_keepdim, sum_dims, sum_keepdim, sum_dtype):
    e = ops.Exp(ops.Sub(x, ops.ReduceMax(x, max_dims, max_keepdim)))
    return ops.Div(e, ops.ReduceSum(e, sum_dims, sum_keepdim, sum_dtype))


def softmax_division_replacement(x, max_dims, max_keepdim, sum_dims, sum_keepdim, sum_dtype):
    e = ops.Exp(ops.Sub(x, ops.ReduceMax(x, max_dims, max_keepdim)))
    return ops.Mul(e, ops.Reciprocal(ops.ReduceSum(e, sum_dims, sum_keepdim, sum_dtype)))


def softmax_division_checker(match, original_graph, pattern_graph):
    """The sum and the max reduce the same dims of the same rows, in float32."""
    division = match.returning_nodes[0] if hasattr(match, "returning_nodes") else None
    if division is None or "val" not in division.meta:
        return False
    exp, row_sum = division.args
    row_max = exp.args[0].args[1]
    same_rows = (
        sorted(row_max.args[1]) == sorted(row_sum.args[1])
        and row_max.args[2] is True
        and row_sum.args[2] is True
    )
    return (
        same_rows
        and division.meta["val"].dtype == torch.float32
        and row_sum.meta["val"].dtype == torch.float32
    )


# A safe softmax's test for rows all -inf (aten._safe_softmax: zeros there), any(x != -inf)
# over the rows the softmax takes its max of, as that max != -inf: the same answer for every
# row (a NaN makes both true, a row all -inf both false), from a reduction computed anyway
# instead of a pass of its own (a Swin's attention softmax over windows of 16: 0.49 ms).
def unmasked_rows_pattern(x, max_dims, max_keepdim, any_dims, any_keepdim):
    row_max = ops.ReduceMax(x, max_dims, max_keepdim)
    unmasked = ops.ReduceAny(ops.LogicalNot(ops.Eq(x, float("-inf"))), any_dims, any_keepdim)
    return row_max, unmasked


def unmasked_rows_replacement(x, max_dims, max_keepdim, any_dims, any_keepdim):
    row_max = ops.ReduceMax(x, max_dims, max_keepdim)
    return row_max, ops.Ne(row_max, float("-inf"))


def unmasked_rows_checker(match, original_graph, pattern_graph):
    """The max and the test reduce the same dims, both keeping them or both not."""
    nodes = getattr(match, "returning_nodes", None)
    if not nodes or len(nodes) != 2:
        return False
    row_max, unmasked = nodes
    rank = row_max.args[0].meta["val"].dim() if "val" in row_max.args[0].meta else None
    if rank is None:
        return False
    dims = [sorted(d % max(rank, 1) for d in node.args[1]) for node in (row_max, unmasked)]
    return dims[0] == dims[1] and row_max.args[2] == unmasked.args[2]


REWRITES = [
    (round_trip_cast_pattern, round_trip_cast_replacement, round_trip_cast_checker),
    (softmax_division_pattern, softmax_division_replacement, softmax_division_checker),
    (unmasked_rows_pattern, unmasked_rows_replacement, unmasked_rows_checker),
]
