"""ovgraph's codegen: each engine subgraph becomes Python that builds one OpenVINO Model.

dicp's GraphEngineCodegen partitions the vendor graph and writes the wrapper (inputs, eager ATen
calls between subgraphs, size arithmetic, outputs). This module renders, per subgraph, a builder
function of opset calls (templates/models.py.j2) and the wrapper line that runs it:
`bufN = engine["fused_0"]([x, y, [4*s0, 3]])`. Symbolic sizes become `-1` dims of the Model's
Parameters, and every size-valued argument that is symbolic (a Reshape target, a Slice bound)
becomes an extra Parameter the wrapper feeds at run time, so one compiled Model serves every
size.
"""

from dataclasses import dataclass, field
from pathlib import Path

import sympy
import torch
import torch.fx as fx

from dicp.api import GeneratedGraph, GraphEngineCodegen, is_symbolic, render, to_sympy

from .opset import OPSET_MODULE

TEMPLATES = Path(__file__).parent / "templates"

# torch dtype -> (OpenVINO element type, numpy dtype)
DTYPES = {
    torch.float32: ("f32", "np.float32"),
    torch.float16: ("f16", "np.float16"),
    torch.float64: ("f64", "np.float64"),
    torch.int64: ("i64", "np.int64"),
    torch.int32: ("i32", "np.int32"),
    torch.int16: ("i16", "np.int16"),
    torch.int8: ("i8", "np.int8"),
    torch.uint8: ("u8", "np.uint8"),
    torch.bool: ("boolean", "np.bool_"),
}


@dataclass
class Part:
    """One engine subgraph as rendered: builder lines, parameters, results, and what the
    wrapper feeds each parameter (a tensor variable or a size expression)."""

    name: str
    lines: list = field(default_factory=list)
    parameters: list = field(default_factory=list)
    feeds: list = field(default_factory=list)
    results: list = field(default_factory=list)


class SubgraphBuilder:
    """Walks one submodule of OpenVINO ops and writes the opset calls that build it."""

    def __init__(self, name):
        self.part = Part(name)
        self.env = {}
        self._next = 0

    def fresh(self, prefix):
        self._next += 1
        return f"{prefix}{self._next}"

    def run(self, submodule, inputs):
        placeholders = [n for n in submodule.graph.nodes if n.op == "placeholder"]
        for node, value in zip(placeholders, inputs, strict=True):
            self.env[node] = self.placeholder(node, value)
        for node in submodule.graph.nodes:
            if node.op == "call_function":
                self.env[node] = self.call(node)
        outputs = submodule.graph.output_node().args[0]
        single = not isinstance(outputs, (tuple, list))
        self.part.results = [self.env[n] for n in ([outputs] if single else outputs)]
        return self.part, single

    def placeholder(self, node, value):
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            return to_sympy(val)  # a size the wrapper knows
        dims = [-1 if is_symbolic(size) else int(size) for size in val.shape]
        return self.parameter(dims, val.dtype, value)

    def parameter(self, dims, dtype, feed):
        name = self.fresh("p")
        self.part.lines.append(
            f"{name} = opset.parameter(ov.PartialShape({dims}), "
            f"ov.Type.{DTYPES[dtype][0]}, name={name!r})"
        )
        self.part.parameters.append(name)
        self.part.feeds.append(feed)
        return name

    def call(self, node):
        name = self.fresh("n")
        if node.target.name == "Constant":
            self.part.lines.append(f"{name} = {self.constant(*node.args)}")
            return name
        args = ", ".join(self.arg(a) for a in node.args)
        self.part.lines.append(f"{name} = opset.{node.target.fn}({args})")
        return name

    def constant(self, value, dtype):
        if is_symbolic(value):
            return self.parameter([], dtype, to_sympy(value))
        return f"opset.constant(np.array({_number(value)}, dtype={DTYPES[dtype][1]}))"

    def arg(self, arg):
        if isinstance(arg, fx.Node):
            value = self.env[arg]
            return value if isinstance(value, str) else self.sizes(value)
        if isinstance(arg, (list, tuple, torch.Size)):
            if arg and all(isinstance(a, fx.Node) and isinstance(self.env[a], str) for a in arg):
                return f"[{', '.join(self.env[a] for a in arg)}]"  # Concat's inputs
            return self.sizes(list(arg))
        if isinstance(arg, torch.dtype):
            return repr(DTYPES[arg][0])
        if is_symbolic(arg):
            return self.sizes(arg)
        return _number(arg) if isinstance(arg, float) else repr(arg)

    def sizes(self, value):
        """An int or a list of ints, static (a constant) or symbolic (a fed parameter)."""
        items = value if isinstance(value, list) else [value]
        exprs = [to_sympy(self.env[v] if isinstance(v, fx.Node) else v) for v in items]
        if all(e.is_number for e in exprs):
            numbers = [int(e) if e.is_integer else float(e) for e in exprs]
            literal = numbers if isinstance(value, list) else numbers[0]
            kind = "np.int64" if all(isinstance(n, int) for n in numbers) else "np.float64"
            return f"np.array({literal!r}, dtype={kind})"
        dims = [len(exprs)] if isinstance(value, list) else []
        return self.parameter(dims, torch.int64, exprs if isinstance(value, list) else exprs[0])


def _number(value):
    if isinstance(value, float) and value != value:
        return "np.nan"
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return "np.inf" if value > 0 else "-np.inf"
    return repr(value)


class OvCodegen(GraphEngineCodegen):
    target = "openvino"

    def __init__(self, gm, ctx):
        super().__init__(gm, ctx)
        self.parts = []

    def engine_subgraph(self, node, submodule, inputs):
        part, single = SubgraphBuilder(node.target).run(submodule, inputs)
        self.parts.append(part)
        feeds = [sympy.sympify(f) if isinstance(f, (int, float)) else f for f in part.feeds]
        call = self.wrapper.call_op(f"engine[{part.name!r}]", [feeds], {})
        if single:
            call = self.wrapper.call_op("operator.getitem", [call, 0], {})
        return self.result_value(call, node.meta.get("val"))

    def finish(self):
        models = render(
            TEMPLATES,
            "models.py.j2",
            graph_name=self.ctx.graph_name,
            opset_module=OPSET_MODULE,
            parts=self.parts,
        )
        files = {"models.py": models} if self.parts else {}
        return GeneratedGraph(
            self.ctx.graph_name,
            self.target,
            self.wrapper.render(),
            files,
            dict(self.vendor_ops),
            self.wrapper.constants,
            {"parts": [p.name for p in self.parts]},
        )


def codegen(gm, ctx):
    return OvCodegen(gm, ctx).run()
