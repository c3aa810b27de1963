"""Where a graph without tensor inputs makes its tensors, decided on dynamo's graph, where the
program's own words are still visible (after AOTAutograd every factory names a device).

A factory that names no device (`torch.zeros(n)`, `torch.ops.aten.ones(size)`, `device=None`)
makes its tensor on the current device, as under `torch.device("emu")`: DICP's op tests expect
that of a device backend. A factory that names one (`device="cpu"`) keeps it, as in eager. If
any tensor of the graph comes from the host by the program's choice (a factory naming the
host, a host constant such as the coefficients of OpInfo's general_hamming), nothing moves:
the device's tensors would meet it, and eager keeps them all on the host.

A graph with tensor inputs is left as traced: its factories are where eager makes them, and a
device graph's own constants follow their inputs' device in the conversion."""

import torch
import torch.fx as fx

from dicp.api import OpOverload, OpOverloadPacket, log

# torch functions that make a tensor from Python data (no ATen op of that name)
DATA_FACTORIES = frozenset({"tensor", "as_tensor", "asarray"})


def place_factories(gm: fx.GraphModule, example_inputs, device: str) -> fx.GraphModule:
    """`gm` with `device=device` written into each factory that names none, if the graph has no
    tensor inputs and no tensor the program put on the host."""
    if any(isinstance(x, torch.Tensor) for x in example_inputs):
        return gm
    graphs = [m.graph for m in gm.modules() if isinstance(m, fx.GraphModule)]
    nodes = [node for graph in graphs for node in graph.nodes]
    factories = [node for node in nodes if _is_factory(node)]
    named = [node.kwargs["device"] for node in factories if node.kwargs.get("device") is not None]
    if any(torch.device(d).type == "cpu" for d in named) or any(
        _host_constant(node, gm) for node in nodes
    ):
        log.info("emugraph: a graph making host tensors keeps its factories on the host")
        return gm
    unplaced = [node for node in factories if node.kwargs.get("device") is None]
    for node in unplaced:
        node.kwargs = {**node.kwargs, "device": torch.device(device)}
    if unplaced:
        gm.recompile()
    return gm


def _host_constant(node, root) -> bool:
    """A host constant of more than a scalar's shape (a 0-dim one is a scalar on any device)."""
    if node.op != "get_attr":
        return False
    value = getattr(root, str(node.target), None)
    return isinstance(value, torch.Tensor) and value.device.type == "cpu" and value.dim() > 0


def _is_factory(node) -> bool:
    """A call making a tensor from sizes or Python data: an ATen op (or torch function of an
    ATen op's name) with a `device` argument and no tensor argument."""
    if node.op != "call_function" or any(_is_tensor(n) for n in node.all_input_nodes):
        return False
    target = node.target
    if isinstance(target, OpOverload):
        return _takes_device(target)
    if isinstance(target, OpOverloadPacket):
        return _any_takes_device(target)
    name = getattr(target, "__name__", "")
    if target is not getattr(torch, name, None):  # a torch function, as dynamo records them
        return False
    packet = getattr(torch.ops.aten, name, None)
    return name in DATA_FACTORIES or (
        isinstance(packet, OpOverloadPacket) and _any_takes_device(packet)
    )


def _any_takes_device(packet) -> bool:
    return any(_takes_device(getattr(packet, overload)) for overload in packet.overloads())


def _takes_device(op) -> bool:
    arguments = op._schema.arguments
    has_device = any(a.name == "device" for a in arguments)
    return has_device and not any(isinstance(a.type, torch.TensorType) for a in arguments)


def _is_tensor(node) -> bool:
    return isinstance(node.meta.get("example_value"), torch.Tensor)
