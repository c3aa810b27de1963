"""emugraph's codegen: new_backendgraph's C++ codegen (loop IR, schedule, renderer), with the
device layer (device.py) around it: buffers on the graph's device, each kernel launched on the
device's stream through a launch entry, ops on host tensors run as the host's eager ops."""

import torch
import torch.fx as fx

from dicp.api import ORIGIN, Operator, OpOverload, log, wrapper_ir

from ..new_backendGraph.codegen.cpp_codegen import KERNELS_PER_SOURCE, CppCodegen
from . import config, device
from .opset import OPS


class HostTensorError(RuntimeError):
    """Strict device mode: a graph would hold a host tensor the program did not ask for."""


class EmuCodegen(CppCodegen):
    target = "cpp"

    def __init__(self, gm, ctx):
        super().__init__(gm, ctx)
        if self.bounds_check:
            log.warning(
                "emugraph: DICP_BOUNDS_CHECK does not apply to device kernels "
                "(their accesses are checked by the device's memory isolation)"
            )
        self.bounds_check = False
        self.wrapper.device = device.graph_device(gm)
        self.wrapper.renderer = device.LaunchRenderer

    # ---- ops ----
    def vendor_op_source(self, op: Operator):
        return super().vendor_op_source(OPS[op.name])

    def vendor_op(self, node):
        if self._on_host(node):  # a host region of the program (x.cpu() ...): eager on the host
            return self.aten_call(
                node, self.vendor_op_source(node.target), node.target, as_traced=True
            )
        return super().vendor_op(node)

    def aten_call(self, node, source, target, as_traced=False):
        """A library call or eager fallback; on the device, a comment before it says where the
        device runs it (its kernel, or its CPU fallback with copies): the debug dump shows it."""
        if not self._on_host(node):
            note = device.eager_placement(_aten_op(node), self.wrapper.device)
            self.wrapper.add(wrapper_ir.Verbatim(f"# {note}"))
        return super().aten_call(node, source, target, as_traced)

    @staticmethod
    def _on_host(node):
        """Whether `node` reads or makes a host tensor (constants aside: they load onto the
        device, device.constants_on)."""
        inputs = [a.meta.get("val") for a in node.all_input_nodes if a.op != "get_attr"]
        return any(device.on_host(v) for v in [node.meta.get("val"), *inputs])

    def call_function(self, node):
        if config.strict_device():
            self._check_device(node)
        return super().call_function(node)

    def _check_device(self, node):
        """Strict device mode: a host result no argument asks for is an error naming it. A 0-dim
        host tensor is not one: eager makes it too (`x * torch.tensor(2.0)`), and torch reads
        it as a scalar on any device, by value, never from device memory."""
        val = node.meta.get("val")
        if not device.on_host(val) or val.dim() == 0 or self._asks_for_host(node):
            return
        raise HostTensorError(
            f"emugraph (DICP_EMUGRAPH_STRICT_DEVICE=1): node {node.name} ({node.target}) of "
            f"graph {self.ctx.graph_name} would make a host tensor {tuple(val.shape)} in a "
            f"graph on {self.wrapper.device}: create it on the device (device=...) or move it "
            f"there explicitly"
        )

    @staticmethod
    def _asks_for_host(node):
        requested = node.kwargs.get("device")
        return (
            requested is not None
            and torch.device(requested).type == "cpu"
            or any(
                a.op == "placeholder" and device.on_host(a.meta.get("val"))
                for a in node.all_input_nodes
            )
        )

    # ---- the result ----
    def _native_entry(self, statements, sources):
        return None  # kernels run on the device's stream, one launch each

    def finish(self):
        generated = super().finish()
        for name in [n for n in generated.files if n.startswith("kernels")]:
            generated.files[name] += self._launch_entries(_source_index(name))
        generated.metadata["device"] = self.wrapper.device
        return generated

    def _launch_entries(self, index):
        first = index * KERNELS_PER_SOURCE
        names = [
            f"kernel_{i}" for i in range(first, min(first + KERNELS_PER_SOURCE, len(self.kernels)))
        ]
        return device.launch_entries(
            [(name, self.kernel_types[name], self.signatures[name][1]) for name in names]
        )


def _aten_op(node) -> str:
    """The ATen op an eager call of `node` runs: its target, a library op's ATen kernel, or
    the op it was converted from."""
    for candidate in (node.target, getattr(node.target, "impl", None)):
        if isinstance(candidate, OpOverload):
            return str(candidate)
    origin = node.meta.get(ORIGIN)
    return origin.op if origin is not None else str(node.target)


def _source_index(file_name):
    """kernels.cpp -> 0, kernels_3.cpp -> 3 (cpp_codegen.kernel_sources)."""
    stem = file_name.removesuffix(".cpp")
    return 0 if stem == "kernels" else int(stem.split("_")[1])


def codegen(gm: fx.GraphModule, ctx):
    return EmuCodegen(gm, ctx).run()
