"""Walks a vendor graph and produces the generated sources (C++ kernels + Python wrapper).

The driver dispatches on `node.op`; vendor ops go through the lowering table, library ops
and eager fallbacks become ATen calls in the wrapper.
"""
import operator
from dataclasses import dataclass, field

import sympy
import torch
import torch.fx as fx

from dicp.dynamo_bridge.fault_injection import fault_for
from dicp.dynamo_bridge.operator import Operator
from dicp.dynamo_bridge.symbolic import shape_of, strides_of, to_sympy
from dicp.dynamo_bridge.torch_compat import OpOverload
from dicp.dynamo_bridge.utils import op_name

from .faults import inject
from .ir import Buffer, Pointwise
from .sym import same_layout
from .wrapper import Var, WrapperBuilder


@dataclass
class GeneratedGraph:
    """What codegen hands to the compile job."""
    name: str
    target: str
    wrapper_source: str
    cpp_source: str = ""
    kernels: dict = field(default_factory=dict)   # kernel name -> (pointers, symbols)
    constants: dict = field(default_factory=dict)


def _sizes(value):
    """Symbolic sizes as sympy (printed as Python over the bound symbols)."""
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return to_sympy(value)
    return value


class GraphCodegenBase:
    target = "base"

    def __init__(self, gm, ctx):
        self.gm, self.ctx = gm, ctx
        self.wrapper = WrapperBuilder(ctx.graph_name, self.target)
        self.env = {}

    def run(self) -> GeneratedGraph:
        nodes = list(self.gm.graph.nodes)
        placeholders = [n for n in nodes if n.op == "placeholder"]
        for node in placeholders:
            self.env[node] = self.placeholder(node)
        for node in placeholders:  # strides after every size symbol is bound
            if isinstance(node.meta.get("val"), torch.Tensor):
                self.wrapper.bind_strides(node.name, node.meta["val"])
        for node in nodes:
            if node.op != "placeholder":
                self.env[node] = getattr(self, node.op)(node)
        return self.finish()

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

    def placeholder(self, node):
        val = node.meta.get("val")
        self.wrapper.inputs.append(node.name)
        if isinstance(val, torch.Tensor):
            self.wrapper.bind_tensor(node.name, val)
            return self.input_value(node, val)
        if isinstance(val, (torch.SymInt, int)) and not isinstance(val, bool):
            self.wrapper.bind(to_sympy(val), node.name)
            return to_sympy(val)
        return Var(node.name)

    def get_attr(self, node):
        name = self.wrapper.constant(getattr(self.gm, node.target))
        val = node.meta.get("val", getattr(self.gm, node.target))
        return self.input_value(node, val, name)

    def call_function(self, node):
        value = self.compute(node)
        fault = fault_for(node)  # DICP_INJECT_BUG_TESTING_ONLY: tests of the debugging tools
        return inject(self, node, value, fault) if fault else value

    def compute(self, node):
        val = node.meta.get("val")
        if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool, int, float)):
            return to_sympy(val)  # size arithmetic: the expression itself, no runtime code
        if node.target is operator.getitem:
            return self.value(node.args[0])[node.args[1]]
        if isinstance(node.target, Operator):
            return self.vendor_op(node)
        return self.aten_call(node, self.callable_source(node.target), node.target)

    def callable_source(self, target):
        """How the wrapper names a fallback's callable: an operator overload by its path in
        torch.ops, anything else (higher-order ops such as with_effects, Python callables) by
        reference, as a constant of the wrapper."""
        if isinstance(target, OpOverload):
            return f"torch.ops.{op_name(target)}"
        return str(self.wrapper.constant(target))

    def aten_call(self, node, source, target):
        """Library kernels and eager fallback: ATen called from the wrapper."""
        args = fx.node.map_aggregate(fx.node.map_arg(node.args, self._materialize_node), _sizes)
        kwargs = fx.node.map_aggregate(fx.node.map_arg(node.kwargs, self._materialize_node),
                                       _sizes)
        name = self.wrapper.call_op(source, args, kwargs)
        return self.result_value(name, node.meta.get("val"))

    def result_value(self, name, val):
        """Wrap a call's result; each tuple element gets its own wrapper variable."""
        if isinstance(val, (tuple, list)):
            elements = [Var(self.wrapper.fresh()) for _ in val]
            if elements:
                self.wrapper.lines.append(f"{', '.join(elements)}, = {name}")
            return tuple(self.result_value(e, v) for e, v in zip(elements, val))
        return self.input_value(None, val, name) if isinstance(val, torch.Tensor) else Var(name)

    def output(self, node):
        # outputs take the ATen graph's layouts, which callers rely on
        for arg, val in zip(node.args[0], self.ctx.output_vals, strict=True):
            self.wrapper.outputs.append(self.wrapper.literal(self.output_value(arg, val)))

    def _materialize_node(self, arg):
        return self.materialize(self.env[arg], arg.meta.get("val"))

    def materialize(self, value, val=None):
        """`value` as memory in the layout it was traced with (library calls and fallback)."""
        return value

    def output_value(self, arg, val):
        return self.materialize(self.value(arg), val)


class PythonCodegen(GraphCodegenBase):
    """Python kernels: each vendor op runs as its torch reference implementation."""
    target = "python"

    def input_value(self, node, val, name=None):
        return Var(name or node.name)

    def output_value(self, arg, val):
        value = self.value(arg)
        produced = arg.meta.get("val") if isinstance(arg, fx.Node) else None
        if not isinstance(produced, torch.Tensor) or same_layout(
                shape_of(val), strides_of(produced), strides_of(val)):
            return value
        # a vendor op's torch implementation chose another layout than ATen traced
        restrided = self.wrapper.allocate(val.dtype, shape_of(val), strides_of(val))
        self.wrapper.lines.append(f"{restrided}.copy_({value})")
        return Var(restrided)

    def vendor_op(self, node):
        args = self.value(node.args)
        kwargs = self.value(node.kwargs)
        source = f"vendor_ops[{node.target.name!r}]"
        return self.result_value(self.wrapper.call_op(source, args, kwargs), node.meta.get("val"))

    def finish(self):
        return GeneratedGraph(self.ctx.graph_name, self.target, self.wrapper.render(),
                              constants=self.wrapper.constants)
