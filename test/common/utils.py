"""The op/model test harness, API-compatible with DICP's test/common/utils.py.

Tests import `torch`, `dynamo`, `parse_args`, `compile_model`, `get_device`, `Size`,
`update_dynamo_config` and `parse_bool_arg` from here. `--backend` and `--dynamic` are read
from argv so the same file runs under pytest and as a script.
"""
import argparse
import os
import random

import torch
import torch._dynamo as dynamo

torch.manual_seed(1)
random.seed(1)

DEFAULT_BACKEND = "new_backendgraph"


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
    values pytest parsed are also read from the environment (set by test/conftest.py)."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--backend", type=str,
                        default=os.environ.get("DICP_TEST_BACKEND", DEFAULT_BACKEND))
    parser.add_argument("--dynamic", type=parse_dynamic_arg,
                        default=parse_dynamic_arg(os.environ.get("DICP_TEST_DYNAMIC", "all")))
    args, _ = parser.parse_known_args()
    return args


def compile_model(model, backend, dynamic=False):
    """One CompiledModel per requested mode; dynamic=None asks for both static and dynamic."""
    modes = [False, True] if dynamic is None else [bool(dynamic)]
    return [CompiledModel(torch.compile(model, backend=backend, dynamic=mode), mode)
            for mode in modes]


def get_device():
    # The reference backend's device is the host CPU.
    return "cpu"


def update_dynamo_config(dynamic=False):
    dynamo.config.assume_static_by_default = not dynamic
    dynamo.config.automatic_dynamic_shapes = dynamic


from .tolerance import (MODEL_TOLERANCES, NORM_TOLERANCES, TOLERANCES,  # noqa: E402,F401
                        assert_close, assert_close_or_as_accurate)
