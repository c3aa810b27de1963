"""Where a vendor node came from: the ATen node it was converted from and the user's source line.

The conversion pass stamps `node.meta["dicp_origin"]` on every node it emits; autocompare,
op-argument dumps and fault injection read it.
"""

import re
from dataclasses import dataclass

ORIGIN = "dicp_origin"
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)')


@dataclass(frozen=True)
class Origin:
    node: str  # the ATen node's name in its graph
    op: str  # aten.tanh.default
    stack_trace: str | None  # the traced Python stack (innermost frame last)
    result: bool = False  # holds the ATen node's value (not a helper node of its conversion)


@dataclass(frozen=True)
class SourceLine:
    file: str
    line: int
    function: str
    code: str

    def __str__(self):
        return f"{self.file}:{self.line} in {self.function}"


def origin_of(node):
    return node.meta.get(ORIGIN)


def origin_op(node) -> str:
    """The ATen op `node` was converted from (its own target where it was not converted;
    "graph output" for the output node, where lazy values left are computed)."""
    origin = origin_of(node)
    if origin is not None:
        return origin.op
    return "graph output" if node.op == "output" else str(node.target)


def module_of(meta) -> str | None:
    """The innermost nn.Module an op was traced in, as `self.layers.0.mlp (MLP)`."""
    stack = meta.get("nn_module_stack")
    if not stack:
        return None
    path, module_type = list(stack.values())[-1]
    path = _LOCAL.sub(r"\1", str(path))
    return f"{path} ({getattr(module_type, '__name__', module_type)})"


_LOCAL = re.compile(r"L\['([^']+)'\]")


def source_line(stack_trace) -> SourceLine | None:
    """The innermost frame of an FX stack trace: the user's line that produced the op."""
    if not stack_trace:
        return None
    lines = stack_trace.rstrip().splitlines()
    for number in range(len(lines) - 1, -1, -1):
        match = _FRAME.search(lines[number])
        if match:
            code = lines[number + 1].strip() if number + 1 < len(lines) else ""
            return SourceLine(match["file"], int(match["line"]), match["function"], code)
    return None
