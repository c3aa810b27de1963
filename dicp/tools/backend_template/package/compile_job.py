"""BACKEND_NAME's toolchain and compile job: g++ builds the kernels into a shared library (dicp's
cache keys it by source, command and chip; a corrupt entry is rebuilt), then the wrapper runs
with them."""

import ctypes

from dicp.api import BuildSpec, Toolchain, load_artifact, load_wrapper

FLAGS = ("-O2", "-std=c++17", "-shared", "-fPIC", "-fopenmp")
TOOLCHAIN = Toolchain(("g++", *FLAGS, "{source}", "-o", "{artifact}"))


class Kernels:
    """The built library's kernels by name, each taking its pointers then an element count."""

    def __init__(self, library, signatures):
        for name, pointers in signatures.items():
            kernel = getattr(library, name)
            kernel.argtypes = [ctypes.c_void_p] * pointers + [ctypes.c_int64]
            kernel.restype = None
            setattr(self, name, kernel)


def compile_job(generated, ctx):
    kernels = None
    if "kernels.cpp" in generated.files:
        library = load_artifact(BuildSpec(generated.files["kernels.cpp"], TOOLCHAIN))
        kernels = Kernels(library, generated.metadata["kernels"])
    return load_wrapper(generated, {"kernels": kernels}, ctx.source_path("wrapper.py"))
