"""Which ATen ops a function produces for a dicp backend, and which would fall back to eager.

The function runs through torch.compile with a recording dynamo backend: AOTAutograd with the
named dicp backend's decomposition table, whose forward/backward/inference compilers record each
ATen graph, run the backend's conversion pass on it (its converters see the real arguments and
dtypes, so an op that falls back because of them is reported as such, with the reason), and
return the ATen graph to run eagerly. No vendor code is generated and no C++ is built, so a
vendor engineer sees what a model needs before writing (or waiting for) a single kernel.

    report = collect_ops(model, (x,))
    print(report.format())

or from a shell (`--help` for the rules):

    python -m dicp.tools.op_collector torch.nn.functional:gelu --shape 4,8
    python -m dicp.tools.op_collector --demo
"""

import argparse
import functools
import importlib
import sys
from collections import Counter
from dataclasses import dataclass

import torch
from functorch.compile import make_boxed_func

from dicp import config
from dicp.bridge.pipeline.fallback import observe_fallbacks
from dicp.bridge.pipeline.stages import GraphTransformer
from dicp.bridge.pipeline.conversion import is_aten
from dicp.bridge.pipeline.torch_compat import aot_autograd, pytree
from dicp.bridge.pipeline.utils import op_name
from dicp.bridge.pipeline.backend import get_backend

GRAPH_KINDS = ("forward", "backward", "inference")
# A node whose value is one of these is size arithmetic (sym_size, SymInt math), not a device op.
_SIZE_VALUES = (torch.SymInt, torch.SymFloat, torch.SymBool, int, float, bool)


@dataclass(frozen=True)
class OpRecord:
    """One ATen op in one kind of graph."""

    op: str  # e.g. "aten.add.Tensor"
    graph: str  # "forward", "backward" or "inference"
    count: int  # graph nodes calling it
    converted: bool  # every one of them runs natively; otherwise some run as eager fallback
    reason: str = ""  # why they fall back (no converter, a dtype, a converter's own reason)


@dataclass(frozen=True)
class OpReport:
    """Every op the graphs call, for one backend; `format()` renders it as a table."""

    backend: str
    ops: tuple  # OpRecords, ordered by graph kind, then op name

    @property
    def node_count(self) -> int:
        return sum(record.count for record in self.ops)

    @property
    def fallback_ops(self) -> list:
        return [record for record in self.ops if not record.converted]

    @property
    def fallback_count(self) -> int:
        return sum(record.count for record in self.fallback_ops)

    @property
    def fallback_share(self) -> float:
        """The percentage (0-100) of op nodes that would run as eager fallback."""
        return 100.0 * self.fallback_count / self.node_count if self.node_count else 0.0

    def find(self, op: str, graph: str = None) -> list:
        """The records of `op` (e.g. "aten.mm.default"), optionally only in one graph kind."""
        return [record for record in self.ops if record.op == op and graph in (None, record.graph)]

    def summary(self) -> str:
        distinct = len({record.op for record in self.ops})
        return (
            f"{distinct} ops, {self.node_count} nodes, {self.fallback_count} nodes "
            f"({self.fallback_share:.1f}%) would fall back to eager"
        )

    def format(self) -> str:
        header = ("op", "graph", "count", "converted", "why not")
        rows = [header] + [
            (r.op, r.graph, str(r.count), "yes" if r.converted else "no", r.reason)
            for r in self.ops
        ]
        widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
        align = (str.ljust, str.ljust, str.rjust, str.ljust, str.ljust)
        lines = [
            " | ".join(pad(cell, width) for pad, cell, width in zip(align, row, widths)).rstrip(
                " |"
            )
            for row in rows
        ]
        lines.insert(1, "-+-".join("-" * width for width in widths))
        return "\n".join(lines + [self.summary()])


def collect_ops(
    fn_or_module, sample_inputs, backend="new_backendgraph", training=None, dynamic=False
) -> OpReport:
    """Run `fn_or_module(*sample_inputs)` under torch.compile and report its ATen ops.

    training: also run a backward (of the sum of every floating output that requires grad) so
    the backward graph is recorded; None means True when an input or parameter requires grad.
    dynamic: passed to torch.compile (symbolic sizes; size arithmetic is not counted).
    """
    spec = get_backend(backend)
    inputs = (sample_inputs,) if isinstance(sample_inputs, torch.Tensor) else tuple(sample_inputs)
    if training is None:
        training = _requires_grad(fn_or_module, inputs)
    graphs = []
    compiled = torch.compile(
        _fresh_entry(fn_or_module), backend=_recorder(spec, graphs), dynamic=dynamic
    )
    with torch.set_grad_enabled(training):
        outputs = compiled(*inputs)
        if training:
            _backward(outputs)
    if not graphs:
        raise RuntimeError(
            "torch.compile captured no graph (dynamo skipped the function); "
            "run with TORCH_LOGS=graph_breaks,recompiles to see why"
        )
    return _report(spec, graphs)


def _fresh_entry(fn):
    # Dynamo caches compiled frames on the code object. Every builtin, and every instance of a
    # module class, shares one, so repeated collections would pile up recompilations until
    # dynamo gives up on them; a new code object per collection starts with an empty cache.
    def entry(*args):
        return fn(*args)

    entry.__code__ = entry.__code__.replace()
    return entry


def _recorder(spec, graphs):
    """A dynamo backend appending (graph kind, [op targets], {op: fallback reasons}) to
    `graphs` for each ATen graph."""

    def compiler(kind):
        def record(gm, example_inputs):
            targets = [node.target for node in gm.graph.nodes if _is_op(node)]
            graphs.append((kind, targets, _fallbacks(spec, kind, gm, example_inputs)))
            return make_boxed_func(gm)  # the ATen graph itself runs: nothing is built

        return record

    table = spec.decompositions
    return aot_autograd(
        fw_compiler=compiler("forward"),
        bw_compiler=compiler("backward"),
        inference_compiler=compiler("inference"),
        decompositions=table() if callable(table) else table,
    )


def _is_op(node) -> bool:
    # operator.getitem and higher-order ops are not OpOverloads, so is_aten skips them too.
    return (
        node.op == "call_function"
        and is_aten(node.target)
        and not isinstance(node.meta.get("val"), _SIZE_VALUES)
    )


def _fallbacks(spec, kind, gm, example_inputs) -> dict:
    """{op name: [reasons]} of the nodes the backend's conversion pass leaves to eager, asked
    of its converters on this very graph (conversion only: no codegen, no build)."""
    transformer = GraphTransformer(gm, spec, kind, example_inputs)
    with observe_fallbacks() as seen, config.patch(strict=False, debug=False):
        transformer.transform()
    reasons = {}
    for fallback in seen:
        reasons.setdefault(fallback.op, []).append(fallback.reason)
    return reasons


def _report(spec, graphs) -> OpReport:
    counts, reasons = Counter(), {}
    for kind, targets, fallbacks in graphs:
        counts.update((kind, op_name(target)) for target in targets)
        for op, why in fallbacks.items():
            reasons.setdefault((kind, op), []).extend(why)
    records = [
        OpRecord(
            op,
            kind,
            count,
            not reasons.get((kind, op)),
            "; ".join(sorted(set(reasons.get((kind, op), [])))),
        )
        for (kind, op), count in counts.items()
    ]
    records.sort(key=lambda record: (GRAPH_KINDS.index(record.graph), record.op))
    return OpReport(spec.name, tuple(records))


def _requires_grad(fn, inputs) -> bool:
    tensors = [leaf for leaf in pytree.tree_leaves(inputs) if isinstance(leaf, torch.Tensor)]
    if isinstance(fn, torch.nn.Module):
        tensors += list(fn.parameters())
    return any(tensor.requires_grad for tensor in tensors)


def _backward(outputs) -> None:
    differentiable = [
        out
        for out in pytree.tree_leaves(outputs)
        if isinstance(out, torch.Tensor) and out.is_floating_point() and out.requires_grad
    ]
    if not differentiable:
        raise ValueError(
            "training: no floating-point output requires grad; pass inputs with "
            "requires_grad=True or a module with trainable parameters, "
            "or training=False"
        )
    sum(out.sum() for out in differentiable).backward()


# ---------------------------------------------------------------------------------------------
# command line


def demo_model():
    """The `--demo` workload: a small MLP (Linear, GELU, LayerNorm, Linear) and one batch."""
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32), torch.nn.Linear(32, 4)
    )
    return model, (torch.randn(8, 16),)


DEMO_TARGET = "dicp.tools.op_collector:demo_model"

_EPILOG = f"""\
What MODULE:CALLABLE names (CALLABLE may be dotted, e.g. torch:nn.functional.gelu):
  with --shape     the function or nn.Module to analyse; it is called with one random tensor
                   of --dtype per --shape, in order:
                     torch.nn.functional:gelu --shape 4,8
  without --shape  a factory: called with no arguments, it returns (fn_or_module, inputs),
                   inputs being a tuple of tensors:
                     {DEMO_TARGET}   (what --demo runs)

Training (a backward graph too) is on with --training, off with --inference, and otherwise on
when an input or a parameter requires grad. With --shape and --training the random inputs
require grad. Nothing is compiled: the graphs run as eager ATen.
"""


def _shape(text: str) -> tuple:
    try:
        return tuple(int(size) for size in text.split(",") if size.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected sizes like 2,3") from None


def _dtype(text: str) -> torch.dtype:
    dtype = getattr(torch, text, None)
    if not isinstance(dtype, torch.dtype):
        raise argparse.ArgumentTypeError(f"{text!r} is not a torch dtype (e.g. float32)")
    return dtype


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m dicp.tools.op_collector",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="List the ATen ops a function or module produces for a dicp backend, with "
        "counts per graph, and which would fall back to eager and why (the "
        "backend's converters are asked, with the real arguments and dtypes).",
    )
    parser.add_argument(
        "target",
        nargs="?",
        metavar="MODULE:CALLABLE",
        help="the function, module or factory to analyse (see below)",
    )
    parser.add_argument("--demo", action="store_true", help=f"analyse {DEMO_TARGET}")
    parser.add_argument("--backend", default="new_backendgraph", help="a registered dicp backend")
    parser.add_argument(
        "--shape",
        type=_shape,
        action="append",
        help="one input's sizes, e.g. 2,3 (repeat for more inputs)",
    )
    parser.add_argument(
        "--dtype",
        type=_dtype,
        default=torch.float32,
        help="dtype of the --shape inputs (default float32)",
    )
    parser.add_argument("--dynamic", action="store_true", help="symbolic sizes")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--training",
        dest="training",
        action="store_const",
        const=True,
        help="record the backward graph too",
    )
    mode.add_argument(
        "--inference",
        dest="training",
        action="store_const",
        const=False,
        help="record only the inference graph",
    )
    return parser


def _load(target: str):
    module_name, _, attribute = target.partition(":")
    if not attribute:
        raise ValueError(f"{target!r}: expected MODULE:CALLABLE, e.g. torch.nn.functional:gelu")
    return functools.reduce(getattr, attribute.split("."), importlib.import_module(module_name))


def _random_tensor(shape, dtype, requires_grad):
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(shape, dtype=dtype, requires_grad=requires_grad)
    return torch.randint(0, 8, shape).to(dtype)


def _workload(args):
    """(fn_or_module, inputs) for the parsed command line, following the rules in --help."""
    if args.demo:
        return demo_model()
    target = _load(args.target)
    if args.shape:
        return target, tuple(
            _random_tensor(shape, args.dtype, bool(args.training)) for shape in args.shape
        )
    try:
        made = target()
    except TypeError as error:  # most often a function that wants tensors: --shape was missing
        raise ValueError(
            f"{args.target} was called as a factory with no arguments (no --shape) "
            f"and failed: {error}"
        ) from error
    if not (isinstance(made, tuple) and len(made) == 2 and callable(made[0])):
        raise ValueError(
            f"{args.target} was called with no arguments (no --shape) and must "
            f"return (fn_or_module, inputs); it returned {type(made).__name__}"
        )
    return made[0], tuple(made[1])


def main(argv=None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.demo == bool(args.target):
        parser.error("give either MODULE:CALLABLE or --demo")
    if args.demo and args.shape:
        parser.error("--demo takes no --shape")
    try:
        fn, inputs = _workload(args)
    except (ValueError, ImportError, AttributeError) as error:
        parser.error(str(error))
    report = collect_ops(fn, inputs, args.backend, args.training, args.dynamic)
    print(report.format())
    return 0


if __name__ == "__main__":
    sys.exit(main())
