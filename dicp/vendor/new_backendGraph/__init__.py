"""new_backendgraph: dicp's reference backend, generating fused C++ kernels for the host CPU."""

from dicp.api import Backend, compile_fx, register_backend

from . import config
from .codegen import codegen
from .codegen.ctypes_map import SUPPORTED_DTYPES
from .compile_job import compile_job, prepare_toolchain
from .conversion import CONVERSIONS
from .convolution import algorithm_state
from .expected_fallbacks import EXPECTED_FALLBACKS
from .heap import retain_freed_memory
from .opset import OPS
from .opset_transform import opset_transform

BACKEND = register_backend(
    Backend(
        name="new_backendgraph",
        opset_transform=opset_transform,
        codegen=codegen,
        compile_job=compile_job,
        decompositions=config.decompositions,
        conversions=CONVERSIONS,
        conversion_table="dicp/vendor/new_backendGraph/conversion.py",
        device="cpu",
        supported_dtypes=SUPPORTED_DTYPES,
        expected_fallbacks=EXPECTED_FALLBACKS,
        vendor_ops=OPS,
        keeps_input_mutations=True,  # CopyInto writes them in place
        chooses_saved_layouts=True,  # channels-last activations stay so for the backward
        process_state=algorithm_state,  # the convolutions' layouts follow ATen's algorithm
    )
)


def new_backendgraph(gm, example_inputs):
    """The TorchDynamo backend entry point (`torch.compile(backend="new_backendgraph")`)."""
    prepare_toolchain()  # g++'s probe and precompiled header build while AOTAutograd traces
    retain_freed_memory()
    return compile_fx(gm, example_inputs, BACKEND)
