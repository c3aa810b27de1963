"""Compiles per function, and a one-time warning when shape changes keep recompiling one."""

import torch

from dicp import config, profile

from .utils import log_once

# Since dynamo's last reset (torch._dynamo.reset() forgets every compiled frame, and a loop
# that resets and compiles one function at several sizes does not recompile it):
_last_shapes: dict = {}  # function -> (input kinds, input shapes) of its previous compile
_shape_recompiles: dict = {}


def forget_compiles() -> None:
    """Start counting afresh: dynamo was reset."""
    _last_shapes.clear()
    _shape_recompiles.clear()


def note_compile(function: str, example_inputs) -> None:
    """Count a compile of `function` (dynamo's name for the frame); warn once when more than
    DICP_RECOMPILE_WARN_LIMIT of them differ from the previous one only in input shapes."""
    profile.compiled_function(function, again=function in _last_shapes)
    kinds, shapes = _signature(example_inputs)
    previous_kinds, previous_shapes = _last_shapes.get(function, (None, None))
    _last_shapes[function] = (kinds, shapes)
    if previous_kinds != kinds or not _static_sizes_differ(previous_shapes, shapes):
        return  # a first compile, other inputs, or a recompile for another reason
    _shape_recompiles[function] = _shape_recompiles.get(function, 0) + 1
    limit = config.recompile_warn_limit
    if limit and _shape_recompiles[function] > limit:
        log_once(
            ("recompiles", function),
            "dicp: %s has been recompiled %d times because input "
            "shapes changed (last input sizes %s); compile it with torch.compile(..., "
            "dynamic=True) or mark the changing dimensions with "
            "torch._dynamo.mark_dynamic(tensor, dim) so one build serves every size",
            function,
            _shape_recompiles[function],
            _shown(shapes),
        )


def traced_inputs(gm, example_inputs):
    """The inputs as dynamo traced them (sizes it made symbolic are SymInts), where the graph
    records them; else the example inputs, which hold the call's concrete sizes."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    traced = [n.meta.get("example_value") for n in placeholders]
    if len(traced) != len(example_inputs) or any(t is None for t in traced):
        return example_inputs
    return traced


def _signature(example_inputs):
    kinds, shapes = [], []
    for value in example_inputs:
        if isinstance(value, torch.Tensor):
            kinds.append((value.dtype, value.dim()))
            shapes.append(
                tuple(size if isinstance(size, int) else str(size) for size in value.shape)
            )
        else:
            kinds.append(type(value).__name__)
    return tuple(kinds), tuple(shapes)


def _static_sizes_differ(previous, current) -> bool:
    """Whether a dim traced as a number has another number now. Symbolic dims are compared
    not at all: the same dynamic function traced again after torch._dynamo.reset() (as test
    suites do) names its symbols afresh, and was told to compile with dynamic=True."""
    return any(
        a != b
        for old, new in zip(previous, current)
        for a, b in zip(old, new)
        if isinstance(a, int) and isinstance(b, int)
    )


def _shown(shapes) -> str:
    return ", ".join(f"[{', '.join(map(str, shape))}]" for shape in shapes[:4]) + (
        ", ..." if len(shapes) > 4 else ""
    )
