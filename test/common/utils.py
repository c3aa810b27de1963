"""The op/model test harness, API-compatible with DICP's test/common/utils.py.

Tests import `torch`, `dynamo`, `parse_args`, `compile_model`, `get_device`, `Size`,
`update_dynamo_config` and `parse_bool_arg` from here. `--backend` and `--dynamic` are read
from argv so the same file runs under pytest and as a script.
"""

import argparse
import random

import torch
import torch._dynamo as dynamo

from dicp import config as dicp_config
from dicp.tools.on_device import backend_device, on_device, to_device, to_host

torch.manual_seed(1)
random.seed(1)

DEFAULT_BACKEND = dicp_config.knob("test_backend").default


class Size:
    """An input size for static runs and another for dynamic runs of the same case.

    Dynamic cases also run at `resized` (default: the dynamic size with every dim above 1 grown
    by one, see test/op/conftest.py); give it where that rule does not fit the op."""

    def __init__(self, static_size, dynamic_size, resized=None):
        self.static = static_size
        self.dynamic = dynamic_size
        self.resized = resized

    def __repr__(self):
        return f"Size(static={self.static}, dynamic={self.dynamic})"


class CompiledModel:
    def __init__(self, model, dynamic):
        self.model = model
        self.dynamic = dynamic

    def __repr__(self):
        return "dynamic" if self.dynamic else "static"


def parse_bool_arg(arg):
    if isinstance(arg, bool):
        return arg
    value = str(arg).strip().lower()
    if value in ("true", "yes", "y", "t", "1"):
        return True
    if value in ("false", "no", "n", "f", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected a boolean, got {arg!r}")


def parse_dynamic_arg(arg):
    """`all` (the default) runs each case both static and dynamic; otherwise a boolean."""
    if arg is None or str(arg).strip().lower() == "all":
        return None
    return parse_bool_arg(arg)


def parse_args():
    """--backend/--dynamic from argv; under pytest-xdist a worker's argv lacks them, so the
    values pytest parsed are also read from the environment (set by test/common/harness.py)."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--backend", type=str, default=dicp_config.test_backend)
    parser.add_argument(
        "--dynamic", type=parse_dynamic_arg, default=parse_dynamic_arg(dicp_config.test_dynamic)
    )
    args, _ = parser.parse_known_args()
    return args


def compile_model(model, backend, dynamic=False):
    """One CompiledModel per requested mode; dynamic=None asks for both static and dynamic.
    For a backend of a device other than the host, a model with parameters or buffers runs on
    that device (OnDevice); an op test's module has none, and puts its inputs there itself."""
    modes = [False, True] if dynamic is None else [bool(dynamic)]
    device = device_of(backend)
    compiled = [torch.compile(model, backend=backend, dynamic=mode) for mode in modes]
    if device != "cpu" and _has_state(model):
        compiled = [OnDevice(c, model, device) for c in compiled]
    return [CompiledModel(c, mode) for c, mode in zip(compiled, modes)]


class OnDevice:
    """A compiled model run on `device` while the test holds it on the host, to compare with
    eager on the host: each call copies the module's parameters and buffers and every tensor
    argument to the device (differentiably, so gradients reach the host parameters), runs the
    compiled model there, checks that every tensor output is on the device, and returns the
    outputs copied to the host; buffers the call updated (running statistics) are copied back.
    A function's tensors are its arguments (dicp.tools.on_device)."""

    def __init__(self, compiled, module, device):
        self.compiled, self.module, self.device = compiled, module, device

    def __call__(self, *args, **kwargs):
        module = self.module
        if not isinstance(module, torch.nn.Module):
            return on_device(self.compiled, self.device)(*args, **kwargs)
        host = dict(module.named_parameters()) | dict(module.named_buffers())
        state = {name: tensor.to(self.device) for name, tensor in host.items()}
        args, kwargs = to_device((args, kwargs), self.device)
        prefix = "_orig_mod." if hasattr(self.compiled, "_orig_mod") else ""  # torch.compile's
        outputs = torch.func.functional_call(
            self.compiled,
            {f"{prefix}{name}": tensor for name, tensor in state.items()},
            args,
            kwargs,
        )
        with torch.no_grad():
            for name, buffer in module.named_buffers():
                buffer.copy_(state[name])
        return to_host(outputs, self.device)

    def __getattr__(self, name):  # the module's own attributes (config, methods)
        return getattr(self.compiled, name)


def _has_state(model):
    return isinstance(model, torch.nn.Module) and any(
        True for _ in (*model.parameters(), *model.buffers())
    )


def device_of(backend):
    """The device of dynamo backend `backend` (a name or a callable): `Backend.device` for a
    dicp backend, else the host."""
    # a backend object wrapping the one under test (a graph counter) runs on its device
    return backend_device(backend if isinstance(backend, str) else parse_args().backend)


def dicp_backend(name):
    """The registered dicp Backend called `name`, or None for other dynamo backends (inductor,
    aot_eager), which tests may also run against."""
    from dicp.api import get_backend

    try:
        return get_backend(name)
    except KeyError:
        return None


def get_device():
    """The device of the backend under test (`Backend.device`); the host CPU for others."""
    return device_of(parse_args().backend)


def update_dynamo_config(dynamic=False):
    dynamo.config.assume_static_by_default = not dynamic
    dynamo.config.automatic_dynamic_shapes = dynamic


from .accuracy import float64_run  # noqa: F401
from .tolerance import (  # noqa: F401  (re-exported)
    MODEL_TOLERANCES,
    TOLERANCES,
    assert_close,
    assert_close_or_as_accurate,
)


def assert_grads_close(outputs, dicp_outputs, inputs):
    """The gradients of the compiled outputs match eager's: both weighted by the same random
    weights (every element gets its own gradient) and differentiated w.r.t. `inputs`."""
    weights = [torch.randn(out.shape).to(out.dtype) for out in outputs]
    grads = torch.autograd.grad(sum((o * w).sum() for o, w in zip(outputs, weights)), inputs)
    # the compiled outputs may live on the backend's device: the same weights, copied there
    dicp_grads = torch.autograd.grad(
        sum((o * w.to(o.device)).sum() for o, w in zip(dicp_outputs, weights)), inputs
    )
    for dicp_grad, grad in zip(dicp_grads, grads, strict=True):
        assert_close(dicp_grad, grad)
