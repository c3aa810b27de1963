"""ovgraph: dicp's graph-engine backend on OpenVINO. Each graph's OpenVINO ops become one
OpenVINO Model per engine subgraph, compiled once with Core().compile_model and run on torch
tensors; ops OpenVINO lacks run as eager ATen calls between the subgraphs."""

from dicp.api import Backend, compile_fx, register_backend

from . import config, conversion_layout  # noqa: F401  (conversion_layout: its rows)
from .codegen import DTYPES, codegen
from .compile_job import compile_job
from .conversion import CONVERSIONS
from .expected_fallbacks import DTYPE_FALLBACKS, EXPECTED_FALLBACKS
from .opset import OPS
from .opset_transform import opset_transform

BACKEND = register_backend(
    Backend(
        name="ovgraph",
        opset_transform=opset_transform,
        codegen=codegen,
        compile_job=compile_job,
        decompositions=config.decompositions,
        conversions=CONVERSIONS,
        conversion_table="dicp/vendor/ovgraph/conversion.py (layout ops: conversion_layout.py)",
        device="cpu",
        supported_dtypes=frozenset(DTYPES) - set(DTYPE_FALLBACKS),
        expected_fallbacks=EXPECTED_FALLBACKS,
        dtype_fallbacks=DTYPE_FALLBACKS,
        vendor_ops=OPS,
    )
)


def ovgraph(gm, example_inputs):
    """The TorchDynamo backend entry point (`torch.compile(backend="ovgraph")`)."""
    return compile_fx(gm, example_inputs, BACKEND)
