"""Running compiled OpenVINO Models on torch tensors.

Inputs go in as numpy views of the torch tensors' memory (no copy for a contiguous tensor;
`share_inputs=True`); outputs come back as numpy arrays OpenVINO wrote for this call, which
`torch.from_numpy` wraps without copying.
"""

import functools

import numpy as np
import torch

from dicp.api import config


@functools.lru_cache(maxsize=None)
def core():
    """One OpenVINO Core per process (it owns the plugins and their thread pools)."""
    import openvino as ov

    return ov.Core()


def compile_options() -> dict:
    """The compile properties the knobs ask for."""
    options = {"INFERENCE_PRECISION_HINT": config.ovgraph_precision, "PERFORMANCE_HINT": "LATENCY"}
    if config.ovgraph_model_cache:
        options["CACHE_DIR"] = str(config.cache_dir / "openvino")
    return options


# OpenVINO's CPU plugin runs int64 as int32 (it has no int64 kernels; openvino 2026.4 wraps
# 2**40 + 3 to 3 without a word), so an int64 feed outside int32 is refused, not truncated.
INT32_RANGE = (-(2**31), 2**31 - 1)


class Int64RangeError(OverflowError):
    """An int64 input of an OpenVINO subgraph holds a value int32 cannot."""


class EnginePart:
    """One compiled engine subgraph: `part(feeds)` -> tuple of torch tensors."""

    def __init__(self, model, device, name="engine"):
        self.compiled = core().compile_model(model, device, compile_options())
        self.request = self.compiled.create_infer_request()
        self.numpy_types = [p.get_element_type().to_dtype() for p in model.get_parameters()]
        self.name = name

    def __call__(self, feeds):
        for position, value in enumerate(feeds):
            self._check_int64_range(position, value)
        inputs = [self._as_numpy(value, dtype) for value, dtype in zip(feeds, self.numpy_types)]
        results = self.request.infer(inputs, share_inputs=True, share_outputs=False)
        return tuple(torch.from_numpy(r) for r in results.to_tuple())

    def _check_int64_range(self, position, value):
        if isinstance(value, torch.Tensor) and value.dtype == torch.int64 and value.numel():
            low, high = (int(v) for v in torch.aminmax(value.detach()))
            if low < INT32_RANGE[0] or high > INT32_RANGE[1]:
                raise Int64RangeError(
                    f"ovgraph {self.name}: int64 input {position} holds values in [{low}, "
                    f"{high}], outside int32, which OpenVINO's CPU plugin would compute them "
                    f"in (silently wrapped); run this graph with new_backendgraph"
                )

    @staticmethod
    def _as_numpy(value, dtype):
        if isinstance(value, torch.Tensor):
            return value.detach().contiguous().numpy()
        return np.asarray(value, dtype=dtype)  # a size the wrapper computed
