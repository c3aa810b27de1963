"""emugraph's compile job: build the graph's C++ with new_backendgraph's toolchain, then load its
wrapper with the launch entries' addresses, the device's launch call and the constants on the
device."""
import dataclasses
from types import SimpleNamespace

from dicp.api import load_artifacts, load_wrapper, profile

from ..new_backendGraph.compile_job import build_spec
from . import device


def compile_job(generated, ctx):
    """Sources -> `call(args)`, which enqueues the graph's kernels and returns."""
    signatures = generated.metadata.get("kernels", {})
    profile.count("kernels", len(signatures))
    names = sorted(n for n in generated.files if n.startswith("kernels") and n.endswith(".cpp"))
    libraries = load_artifacts([build_spec(generated.files[n]) for n in names]) if names else []
    kernels = SimpleNamespace(**device.kernel_addresses(libraries, signatures))
    on_device = dataclasses.replace(generated, constants=device.constants_on(
        generated.constants, generated.metadata.get("device", device.DEVICE_TYPE)))
    namespace = {"kernels": kernels, "launch": device.runtime().launch,
                 "libraries": libraries}
    return load_wrapper(on_device, namespace, ctx.source_path("wrapper.py"))
