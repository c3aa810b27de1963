"""DICP_DUMP_OP_ARGS=1|2|3: dump the ops of each compiled graph as it runs (DIPU's levels).

1: each op's name, with the vendor ops it became, before the graph runs (so a crash is placed);
2: also the shapes, dtypes and strides of its inputs and output;
3: also value summaries of its inputs and output (min, max, mean, NaN and Inf counts).
Levels 2 and 3 read each op's real values from the instrumented build of the graph (every op's
value materialized; see instrument.py), run on copies of the same inputs after the graph.
Lines go to the `dicp.op_args` logger (stderr unless logging is configured), or are appended
to DICP_DUMP_OP_ARGS_FILE.
"""

import itertools
import logging
import sys

import torch

from dicp import config

from ..pipeline.provenance import source_line
from ..pipeline.torch_compat import OpOverload
from ..pipeline.utils import leaves, op_name
from .instrument import (
    InstrumentedGraph,
    clone_inputs,
    eager_values,
    mutated_inputs,
    vendor_ops_by_origin,
)

log = logging.getLogger("dicp.op_args")


def graph_hook(compiled, aten_gm, stages):
    """The pipeline's graph hook: `compiled` dumping its ops under DICP_DUMP_OP_ARGS."""
    return dumping(compiled, aten_gm, stages) if config.dump_op_args else compiled


def dumping(compiled, aten_gm, transformer):
    """A boxed callable that runs `compiled` and dumps its ops at the configured level."""
    level, ctx = config.dump_op_args, transformer.ctx
    ops = _ops(aten_gm, vendor_ops_by_origin(transformer.gm.graph))
    mutated = mutated_inputs(aten_gm)
    instrumented = []  # built on the first call that needs values
    calls = itertools.count()

    def call(args):
        inputs, number = list(args), next(calls)
        pristine = clone_inputs(inputs, mutated) if level >= 2 else None
        rng = torch.get_rng_state()
        _emit(
            [f"dicp op-args: graph {ctx.graph_name} ({ctx.kind}), call {number}"]
            + ([f"  #{i} {line}" for i, (_, line) in enumerate(ops)] if level == 1 else [])
        )
        outputs = compiled(args)
        if level >= 2:
            if not instrumented:
                instrumented.append(InstrumentedGraph(aten_gm, ctx.backend, ctx.kind))
            _emit(_value_lines(aten_gm, instrumented[0], ops, pristine, rng, level, mutated))
        return outputs

    return call


def _ops(aten_gm, vendor_ops):
    """(node, "aten.op [vendor ops] @ file:line") for each op of the graph, in order."""
    lines = []
    for node in aten_gm.graph.nodes:
        if node.op == "call_function" and isinstance(node.target, OpOverload):
            where = source_line(node.meta.get("stack_trace"))
            vendor = ", ".join(vendor_ops.get(node.name, [])) or "no vendor op: a no-op or view"
            lines.append(
                (
                    node,
                    f"{op_name(node.target)} [{vendor}]"
                    + (f" @ {where.file}:{where.line}" if where else ""),
                )
            )
    return lines


def _value_lines(aten_gm, instrumented, ops, inputs, rng, level, mutated):
    saved = torch.get_rng_state()
    torch.set_rng_state(rng)
    try:
        computed, _ = instrumented.run(clone_inputs(inputs, mutated))
    finally:
        torch.set_rng_state(saved)
    eager, _ = eager_values(aten_gm, clone_inputs(inputs, mutated))
    placeholders = [n.name for n in aten_gm.graph.nodes if n.op == "placeholder"]
    known = {**eager, **dict(zip(placeholders, inputs)), **computed}
    lines = []
    for i, (node, line) in enumerate(ops):
        args = torch.fx.node.map_arg(node.args, lambda a: known.get(a.name))
        output = computed.get(node.name, eager.get(node.name))
        lines.append(f"  #{i} {line}")
        lines.append(
            f"      in: {', '.join(_brief(a) for a in args) or 'none'} -> out: {_brief(output)}"
        )
        if level >= 3:
            lines += _summaries("in", args) + _summaries("out", output)
    return lines


def _summaries(label, value) -> list:
    return [f"      {label}{j}: {_summary(t)}" for j, t in enumerate(leaves(value, torch.Tensor))]


def _brief(value) -> str:
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).replace("torch.", "")
        return f"{dtype}{list(value.shape)} strides {list(value.stride())}"
    if isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value):
        return "[" + ", ".join(_brief(v) for v in value) + "]"
    return repr(value)


def _summary(t: torch.Tensor) -> str:
    dtype = str(t.dtype).replace("torch.", "")
    if t.numel() == 0:
        return f"{dtype}{list(t.shape)} empty"
    values = t.detach().double() if not t.is_complex() else t.detach().abs().double()
    finite = values[torch.isfinite(values)]
    low, high, mean = (
        (finite.min().item(), finite.max().item(), finite.mean().item())
        if finite.numel()
        else (float("nan"),) * 3
    )
    nan, inf = int(torch.isnan(values).sum()), int(torch.isinf(values).sum())
    return (
        f"{dtype}{list(t.shape)} min {low:.6g} max {high:.6g} mean {mean:.6g} nan {nan} inf {inf}"
    )


def _emit(lines) -> None:
    path = config.dump_op_args_file
    if path is not None:
        with open(path, "a") as f:
            f.writelines(line + "\n" for line in lines)
        return
    _ensure_visible()
    for line in lines:
        log.info("%s", line)


def _ensure_visible() -> None:
    """The user asked for the dump: show it on stderr unless logging already routes it."""
    if not log.isEnabledFor(logging.INFO) and not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False
