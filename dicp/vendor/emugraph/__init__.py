"""emugraph: new_backendgraph's generated C++ kernels, compiled for the emulated accelerator
`emu` (dicp.emu): graphs take, allocate and return emu tensors, and launch their kernels on the
device's current stream without waiting. device.py is the part a vendor replaces."""

from dicp.api import Backend, compile_fx, register_backend

from ..new_backendGraph import BACKEND as HOST_BACKEND
from . import config  # noqa: F401  (declares the knobs)
from .codegen import codegen
from .compile_job import compile_job
from .decompositions import decompositions
from .device import DEVICE_TYPE, runtime
from .expected_fallbacks import EXPECTED_FALLBACKS
from .opset import OPS
from .placement import place_factories


BACKEND = register_backend(
    Backend(
        name="emugraph",
        opset_transform=HOST_BACKEND.opset_transform,
        codegen=codegen,
        compile_job=compile_job,
        decompositions=decompositions,
        conversions=HOST_BACKEND.conversions,
        conversion_table=HOST_BACKEND.conversion_table,
        device=DEVICE_TYPE,
        supported_dtypes=HOST_BACKEND.supported_dtypes,
        expected_fallbacks=EXPECTED_FALLBACKS,
        vendor_ops=OPS,
        process_state=HOST_BACKEND.process_state,  # its conversion's
    )
)
runtime()  # the device comes with its backend: `torch.compile(backend="emugraph")` on emu


def emugraph(gm, example_inputs):
    """The TorchDynamo backend entry point (`torch.compile(backend="emugraph")`). A graph
    without tensor inputs makes the tensors whose device it does not name on the current one."""
    gm = place_factories(gm, example_inputs, f"{DEVICE_TYPE}:{runtime().current_device()}")
    return compile_fx(gm, example_inputs, BACKEND)
