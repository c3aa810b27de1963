"""emugraph's device layer: the few parts of a device backend that talk to the device's runtime.
A vendor replaces these for their own (docs/vendor.md, "A device backend"); the loop IR, the
schedule and the C++ renderer are new_backendgraph's, unchanged.

- allocation: the wrapper allocates every buffer on the graph's device (`torch.empty_strided(...,
  device="emu")`), so the device's caching allocator serves it;
- launch: a kernel call is `launch(kernel, tensors, sizes)`, the runtime's enqueue of the
  kernel's launch entry (templates/launch.cpp.j2) on the current stream; the call returns at
  once, and the host never reads device memory;
- copies: constants go to the device when the graph loads; eager fallbacks and library calls
  are the device's own eager ops (its CPU fallback copies for them): the wrapper says which
  path each takes (`eager_placement`), and a profile shows the fallback's copies as ranges;
- synchronization: none in a graph. The device's eager ops wait where the host needs a value
  (`.item()`, a copy to the host, a data-dependent size), all on the same stream.
"""

import ctypes
import importlib

import torch

from dicp.api import PythonWrapperRenderer, log, py_expr

from .templates import render

DEVICE_TYPE = "emu"
# The device's runtime package, imported with the backend (a vendor names theirs, as a
# torch_npu-based backend imports torch_npu): it registers the device type and torch.emu.
RUNTIME_PACKAGE = "dicp.emu"


def runtime():
    """The device's Python module (torch.emu), registered by its runtime package."""
    if getattr(torch, DEVICE_TYPE, None) is None:
        importlib.import_module(RUNTIME_PACKAGE)
    return getattr(torch, DEVICE_TYPE)


def graph_device(gm) -> str:
    """The device a graph's buffers go on: its first device input's ("emu:1"); the host's for
    a graph on host tensors only (the program's choice: its ops then run as the host's eager
    ops). A graph without tensor inputs is where the program makes its tensors, as in eager:
    on the device of the first it makes there (`device="emu"`, `.to("emu")`), else on the
    host (`device="cpu"` or none: torch's default device)."""
    vals = [n.meta.get("val") for n in gm.graph.find_nodes(op="placeholder")]
    if not any(isinstance(v, torch.Tensor) for v in vals):
        vals = [n.meta.get("val") for n in gm.graph.nodes]
    on_device = [v for v in vals if isinstance(v, torch.Tensor) and v.device.type == DEVICE_TYPE]
    return str(on_device[0].device) if on_device else "cpu"


def on_host(value) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == "cpu"


# Where a device eager call runs (dicp.emu.eager.path), as the wrapper's comment says it.
PLACEMENTS = {
    "native": "on {device}: the device's kernel",
    "fallback": "on the CPU through {device}'s fallback: inputs copied {device} -> cpu, the op "
    "run on the CPU, results copied cpu -> {device}",
    "composite": "on {device}: torch's composite, its ops each the device's kernel or its CPU "
    "fallback",
}


def eager_placement(op: str, device: str) -> str:
    """Where ATen op `op` called on `device`'s tensors runs, in words (the runtime decides:
    its native kernels, the knobs forcing some to the CPU, its fallback for the rest)."""
    path = importlib.import_module(RUNTIME_PACKAGE).eager.path(op)
    return f"{op} runs {PLACEMENTS[path].format(device=device)}"


class LaunchRenderer(PythonWrapperRenderer):
    """The wrapper as Python, each kernel call a launch on the device's current stream."""

    def statement_CallKernel(self, s):
        tensors = ", ".join(str(p) for p in s.pointers)
        sizes = ", ".join(py_expr(n) for n in s.sizes)
        return f"launch(kernels.{s.kernel}, [{tensors}], [{sizes}])"


def launch_entries(kernels) -> str:
    """C++ launch entries of `kernels` ((name, loop_ir.Param list, size count) each)."""
    rows = [
        (
            name,
            [f"static_cast<{_pointer_type(p)}>(p[{i}])" for i, p in enumerate(params)],
            [f"s[{i}]" for i in range(sizes)],
        )
        for name, params, sizes in kernels
    ]
    return render("launch.cpp.j2", kernels=rows)


def _pointer_type(param):
    return f"{'' if param.writable else 'const '}{param.ctype}*"


def kernel_addresses(libraries, names) -> dict:
    """Kernel name -> the address of its launch entry in the one of `libraries` defining it."""
    addresses = {}
    for name in names:
        entry = next(
            f for f in (getattr(lib, f"{name}_launch", None) for lib in libraries) if f is not None
        )
        addresses[name] = ctypes.cast(entry, ctypes.c_void_p).value
    return addresses


def with_constants_on(call, device: str):
    """`call`, whose host tensor constants are copied to `device` at its first run: device
    kernels read device memory only. At the first run, not at load: the compile job may run
    under a fake tensor mode, where a copy would make a fake tensor."""
    scope = call.__globals__  # the wrapper module's names (load_wrapper's scope)
    pending = [name for name, value in scope.items() if on_host(value) and name.startswith("const")]

    def on_device(args):
        while pending:
            name = pending.pop()
            log.info(
                "emugraph: constant %s (%s %s) copied to %s",
                name,
                scope[name].dtype,
                tuple(scope[name].shape),
                device,
            )
            scope[name] = scope[name].to(device)
        return call(args)

    return on_device if pending else call
