"""dicp's vendor API: the one module a backend imports.

Everything a vendor writes against is here, and nothing a vendor needs is elsewhere: a backend
(in-tree or a pip package of its own) imports `dicp.api` and its own package, and a test fails
if it imports anything else of dicp. The bridge's modules may move; these names stay.
docs/vendor.md is the contract of each name, grouped as below.
"""

from dicp import config, profile

from .bridge import IMPORT_STARTED
from .bridge.cache.build import (
    BuildSpec,
    CompileError,
    Toolchain,
    atomic_write,
    load_artifact,
    load_artifacts,
)
from .bridge.entry import compile_fx
from .bridge.pipeline import backend as _registry
from .bridge.pipeline.backend import (
    Backend,
    Codegen,
    CompileJob,
    Converter,
    DecompositionFactory,
    OpsetTransform,
    get_backend,
    registered_backends,
)
from .bridge.pipeline.codegen import (
    GeneratedGraph,
    GraphCodegenBase,
    PythonCodegen,
    load_wrapper,
    sizes_as_sympy,
)
from .bridge.pipeline.conversion import (
    ConversionContext,
    DuplicateConversionError,
    Unsupported,
    convert,
    register_conversion,
    rewrite_patterns,
)
from .bridge.pipeline.decompositions import build_decompositions
from .bridge.pipeline.dynamo_context import install as _install_compile_timing
from .bridge.pipeline.graph_engine import GraphEngineCodegen
from .bridge.pipeline.operator import InferenceError, Operator
from .bridge.pipeline.provenance import ORIGIN
from .bridge.pipeline.stages import CompileContext
from .bridge.pipeline.symbolic import (
    ExprPrinter,
    is_dense,
    is_symbolic,
    may_overlap,
    py_expr,
    same_layout,
    same_size,
    shape_of,
    size_hints,
    storage_span,
    strides_of,
    to_sympy,
)
from .bridge.pipeline.templating import render
from .bridge.pipeline.traced_layout import traced_value
from .bridge.pipeline.torch_compat import (
    TORCH_VERSION,
    OpOverload,
    OpOverloadPacket,
    build_config,
    get_decompositions,
    same_storage,
    storage_key,
    unset_fake_temporarily,
)
from .bridge.pipeline.utils import log, opmath_dtype
from .bridge.pipeline import wrapper_ir
from .bridge.pipeline.wrapper import TensorView, Var
from .bridge.pipeline.wrapper_python import PythonWrapperRenderer

__all__ = [
    # the backend: its spec, the Protocols of its callables, the registry, the dynamo entry
    "Backend",
    "OpsetTransform",
    "Codegen",
    "CompileJob",
    "Converter",
    "DecompositionFactory",
    "register_backend",
    "get_backend",
    "registered_backends",
    "compile_fx",
    "CompileContext",
    # ops and conversion
    "Operator",
    "InferenceError",
    "register_conversion",
    "DuplicateConversionError",
    "ConversionContext",
    "Unsupported",
    "convert",
    "rewrite_patterns",
    "build_decompositions",
    "get_decompositions",
    "OpOverload",
    "OpOverloadPacket",
    "ORIGIN",
    "traced_value",
    # codegen
    "GraphCodegenBase",
    "GraphEngineCodegen",
    "PythonCodegen",
    "GeneratedGraph",
    "load_wrapper",
    "render",
    "Var",
    "TensorView",
    "sizes_as_sympy",
    "wrapper_ir",
    "PythonWrapperRenderer",
    # sizes as sympy
    "to_sympy",
    "shape_of",
    "strides_of",
    "is_symbolic",
    "same_size",
    "same_layout",
    "is_dense",
    "py_expr",
    "ExprPrinter",
    "size_hints",
    "may_overlap",
    "same_storage",
    "storage_key",
    "unset_fake_temporarily",
    "storage_span",
    # building
    "Toolchain",
    "BuildSpec",
    "load_artifact",
    "load_artifacts",
    "CompileError",
    "atomic_write",
    # knobs, the compile profile, logging, torch facts
    "config",
    "profile",
    "log",
    "opmath_dtype",
    "TORCH_VERSION",
    "build_config",
]


def register_backend(backend: Backend) -> Backend:
    """Register `backend` under `backend.name` (when the backend's package is imported).
    Registering the same object twice is a no-op; another backend under a taken name raises
    ValueError. Also starts timing dynamo and AOTAutograd for the compile profile, so that the
    first compile is timed from its start, and ends the compile profile's import stage."""
    _install_compile_timing()
    profile.imported(IMPORT_STARTED)
    return _registry.register_backend(backend)
