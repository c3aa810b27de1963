"""Vendor-level rewrites: (pattern, replacement, checker) rows applied after conversion."""
import torch

from .opset import ops

# Casting through a wider float type and back is the identity for half types: drop the pair.
_WIDER = {torch.float16: (torch.float32, torch.float64),
          torch.bfloat16: (torch.float32, torch.float64), torch.float32: (torch.float64,)}


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


REWRITES = [
    (round_trip_cast_pattern, round_trip_cast_replacement, round_trip_cast_checker),
]
