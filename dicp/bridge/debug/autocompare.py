"""DICP_AUTOCOMPARE=1|raise: run every compiled graph's ATen graph eagerly on the same inputs and
compare each output; on a mismatch, find the first op that diverges and say where it came from.

Outputs are compared with the model table of dicp.tolerance (a graph is many ops). On a
mismatch the graph is built once more with every op's value as an output (instrument.py) and
each op is re-run eagerly on the values the generated code gave its inputs: the first op whose
own result differs beyond the single-op table is the culprit, whatever came before it.
"""

import json
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.fx.passes.fake_tensor_prop import FakeTensorProp

from dicp import config, profile
from dicp.tolerance import MODEL_TOLERANCES, TOLERANCES, Difference, compare

from ..pipeline.backend import get_backend
from ..pipeline.provenance import SourceLine, module_of, source_line
from ..pipeline.stages import GraphTransformer
from ..pipeline.torch_compat import FakeTensorMode, OpOverload
from ..pipeline.utils import leaves, log, matches_any, op_name
from .instrument import (
    InstrumentedGraph,
    clone_inputs,
    eager_values,
    mutated_inputs,
    value_nodes,
    writes_first_arg,
)
from .repro import load_graph, write_repro

# Ops whose eager result cannot be reproduced by re-running them: uninitialized memory.
UNINITIALIZED = ("aten.empty.*", "aten.empty_strided.*", "aten.new_empty*", "aten.empty_like.*")


SHOWN = 4  # mismatching outputs listed in a report


class AutocompareError(AssertionError):
    """DICP_AUTOCOMPARE=raise: a compiled graph disagrees with eager; `.report` says where."""

    def __init__(self, report):
        super().__init__(str(report))
        self.report = report


@dataclass
class NodeReport:
    """The first op whose generated code disagrees with eager on the same inputs."""

    node: str
    aten_op: str
    vendor_ops: list
    source: SourceLine | None
    module: str | None
    inputs: list
    output: str
    difference: Difference

    def lines(self):
        where = f"{self.source}\n      {self.source.code}" if self.source else "unknown"
        return [
            f"first diverging op: {self.aten_op} (node {self.node})",
            f"  vendor ops: {', '.join(self.vendor_ops) or 'none (folded into a neighbour)'}",
            f"  source: {where}",
            *([f"  module: {self.module}"] if self.module else []),
            f"  inputs: {', '.join(self.inputs) or 'none'}",
            f"  output: {self.output}",
            f"  {self.difference}",
        ]


@dataclass
class Report:
    graph: str
    kind: str
    outputs: list  # (label, Difference) of each mismatching output
    culprit: NodeReport | None = None
    notes: list = field(default_factory=list)

    def __str__(self):
        lines = [f"dicp autocompare: graph {self.graph} ({self.kind}) differs from eager"]
        lines += [f"  {label}: {difference}" for label, difference in self.outputs[:SHOWN]]
        if len(self.outputs) > SHOWN:
            lines.append(f"  ... and {len(self.outputs) - SHOWN} more outputs")
        lines += self.culprit.lines() if self.culprit else []
        lines += self.notes
        return "\n".join(lines)


def graph_hook(compiled, aten_gm, stages):
    """The pipeline's graph hook: `compiled` checked against eager under DICP_AUTOCOMPARE."""
    return checked(compiled, aten_gm, stages.ctx) if config.autocompare != "off" else compiled


def checked(compiled, aten_gm, ctx):
    """A boxed callable running `compiled` and checking it against `aten_gm` run eagerly."""
    mutated = mutated_inputs(aten_gm)
    analysis = _Analysis(aten_gm, ctx, mutated)

    def call(args):
        inputs = list(args)
        reference_inputs = clone_inputs(inputs, mutated)
        pristine = clone_inputs(inputs, mutated)
        rng = torch.get_rng_state()
        outputs = compiled(args)
        expected = _replaying_rng(rng, aten_gm, reference_inputs)
        labelled = _labelled(outputs, inputs, expected, reference_inputs, mutated)
        mismatches = [(label, d) for label, d in labelled if not d.close]
        if mismatches:
            profile.count("autocompare mismatches")
            analysis.report(mismatches, pristine, rng)
        return outputs

    return call


def _replaying_rng(rng, gm, inputs):
    """`gm(*inputs)` eagerly with the random state the compiled run started from; the state
    the compiled run left is restored afterwards."""
    after = torch.get_rng_state()
    torch.set_rng_state(rng)
    try:
        with torch.no_grad():
            return list(gm(*inputs))
    finally:
        torch.set_rng_state(after)


def _labelled(outputs, inputs, expected, reference_inputs, mutated):
    pairs = [(f"output {i}", a, e) for i, (a, e) in enumerate(zip(outputs, expected))]
    pairs += [(f"mutated input {i}", inputs[i], reference_inputs[i]) for i in sorted(mutated)]
    return [
        (label, compare(a, e, MODEL_TOLERANCES))
        for label, a, e in pairs
        if isinstance(e, torch.Tensor)
    ]


class _Analysis:
    """Finds the first diverging op of one graph; builds the instrumented graph on first use."""

    def __init__(self, aten_gm, ctx, mutated):
        self.aten_gm, self.ctx, self.mutated = aten_gm, ctx, mutated
        self.instrumented = None
        self.reported = self.repro_written = False

    def report(self, mismatches, inputs, rng):
        """Raise (DICP_AUTOCOMPARE=raise) or log the report; in log mode only a graph's first
        mismatch is analysed and logged (a training loop would repeat it every step)."""
        raising = config.autocompare == "raise"
        if self.reported and not raising:
            return
        self.reported = True
        report = Report(self.ctx.graph_name, self.ctx.kind, mismatches)
        try:
            self._locate(report, inputs, rng)
        except Exception as error:  # the comparison already failed: say so even if this does
            report.notes.append(
                f"  (locating the diverging op failed: {type(error).__name__}: {error})"
            )
        if config.repro_dir is not None and not self.repro_written:
            self.repro_written = True
            culprit = report.culprit.aten_op if report.culprit else None
            write_repro(config.repro_dir, self.aten_gm, inputs, self.ctx, culprit)
        if raising:
            raise AutocompareError(report)
        log.warning("%s", report)

    def _locate(self, report, inputs, rng):
        if self.instrumented is None:
            self.instrumented = InstrumentedGraph(self.aten_gm, self.ctx.backend, self.ctx.kind)
        eager, _ = eager_values(self.aten_gm, clone_inputs(inputs, self.mutated))
        saved = torch.get_rng_state()
        torch.set_rng_state(rng)
        try:
            computed, _ = self.instrumented.run(clone_inputs(inputs, self.mutated))
        finally:
            torch.set_rng_state(saved)
        report.culprit = first_diverging(self.aten_gm, self.instrumented, computed, eager)
        if report.culprit is None:
            report.notes += _no_culprit_notes(self.aten_gm)


def first_diverging(aten_gm, instrumented, computed, eager):
    """The first op whose generated result differs from the op run eagerly on the generated
    values of its inputs, as a NodeReport; None if every op agrees within TOLERANCES."""
    checked = {n.name for n in value_nodes(aten_gm.graph)}
    for node in aten_gm.graph.nodes:
        if not _rerunnable(node):
            continue
        targets = _value_targets(node, checked)
        if not targets:
            continue
        args, kwargs = torch.fx.node.map_arg(
            (node.args, node.kwargs), lambda a: computed.get(a.name, eager.get(a.name))
        )
        with torch.no_grad():
            local = node.target(*args, **kwargs)
        for target, index in targets:
            expected = local if index is None else local[index]
            difference = compare(computed[target.name], expected, TOLERANCES)
            if not difference.close:
                return _node_report(node, instrumented, args, computed[target.name], difference)
    return None


def _rerunnable(node) -> bool:
    if node.op != "call_function" or not isinstance(node.target, OpOverload):
        return False
    return not (
        torch.Tag.nondeterministic_seeded in node.target.tags
        or matches_any(op_name(node.target), UNINITIALIZED)
        or writes_first_arg(node.target)
    )


def _value_targets(node, checked):
    """(node holding a value of `node`, index into its result or None)."""
    if node.name in checked:
        return [(node, None)]
    return [
        (user, user.args[1])
        for user in node.users
        if user.target.__name__ == "getitem" and user.name in checked
    ]


def _node_report(node, instrumented, args, output, difference) -> NodeReport:
    inputs = [_describe(a) for a in leaves(args, torch.Tensor)]
    return NodeReport(
        node.name,
        op_name(node.target),
        instrumented.vendor_ops(node.name),
        source_line(node.meta.get("stack_trace")),
        module_of(node.meta),
        inputs,
        _describe(output),
        difference,
    )


def _describe(t) -> str:
    dtype = str(t.dtype).replace("torch.", "")
    return f"{dtype}{list(t.shape)} strides {list(t.stride())}"


def _no_culprit_notes(aten_gm):
    notes = [
        "  every op agrees with eager on its own inputs (single-op tolerances): the "
        "difference comes from fusion or accumulates over many ops"
    ]
    random = sorted(
        {
            op_name(n.target)
            for n in aten_gm.graph.nodes
            if n.op == "call_function"
            and isinstance(n.target, OpOverload)
            and torch.Tag.nondeterministic_seeded in n.target.tags
        }
    )
    if random:
        notes.append(
            f"  the graph draws random numbers ({', '.join(random)}): the backend may "
            f"not reproduce eager's random stream"
        )
    return notes


def run_repro(folder: Path) -> int:
    """Compile and check the repro in `folder`; 1 if it disagrees with eager, else 0."""
    meta = json.loads((folder / "meta.json").read_text())
    gm = load_graph(folder)
    inputs = torch.load(folder / "inputs.pt", weights_only=False)
    FakeTensorProp(gm, FakeTensorMode(allow_non_fake_inputs=True)).propagate(*inputs)
    transformer = GraphTransformer(gm, get_backend(meta["backend"]), meta["kind"])
    compiled = transformer.build()
    with config.patch(autocompare="raise", repro_dir=None):
        try:
            checked(compiled, gm, transformer.ctx)(list(inputs))
        except AutocompareError as error:
            print(error.report)
            return 1
    print(f"graph {meta['graph']}: compiled output agrees with eager")
    return 0
