"""Node-level views of one ATen graph, for autocompare and op-argument dumps.

`InstrumentedGraph` compiles a copy of the graph through the same backend with every tensor an
op computes added to the outputs, so each op's value exists in memory after one run of the
backend's generated code (fusion is lost there: every value is materialized). `eager_values`
runs the ATen graph eagerly and keeps every node's value.
"""

import operator

import torch
import torch.fx as fx

from ..pipeline.conversion import is_size_arithmetic
from ..pipeline.provenance import origin_of
from ..pipeline.stages import GraphTransformer
from ..pipeline.torch_compat import OpOverload
from ..pipeline.utils import op_name


def value_nodes(graph: fx.Graph) -> list:
    """The nodes whose values are tensors computed by ops, in graph order."""
    return [
        n
        for n in graph.nodes
        if n.op == "call_function" and isinstance(n.meta.get("val"), torch.Tensor)
    ]


def with_all_values(gm: fx.GraphModule) -> fx.GraphModule:
    """A copy of `gm` returning every op's tensor, then the original outputs."""
    graph = fx.Graph()
    env: dict = {}
    original_outputs = graph.graph_copy(gm.graph, env)  # the copied output value
    computed = [env[n] for n in value_nodes(gm.graph)]
    graph.output((*computed, *original_outputs))  # type: ignore[misc]  # a tuple of nodes
    return fx.GraphModule(gm, graph)


class InstrumentedGraph:
    """The ATen graph built once more by the backend with every op's value as an output."""

    def __init__(self, gm: fx.GraphModule, backend, kind: str):
        self.nodes = value_nodes(gm.graph)
        transformer = GraphTransformer(with_all_values(gm), backend, f"{kind}_instrumented")
        self.compiled = transformer.build()
        self.vendor_graph = transformer.gm.graph
        self.name = transformer.ctx.graph_name

    def run(self, inputs) -> tuple[dict, list]:
        """({node name: value the generated code computed}, the graph's outputs)."""
        results = list(self.compiled(list(inputs)))
        values = dict(zip((n.name for n in self.nodes), results))
        return values, results[len(self.nodes) :]

    def vendor_ops(self, aten_node: str) -> list[str]:
        return vendor_ops_by_origin(self.vendor_graph).get(aten_node, [])


def vendor_ops_by_origin(vendor_graph: fx.Graph) -> dict:
    """ATen node name -> names of the vendor nodes converted from it (an ATen op left to run
    eagerly is listed by its own name, marked as eager fallback)."""
    ops: dict = {}
    for node in vendor_graph.nodes:
        origin = origin_of(node) if node.op == "call_function" else None
        if origin is None or node.target is operator.getitem or is_size_arithmetic(node):
            continue
        fallback = isinstance(node.target, OpOverload)
        ops.setdefault(origin.node, []).append(
            op_name(node.target) + (" (eager fallback)" if fallback else "")
        )
    return ops


class _Recorder(fx.Interpreter):
    values: dict

    def run_node(self, node):
        value = super().run_node(node)
        self.values[node.name] = value
        return value


def eager_values(gm: fx.GraphModule, inputs) -> tuple[dict, list]:
    """({node name: eager value} for every node, the graph's outputs)."""
    recorder = _Recorder(gm)
    recorder.values = {}
    with torch.no_grad():
        outputs = recorder.run(*inputs)
    return recorder.values, list(outputs)


def mutated_inputs(gm: fx.GraphModule) -> set:
    """Positions of the placeholders the graph writes into (copy_ epilogues of input
    mutations that AOTAutograd kept in the graph)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    written = {
        n.args[0]
        for n in gm.graph.nodes
        if n.op == "call_function"
        and isinstance(n.target, OpOverload)
        and writes_first_arg(n.target)
    }
    return {i for i, p in enumerate(placeholders) if p in written}


def writes_first_arg(op) -> bool:
    arguments = op._schema.arguments
    return (
        bool(arguments) and arguments[0].alias_info is not None and arguments[0].alias_info.is_write
    )


def clone_inputs(inputs, positions) -> list:
    """`inputs` with fresh copies at `positions` (the ones a run would overwrite)."""
    return [
        x.clone() if i in positions and isinstance(x, torch.Tensor) else x
        for i, x in enumerate(inputs)
    ]
