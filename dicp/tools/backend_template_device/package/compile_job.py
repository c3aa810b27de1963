"""BACKEND_NAME's toolchain and compile job: g++ builds the kernels and their launch entries into
a shared library (dicp's cache keys it by source, command and chip), then the wrapper runs with
the entries' addresses, the device's launch call and the constants on the device."""

import dataclasses
from types import SimpleNamespace

from dicp.api import BuildSpec, Toolchain, load_artifact, load_wrapper

from . import device

FLAGS = ("-O2", "-std=c++17", "-shared", "-fPIC", "-fopenmp")
TOOLCHAIN = Toolchain(("g++", *FLAGS, "{source}", "-o", "{artifact}"))


def compile_job(generated, ctx):
    kernels, library = None, None
    if "kernels.cpp" in generated.files:
        library = load_artifact(BuildSpec(generated.files["kernels.cpp"], TOOLCHAIN))
        kernels = SimpleNamespace(**device.kernel_addresses(library, generated.metadata["kernels"]))
    on_device = dataclasses.replace(
        generated, constants=device.constants_on_device(generated.constants)
    )
    namespace = {"kernels": kernels, "launch": device.runtime().launch, "library": library}
    return load_wrapper(on_device, namespace, ctx.source_path("wrapper.py"))
