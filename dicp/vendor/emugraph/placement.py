"""Factory results on the device: a vendor factory op (Full, Empty, Iota) of a graph on emu
makes its tensor on the graph's device, as under `torch.device("emu")`. torch's decompositions
write `device=cpu` into a factory that names no device, so the traced graph would make host
constants that the device's kernels cannot read (and the op suite expects `torch.zeros(n)` in
an emu graph on emu). The nodes after a moved factory get their fake results again.

A graph without tensor inputs makes its tensors where the program says, as eager does: there
only the host factories whose results meet a device tensor in an op move (a decomposition's;
the program's own would fail in eager), and a host tensor the program asks for stays."""
import torch
import torch.fx as fx

from dicp.api import Operator, log

from . import device

FACTORIES = ("Full", "Empty", "Iota")


def place_factories(gm: fx.GraphModule, ctx) -> fx.GraphModule:
    target = device.graph_device(gm)
    if target == "cpu":
        return gm
    saved = {node: (node.kwargs, node.meta.get("val")) for node in gm.graph.nodes}
    try:
        _move(gm, torch.device(target), ctx.fake_mode)
    except Exception as error:  # a host region the factory also feeds: keep the graph as traced
        log.info("emugraph: factories of %s stay as traced (%s)", ctx.graph_name, error)
        for node, (kwargs, val) in saved.items():
            node.kwargs, node.meta["val"] = kwargs, val
    return gm


def _move(gm, target, fake_mode):
    has_inputs = any(isinstance(n.meta.get("val"), torch.Tensor)
                     for n in gm.graph.find_nodes(op="placeholder"))
    moving = _host_factories(gm) if has_inputs else _meeting_the_device(gm)
    changed = set()
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        if node in moving:
            node.kwargs = {**node.kwargs, "device": target}
        elif not any(arg in changed for arg in node.all_input_nodes):
            continue
        node.meta["val"] = _infer(node, fake_mode)
        changed.add(node)


def _host_factories(gm):
    return {n for n in gm.graph.nodes if _is_factory(n) and device.on_host(n.meta.get("val"))}


def _meeting_the_device(gm):
    """The host factories whose results, through host ops, meet a device tensor in an op;
    moving some puts more ops on the device, so until none is added."""
    factories, moving = _host_factories(gm), set()
    while True:
        moved, origins, added = set(), {}, set()  # moved: on the device once `moving` moves
        for node in gm.graph.find_nodes(op="call_function"):
            on_device = [n for n in node.all_input_nodes
                         if n in moved or _on_device(n.meta.get("val"))]
            from_host = [n for n in node.all_input_nodes if n not in on_device]
            fed = [origins.get(n, set()) for n in from_host]  # constants have none
            origins[node] = set().union({node} & factories, *fed)
            if on_device:
                added |= set().union(*fed) - moving
            if node in moving or any(n in moved for n in on_device):
                moved.add(node)
        if not added:
            return moving
        moving |= added


def _on_device(value):
    return isinstance(value, torch.Tensor) and not device.on_host(value)


def _is_factory(node):
    return isinstance(node.target, Operator) and node.target.name in FACTORIES


def _infer(node, fake_mode):
    args, kwargs = fx.node.map_arg((node.args, node.kwargs), lambda n: n.meta.get("val"))
    with fake_mode:
        if isinstance(node.target, Operator):
            return node.target.infer_result(*args, **kwargs)
        return node.target(*args, **kwargs)
