"""Factory results on the device: a vendor factory op (Full, Empty, Iota) of a graph on emu
makes its tensor on the graph's device, as under `torch.device("emu")`. torch's decompositions
write `device=cpu` into a factory that names no device, so the traced graph would make host
constants that the device's kernels cannot read (and the op suite expects `torch.zeros(n)` in
an emu graph on emu). The nodes after a moved factory get their fake results again. Where
they cannot move (a host constant feeds the same ops), the graph stays as traced, on the host
(device.graph_device)."""

import torch
import torch.fx as fx

from dicp.api import Operator, log

from . import device

FACTORIES = ("Full", "Empty", "Iota")


def place_factories(gm: fx.GraphModule, ctx) -> fx.GraphModule:
    target = device.factory_device(gm)
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
    changed = set()
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        if _is_factory(node) and device.on_host(node.meta.get("val")):
            node.kwargs = {**node.kwargs, "device": target}
        elif not any(arg in changed for arg in node.all_input_nodes):
            continue
        node.meta["val"] = _infer(node, fake_mode)
        changed.add(node)


def _is_factory(node):
    return isinstance(node.target, Operator) and node.target.name in FACTORIES


def _infer(node, fake_mode):
    args, kwargs = fx.node.map_arg((node.args, node.kwargs), lambda n: n.meta.get("val"))
    with fake_mode:
        if isinstance(node.target, Operator):
            return node.target.infer_result(*args, **kwargs)
        return node.target(*args, **kwargs)
