"""Partitioning for graph-engine backends: vendor ops become engine subgraphs, the rest eager.

A graph engine (OpenVINO, Ascend's GE, ...) compiles a whole graph of its ops at once; it cannot
run an ATen op in the middle of it. After the conversion pass, the ops without a converter stay
ATen calls, so a vendor graph is islands of vendor ops between eager ATen calls.
`partition_vendor_ops` groups each maximal acyclic island into one submodule (torch's public
CapabilityBasedPartitioner, as Inductor-adjacent backends and OpenVINO's own torch backend do),
and `GraphEngineCodegen` hands each submodule to the backend (`engine_subgraph`) while the
shared wrapper runs the ATen calls between them. No backend name here: any engine gets it.
"""

import operator
import warnings

import torch
import torch.fx as fx
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from .codegen import GraphCodegenBase, broadcast_dims
from .operator import Operator
from .symbolic import RAW_SYMBOLIC_WARNING, shape_of, strides_of
from .wrapper import Var


class VendorOpSupport(OperatorSupportBase):
    """A node belongs in an engine subgraph when it is a vendor op (or reads one's tuple)."""

    def is_node_supported(self, submodules, node: fx.Node) -> bool:
        if node.op != "call_function":
            return False
        if node.target is operator.getitem:
            source = node.args[0]
            return isinstance(source, fx.Node) and isinstance(source.target, Operator)
        return isinstance(node.target, Operator)


def copy_module(gm: fx.GraphModule) -> fx.GraphModule:
    """A new GraphModule over a copy of `gm`'s graph (metadata kept), so partitioning leaves
    the vendor graph the debugging tools read untouched."""
    graph = fx.Graph()
    with warnings.catch_warnings():
        # vendor nodes legitimately hold symbolic sizes as arguments (as in ConversionContext)
        warnings.filterwarnings("ignore", message=RAW_SYMBOLIC_WARNING)
        output = graph.graph_copy(gm.graph, {})
        graph.output(output)
    return fx.GraphModule(gm, graph)


def partition_vendor_ops(gm: fx.GraphModule) -> fx.GraphModule:
    """A copy of `gm` where each group of connected vendor ops is a call_module node of a
    submodule ("fused_<n>"); every call_module node and its getitems carry meta["val"]."""
    gm = copy_module(gm)
    partitioner = CapabilityBasedPartitioner(
        gm, VendorOpSupport(), allows_single_node_partition=True
    )
    partitions = partitioner.propose_partitions()
    if not partitions:
        return gm
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=RAW_SYMBOLIC_WARNING)
        fused = partitioner.fuse_partitions(partitions)
    for node in fused.graph.nodes:
        if node.op == "call_module":
            _fill_meta(node, fused.get_submodule(node.target))
    return fused


def _fill_meta(node, submodule):
    outputs = submodule.graph.output_node().args[0]
    if not isinstance(outputs, (tuple, list)):
        node.meta["val"] = outputs.meta.get("val")
        return
    vals = tuple(arg.meta.get("val") for arg in outputs)
    node.meta["val"] = vals
    for user in node.users:
        if user.target is operator.getitem:
            user.meta.setdefault("val", vals[user.args[1]])


class GraphEngineCodegen(GraphCodegenBase):
    """Codegen base of graph-engine backends. The vendor graph is partitioned first; each
    engine subgraph goes to `engine_subgraph(node, submodule, inputs)`, which returns the
    wrapper value of its result (a tuple for several outputs). Graph inputs, ATen calls
    between subgraphs, size arithmetic and outputs are GraphCodegenBase's."""

    engine_results_contiguous = True  # engines hand back dense row-major tensors

    def run(self):
        self.gm = partition_vendor_ops(self.gm)
        self.subgraphs = []  # the submodules in call order
        self.engine_values = set()  # wrapper variables holding dense engine results
        return super().run()

    def call_module(self, node):
        submodule = self.gm.get_submodule(node.target)
        self.subgraphs.append(submodule)
        # the engine takes values, dense: no layout to restore for its inputs
        inputs = [self.env[arg] if isinstance(arg, fx.Node) else arg for arg in node.args]
        result = self.engine_subgraph(node, submodule, inputs)
        for value in result if isinstance(result, tuple) else (result,):
            if isinstance(value, Var):
                self.engine_values.add(value)
        return result

    def materialize(self, value, val=None):
        """An engine result handed to an eager ATen call, in the layout the ATen graph gave
        it: an op such as as_strided reads storage, not values (found on LLaMA's rotate_half,
        where a dense result read as a permuted view gave wrong numbers)."""
        if (
            value not in self.engine_values
            or not isinstance(val, torch.Tensor)
            or val.is_contiguous()
            and val.storage_offset() == 0
        ):
            return value
        return self.copy_in_layout_of(value, val)

    def engine_subgraph(self, node, submodule, inputs):
        raise NotImplementedError(
            f"{type(self).__name__} does not build engine subgraphs: implement engine_subgraph()"
        )

    def output_value(self, arg, val):
        """Engine results are contiguous whatever the vendor ops' shape rules inferred: an
        output AOTAutograd expects in another layout is copied into it."""
        value = self.value(arg)
        if (
            not (self.engine_results_contiguous and _engine_result(arg))
            or not isinstance(val, torch.Tensor)
            or val.is_contiguous()
        ):
            return super().output_value(arg, val)
        if any(broadcast_dims(val)):
            return self.expanded_copy(value, val)
        restrided = self.wrapper.allocate(val.dtype, shape_of(val), strides_of(val))
        self.wrapper.copy(restrided, value)
        return Var(restrided)


def _engine_result(arg):
    if not isinstance(arg, fx.Node):
        return False
    source = arg.args[0] if arg.target is operator.getitem else arg
    return isinstance(source, fx.Node) and source.op == "call_module"
