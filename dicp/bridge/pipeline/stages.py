"""GraphTransformer: one ATen graph through a backend's transform, inference, codegen, build."""

import itertools
import os
from dataclasses import dataclass, field

import torch.fx as fx

from dicp import config, profile

from . import hooks
from .backend import Backend
from .operator import InferenceError, Operator
from .provenance import origin_of
from .torch_compat import FakeTensorMode, detect_fake_mode
from .utils import atomic_write, log, op_name

_graph_ids = itertools.count()


@dataclass
class CompileContext:
    """Per-graph state handed to the backend's passes (no ambient globals)."""

    backend: Backend
    kind: str  # forward, backward or inference
    fake_mode: object
    graph_id: int = field(default_factory=lambda: next(_graph_ids))
    dumps: dict = field(default_factory=dict)  # name -> text, written when DICP_DEBUG=1
    # Fake results of the ATen graph's outputs: the layouts the caller expects (AOTAutograd's
    # backward reads saved tensors with these strides, whatever the vendor ops infer).
    output_vals: list = field(default_factory=list)
    # Positions of the outputs AOTAutograd saves for the backward and compiles it for in
    # whatever layout the forward reports (forward graphs of backends that choose layouts).
    saved_outputs: slice | None = None

    @property
    def graph_name(self) -> str:
        return f"{self.backend.name}_{self.kind}_{self.graph_id}"

    @property
    def debug_dir(self):
        """Where DICP_DEBUG dumps this graph (graph ids restart in every process, so the
        folder also names the process)."""
        return config.cache_dir / "debug" / f"{self.graph_name}-pid{os.getpid()}"

    def source_path(self, name):
        """The dumped file `name` of this graph under DICP_DEBUG (for tracebacks that point at
        real files), else None."""
        return str(self.debug_dir / name) if config.debug else None


def infer_node(node: fx.Node, fake_mode):
    """Fake result of a vendor-op node; errors name the op."""
    args, kwargs = fx.node.map_aggregate((node.args, node.kwargs), _fake_value)
    with fake_mode:
        if isinstance(node.target, Operator):
            return node.target.infer_result(*args, **kwargs)
        try:
            return node.target(*args, **kwargs)  # type: ignore[operator]  # an op, not a name
        except Exception as error:
            raise InferenceError(
                f"shape inference failed for {op_name(node.target)}: {error}"
            ) from error


def _fake_value(arg):
    return arg.meta["val"] if isinstance(arg, fx.Node) else arg


class GraphTransformer:
    """One AOTAutograd graph through `backend`'s stages: conversion (`transform`), shape
    inference, codegen and the compile job. No cache and no debugging tool: the entry puts
    those around `build()`."""

    def __init__(self, gm: fx.GraphModule, backend, kind: str, example_inputs=()):
        fake_mode = detect_fake_mode(example_inputs) or _fake_mode_of(gm)
        self.gm = gm
        self.backend = backend
        self.ctx = CompileContext(backend, kind, fake_mode)
        self.sources = None

    def transform(self):
        self._dump("config.txt", config.format_effective)
        self._dump("aten_graph.txt", lambda: self.gm.print_readable(print_output=False))
        self.ctx.output_vals = [_fake_value(arg) for arg in self.gm.graph.output_node().args[0]]
        self.gm = self.backend.opset_transform(self.gm, self.ctx)
        self._dump("vendor_graph.txt", lambda: str(self.gm.graph))

    def infer_shape_dtype(self):
        # The conversion pass inferred every node it emitted; only nodes made by the backend's
        # later rewrites (pattern replacement) arrive without a fake result.
        for node in self.gm.graph.nodes:
            if node.op == "call_function" and "val" not in node.meta:
                node.meta["val"] = infer_node(node, self.ctx.fake_mode)

    def codegen(self):
        self.sources = self.backend.codegen(self.gm, self.ctx)
        if config.debug:
            debug_files = getattr(self.sources, "debug_files", None)
            files = debug_files() if debug_files else {"sources.txt": str(self.sources)}
            self.ctx.dumps.update(files)
        self.write_dumps()  # before the build, so a failing build leaves its sources

    def compile(self):
        """The backend's compile job on `self.sources`: the graph's callable."""
        return self.backend.compile_job(self.sources, self.ctx)

    def write_dumps(self):
        """DICP_DEBUG: write what this graph has dumped so far, for every backend."""
        if not config.debug:
            return
        for name, text in self.ctx.dumps.items():
            atomic_write(self.ctx.debug_dir / name, text.encode())
        log.warning("%s: debug dumps in %s", self.ctx.graph_name, self.ctx.debug_dir)

    def build(self):
        """The graph's callable, through every stage; DICP_DEBUG dumps what was made, also
        what was made before a stage failed."""
        try:
            return self._run_stages()
        except Exception:
            self.write_dumps()
            raise

    def _run_stages(self):
        with profile.stage("conversion"):
            self.transform()
        if config.record_ops is not None:  # before codegen, which may be what fails
            record_native_ops(self.gm, config.record_ops)
        with profile.stage("shape_inference"):
            self.infer_shape_dtype()
        with profile.stage("codegen"):
            self.codegen()
        with profile.stage("load"):  # the build, a stage of its own, happens inside
            return self.compile()

    def account(self, stages_before):
        """Count this graph in the compile profile (`stages_before`: the stage totals when
        its compile began)."""
        vendor_nodes = sum(isinstance(n.target, Operator) for n in self.gm.graph.nodes)
        profile.count(f"graphs ({self.ctx.kind})")
        profile.count("vendor nodes", vendor_nodes)
        profile.log_graph(self.ctx.graph_name, stages_before, vendor_nodes)

    def _dump(self, name, make_text):
        """Under DICP_DEBUG, keep `make_text()` as dump `name` (not made otherwise: printing
        a graph of thousands of nodes took seconds)."""
        if config.debug:
            self.ctx.dumps[name] = make_text()


def boxed(fn, kind):
    """`fn(args)` in AOTAutograd's boxed calling convention: it receives the one list of graph
    inputs and may empty it to free inputs early; the list is emptied after the call in any
    case. Whatever callable a backend's compile job returns (a function, a bound method, an
    object) is wrapped, so the convention is dicp's business, not the vendor's. `kind`: the
    graph's (forward, backward, inference), for the call hooks (DICP_RECORD_RESULTS)."""
    fn = hooks.wrap_call(fn, kind)
    first = [True]

    def call(args):
        try:
            if first[0]:  # the compile profile's run stage: a graph's first call
                first[0] = False
                with profile.stage("run"):
                    return fn(args)
            return fn(args)
        finally:
            args.clear()

    call._boxed_call = True
    return call


def record_native_ops(gm, path):
    """Append the ATen ops this vendor graph runs natively (DICP_RECORD_OPS, for bisect)."""
    ops = {
        origin_of(n).op
        for n in gm.graph.nodes
        if isinstance(n.target, Operator) and origin_of(n) is not None
    }
    with open(path, "a") as f:
        f.writelines(f"{op}\n" for op in sorted(ops))


def _fake_mode_of(gm):
    vals = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
    return detect_fake_mode(vals) or FakeTensorMode()
