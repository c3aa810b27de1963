"""BACKEND_NAME's device layer: the parts that talk to the device's runtime (BACKEND_DEVICE).
Replace these with your runtime's calls; the rest of the backend does not know the device.

- allocation: the wrapper allocates on DEVICE (`self.wrapper.device`), through its allocator;
- launch: a kernel call prints as `launch(kernels.k, [tensors], [sizes])` (LaunchRenderer): the
  runtime enqueues the kernel's launch entry (templates/kernel.cpp.j2) on the current stream
  and returns; the host never reads device memory;
- copies: constants go to the device when the graph loads; eager fallbacks are the device's own;
- synchronization: none in a graph (the runtime's ops wait where the host needs a value).
"""

import ctypes
import importlib

import torch

from dicp.api import PythonWrapperRenderer, py_expr

DEVICE = "BACKEND_DEVICE"
RUNTIME_PACKAGE = "BACKEND_RUNTIME"  # the package that registers the device with torch


def runtime():
    """The device's Python module (torch.BACKEND_DEVICE), registered by its runtime package."""
    if getattr(torch, DEVICE, None) is None:
        importlib.import_module(RUNTIME_PACKAGE)
    return getattr(torch, DEVICE)


class LaunchRenderer(PythonWrapperRenderer):
    """The wrapper as Python, each kernel call a launch on the device's current stream."""

    def statement_CallKernel(self, s):
        sizes = ", ".join(py_expr(n) for n in s.sizes)
        return f"launch(kernels.{s.kernel}, [{', '.join(s.pointers)}], [{sizes}])"


def kernel_addresses(library, names) -> dict:
    """Kernel name -> the address of its launch entry (`<name>_launch`)."""
    return {
        name: ctypes.cast(getattr(library, f"{name}_launch"), ctypes.c_void_p).value
        for name in names
    }


def constants_on_device(constants: dict) -> dict:
    return {
        name: value.to(DEVICE) if isinstance(value, torch.Tensor) else value
        for name, value in constants.items()
    }
