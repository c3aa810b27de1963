"""The wrapper every backend's generated code runs in, and the walk over a vendor graph.

`GraphCodegenBase` dispatches on `node.op` and handles everything around a vendor's kernels:
graph inputs (tensors and SymInt sizes), constants (`get_attr`), size arithmetic, `getitem` of
tuple results, ATen ops left to eager fallback (and HOPs such as `with_effects`), and outputs in
the layouts AOTAutograd expects. A backend subclasses it and implements `vendor_op(node)` (what
its op becomes: a kernel call, a graph-building call...) and, when it renders more than the
wrapper, `finish()`. `PythonCodegen` is complete: each vendor op runs its `impl`.
"""

import operator
from dataclasses import dataclass, field

import torch
import torch.fx as fx

from . import wrapper_ir as W
from .hooks import fault_for, runtime_error_message
from .operator import Operator
from .traced_layout import traced_value
from .symbolic import is_dense, same_layout, shape_of, strides_of, to_sympy
from .torch_compat import OpOverload, same_storage
from .utils import op_name
from .wrapper import LibraryOp, TensorView, Var, WrapperBuilder


@dataclass
class GeneratedGraph:
    """What codegen hands to the compile job: the wrapper's Python source, any other sources
    (file name -> text, e.g. "kernels.cpp"), the vendor ops and constants the wrapper names, and
    whatever the backend's compile job needs besides (`metadata`)."""

    name: str
    target: str
    wrapper_source: str
    files: dict = field(default_factory=dict)
    vendor_ops: dict = field(default_factory=dict)  # name -> Operator
    constants: dict = field(default_factory=dict)
    metadata: dict = field(default_factory=dict)
    # Each output's strides where codegen chose a layout other than the traced one (a saved
    # tensor left channels-last), else None; empty when every output is as traced.
    output_strides: list = field(default_factory=list)

    def debug_files(self) -> dict:
        """The sources as DICP_DEBUG dumps them."""
        return {"wrapper.py": self.wrapper_source, **self.files}


def sizes_as_sympy(value):
    """Symbolic sizes as sympy (printed as Python over the bound symbols)."""
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return to_sympy(value)
    return value


class GraphCodegenBase:
    target = "base"

    def __init__(self, gm, ctx):
        self.gm, self.ctx = gm, ctx
        self.wrapper = WrapperBuilder(ctx.graph_name, self.target)
        self.vendor_ops = {}
        self.env = {}
        self.output_strides = []  # see GeneratedGraph.output_strides
        self.last_call = None  # the wrapper variable of the latest library or eager call

    def run(self) -> GeneratedGraph:
        nodes = list(self.gm.graph.nodes)
        placeholders = [n for n in nodes if n.op == "placeholder"]
        for node in placeholders:
            self.env[node] = self.placeholder(node)
        for node in placeholders:  # strides after every size symbol is bound
            if isinstance(node.meta.get("val"), torch.Tensor):
                self.wrapper.bind_strides(node.name, node.meta["val"])
        for node in placeholders:
            self._scalar_from_sizes(node)
        for node in nodes:
            if node.op != "placeholder":
                self.wrapper.lowering = node
                self.env[node] = getattr(self, node.op)(node)
        generated = self.finish()
        if any(strides is not None for strides in self.output_strides):
            generated.output_strides = self.output_strides
        return generated

    def finish(self) -> GeneratedGraph:
        return GeneratedGraph(
            self.ctx.graph_name,
            self.target,
            self.wrapper.render(),
            vendor_ops=dict(self.vendor_ops),
            constants=self.wrapper.constants,
        )

    # ---- values ----
    def value(self, arg):
        if isinstance(arg, fx.Node):
            return self.env[arg]
        if isinstance(arg, (list, tuple)):
            return type(arg)(self.value(a) for a in arg)
        if isinstance(arg, dict):
            return {key: self.value(a) for key, a in arg.items()}
        if isinstance(arg, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return to_sympy(arg)
        return arg

    def input_value(self, node, val, name=None):
        """The value a tensor held by wrapper variable `name` becomes in this codegen."""
        return Var(name or node.name)

    def placeholder(self, node):
        val = node.meta.get("val")
        self.wrapper.inputs.append(node.name)
        if isinstance(val, torch.Tensor):
            self.wrapper.tensor_inputs.append(node.name)
            self.wrapper.bind_tensor(node.name, val)
            return self.input_value(node, val)
        if isinstance(val, (torch.SymInt, int)) and not isinstance(val, bool):
            self.wrapper.bind(to_sympy(val), node.name)
            return to_sympy(val)
        return Var(node.name)

    def _scalar_from_sizes(self, node):
        """A float or bool input computed from bound sizes becomes that expression, as the
        same value computed in the graph does: a backward graph takes the forward's
        `0.15 / sym_float(s50)` (cross entropy's label smoothing over s50 classes) as an
        input, and kernels read it as a number, not as a wrapper variable."""
        val = node.meta.get("val")
        if isinstance(val, (torch.SymFloat, torch.SymBool)):
            expr = to_sympy(val)
            if expr.free_symbols <= self.wrapper.bound:
                self.env[node] = expr

    def get_attr(self, node):
        attribute = getattr(self.gm, node.target)
        name = self.wrapper.constant(attribute)
        if not isinstance(attribute, torch.Tensor):  # a higher-order op's subgraph (torch.cond's
            return Var(name)  # branches), passed to its fallback as is
        return self.input_value(node, node.meta.get("val", attribute), name)

    # ---- ops ----
    def call_function(self, node):
        value = self.compute(node)
        fault = fault_for(node)  # DICP_INJECT_BUG_TESTING_ONLY: tests of the debugging tools
        return self.inject_fault(node, value, fault) if fault else value

    def compute(self, node):
        val = node.meta.get("val")
        if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool, int, float)):
            return to_sympy(val)  # size arithmetic: the expression itself, no runtime code
        if node.target is operator.getitem:
            return self.value(node.args[0])[node.args[1]]
        if isinstance(node.target, Operator):
            return self.vendor_op(node)
        return self.aten_call(node, self.callable_source(node.target), node.target, as_traced=True)

    def vendor_op(self, node):
        raise NotImplementedError(
            f"{type(self).__name__} does not generate code for vendor op "
            f"{node.target.name}: implement vendor_op()"
        )

    def vendor_op_source(self, op: Operator) -> str:
        """How the wrapper names vendor op `op` (its `impl`, for Python kernels and library
        calls): an entry of the `vendor_ops` table the wrapper runs with."""
        self.vendor_ops[op.name] = op
        return LibraryOp(op.name)

    def callable_source(self, target):
        """How the wrapper names a fallback's callable: an operator overload by its path in
        torch.ops, anything else (higher-order ops such as with_effects, Python callables) by
        reference, as a constant of the wrapper."""
        if isinstance(target, OpOverload):
            return f"torch.ops.{op_name(target)}"
        return str(self.wrapper.constant(target))

    def aten_call(self, node, source, target, as_traced=False):
        """Library kernels and eager fallback: a call from the wrapper on materialized args.
        `as_traced`: tensor results are made to have their traced strides at run time
        (fallback: traced_layout.py)."""
        # eager ATen may address storage (as_strided): it gets restrided inputs as traced
        materialize = self._materialize_node if isinstance(target, Operator) else self._as_traced
        args = fx.node.map_aggregate(fx.node.map_arg(node.args, materialize), sizes_as_sympy)
        kwargs = fx.node.map_aggregate(fx.node.map_arg(node.kwargs, materialize), sizes_as_sympy)
        name = self.last_call = self.wrapper.call_op(source, args, kwargs)
        return self.result_value(name, node.meta.get("val"), as_traced)

    def result_value(self, name, val, as_traced=False):
        """Wrap a call's result; each tuple element gets its own wrapper variable."""
        if isinstance(val, (tuple, list)):
            elements = self.wrapper.unpack(name, len(val))
            return tuple(self.result_value(e, v, as_traced) for e, v in zip(elements, val))
        if not isinstance(val, torch.Tensor):
            return Var(name)
        if as_traced and val.dim() > 1:
            self.wrapper.add(W.AsTraced(name, shape_of(val), strides_of(val)))
        return self.input_value(None, val, name)

    # ---- outputs ----
    def output(self, node):
        # outputs take the ATen graph's layouts, which callers rely on, except saved tensors
        # where the backend's layout is reported to AOTAutograd (`kept_layout`)
        written = {}
        saved = range(len(node.args[0]))[self.ctx.saved_outputs or slice(0)]
        outputs = zip(node.args[0], self.ctx.output_vals, strict=True)
        for position, (arg, val) in enumerate(outputs):
            self.output_strides.append(None)
            if isinstance(arg, fx.Node) and arg.op == "placeholder":  # the input itself
                self.wrapper.outputs.append(W.Output(Var(arg.name)))  # (a training graph's
                continue  # saved input)
            view = self.input_view(val)
            if view is not None:
                self.wrapper.outputs.append(W.Output(view))
                continue
            # new memory in the traced graph: not a view at run time either (aliasing.py);
            # AOTAutograd detaches a saved tensor that is a view, and no caller sees it, so
            # only a complex one, whose lazy conjugation `own` resolves, goes through it
            fresh = isinstance(val, torch.Tensor) and not val._is_view()
            fresh = fresh and (position not in saved or val.is_complex())
            kept = self.kept_layout(arg, val) if position in saved else None
            if kept is not None:
                val, self.output_strides[-1] = kept, list(kept.stride())
            # A value returned twice in one layout is computed once: a training graph returns
            # softmax's result and its alias saved for the backward, and each was a kernel.
            key = (arg, _layout(val)) if isinstance(arg, fx.Node) else None
            output = written.get(key) if key else None
            if output is None:
                output = self.wrapper.value(self.output_in_layout(arg, val))
                written[key] = output
            self.wrapper.outputs.append(W.Output(output, fresh))

    def kept_layout(self, arg, val):
        """For an output saved for the backward: the fake result of `arg` as computed, when its
        layout is a dense static one other than the traced `val` (a channels-last activation
        traced NCHW), so it is returned as it is and the backward compiled for it; else None.
        Not for a traced view (a saved transposed weight), whose strides its base fixes, nor
        for a wrapper variable, whose layout at run time only its fake value vouches for."""
        produced = arg.meta.get("val") if isinstance(arg, fx.Node) else None
        if (
            not isinstance(produced, torch.Tensor)
            or isinstance(self.env.get(arg), Var)
            or not isinstance(val, torch.Tensor)
            or val._is_view()
            or not _static_dense(produced)
            or produced.shape != val.shape
            or same_layout(shape_of(val), strides_of(produced), strides_of(val))
        ):
            return None
        return produced

    def input_view(self, val):
        """An output that views a graph input, as that same view of the runtime input; None for
        other outputs. AOTAutograd rebuilds such an output from the input with the output's
        layout, and reads the storage offset of an output on another storage differently by
        release (torch 2.15: relative to the input's offset; 2.13: absolute). A real view is
        read alike by both (2.15 read a fresh copy's offset 1 of as_strided(x[3:], ..., 1) as 4)."""
        if not isinstance(val, torch.Tensor):
            return None
        for node in self.gm.graph.find_nodes(op="placeholder"):
            base = node.meta.get("val")
            if (
                isinstance(base, torch.Tensor)
                and base is traced_value(node)  # a restrided input's storage is not as traced
                and base.dtype == val.dtype
                and same_storage(base, val)
            ):
                return self.wrapper.view(
                    node.name,
                    shape_of(val),
                    strides_of(val),
                    to_sympy(val.storage_offset()),
                    absolute=True,
                )
        return None

    def output_in_layout(self, arg, val):
        """A computed output in `val`'s layout, its storage offset included."""
        value = self.output_value(arg, val)
        if isinstance(val, torch.Tensor) and to_sympy(val.storage_offset()) != 0:
            value = self.copy_in_layout_of(value, val)
        return value

    def copy_in_layout_of(self, value, val):
        """A copy of `value` in `val`'s sizes, strides and storage offset. Outputs that view an
        input or another output at an offset need it: AOTAutograd rebuilds them from that base
        with the output's layout, so a fresh buffer must carry the offset too (x.narrow(2, 1,
        2).reshape(-1, 2) under dynamic shapes read one element early: found by the fuzzer)."""
        if any(broadcast_dims(val)):
            return self.expanded_copy(value, val)
        return self.copy_in_layout(value, val, shape_of(val))

    def _materialize_node(self, arg):
        return self.materialize(self.env[arg], arg.meta.get("val"))

    def _as_traced(self, arg):
        """`arg` materialized for eager ATen: a restrided graph input in its traced layout."""
        if traced_value(arg) is arg.meta.get("val"):
            return self._materialize_node(arg)
        return self.materialize(self.env[arg], traced_value(arg))

    def materialize(self, value, val=None):
        """`value` as memory in the layout it was traced with (library calls and fallback)."""
        return value

    def output_value(self, arg, val):
        """The output `arg` in the layout `val` (the ATen graph's) says: a copy into that layout
        when the vendor op's result has another."""
        value = self.value(arg)
        if not isinstance(value, Var):  # the backend's own values know their layout
            return self.materialize(value, val)
        produced = arg.meta.get("val") if isinstance(arg, fx.Node) else None
        if not isinstance(produced, torch.Tensor) or same_layout(
            shape_of(val), strides_of(produced), strides_of(val)
        ):
            return value
        restrided = self.wrapper.allocate(val.dtype, shape_of(val), strides_of(val))
        self.wrapper.copy(restrided, value)
        return Var(restrided)

    def expanded_copy(self, value, val):
        """A copy of `value` in the expanded layout of `val` (stride 0): one slice along each
        broadcast dim, put in `val`'s strides and offset, expanded back."""
        sizes = shape_of(val)
        broadcast = broadcast_dims(val)
        index = tuple(slice(0, 1) if dim else slice(None) for dim in broadcast)
        one_slice = self.wrapper.call_op("operator.getitem", [value, index], {})
        collapsed = [1 if dim else size for dim, size in zip(broadcast, sizes)]
        laid_out = self.copy_in_layout(one_slice, val, collapsed)
        return self.wrapper.call_op("torch.Tensor.expand", [laid_out, sizes], {})

    def copy_in_layout(self, value, val, sizes):
        """A copy of `value` (of shape `sizes`) with the strides and storage offset of `val`."""
        name = self.wrapper.allocate_at(
            val.dtype, sizes, strides_of(val), to_sympy(val.storage_offset())
        )
        self.wrapper.copy(name, value)
        return name

    # ---- DICP_INJECT_BUG_TESTING_ONLY ----
    def inject_fault(self, node, value, kind):
        """`value` made wrong in the way `kind` says, in the wrapper. A kernel generator
        overrides this to put accuracy and compile faults into its kernels instead."""
        if kind == "runtime_error":
            self.wrapper.add(W.Raise(runtime_error_message(node)))
        elif kind == "compile_error":
            self.wrapper.add(W.Verbatim("dicp injected compile error"))  # not Python
        else:
            value = self.map_first_tensor(value, self._wrong_in_wrapper)
        return value

    def map_first_tensor(self, value, fn):
        """`fn` applied to `value`, or to the first tensor of a tuple value."""
        if not isinstance(value, (tuple, list)):
            return fn(value)
        first = next(i for i, v in enumerate(value) if self.is_tensor_value(v))
        return type(value)(fn(v) if i == first else v for i, v in enumerate(value))

    def is_tensor_value(self, value):
        return isinstance(value, (TensorView, Var))

    def _wrong_in_wrapper(self, value):
        return self.wrapper.call_op("wrong_value", [value], {})


class PythonCodegen(GraphCodegenBase):
    """Python kernels: each vendor op runs as its torch reference implementation (`impl`)."""

    target = "python"

    def vendor_op(self, node):
        call = self.wrapper.call_op(
            self.vendor_op_source(node.target), self.value(node.args), self.value(node.kwargs)
        )
        return self.result_value(call, node.meta.get("val"))


def load_wrapper(generated: GeneratedGraph, namespace: dict, path: str | None = None):
    """The `call(args)` function of a generated wrapper, executed with `namespace` (a
    backend's kernels and helpers) plus the vendor ops and constants it names. `path` names
    the source in tracebacks (a debug dump's file)."""
    ops = {name: op.runtime_kernel() for name, op in generated.vendor_ops.items()}
    scope = {"vendor_ops": ops, **namespace, **generated.constants}
    filename = path or f"<dicp {generated.name}>"
    exec(compile(generated.wrapper_source, filename, "exec"), scope)
    return scope["call"]


def _static_dense(val):
    """Whether fake tensor `val` has static sizes and strides, no storage offset, and strides
    that are a permutation of a contiguous tensor's (channels-last, a transposed matrix)."""
    sizes, strides = list(val.shape), list(val.stride())
    if not all(type(v) is int for v in (*sizes, *strides, val.storage_offset())):
        return False
    return val.storage_offset() == 0 and is_dense(sizes, strides)


def _layout(val):
    """What a graph output's layout is, hashable (None for a non-tensor)."""
    if not isinstance(val, torch.Tensor):
        return None
    return (tuple(shape_of(val)), tuple(strides_of(val)), to_sympy(val.storage_offset()))


def broadcast_dims(val):
    """Which dims of `val` are broadcast (stride 0, size not 1), read from its symbolic sizes
    and strides: comparing the SymInts themselves would guard on them, and a guard on a traced
    size makes dynamo compile again at the next size."""
    return [stride == 0 and size != 1 for size, stride in zip(shape_of(val), strides_of(val))]
