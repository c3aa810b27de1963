"""emugraph's compile job: build the graph's C++ with new_backendgraph's toolchain, then load its
wrapper with the launch entries' addresses, the device's launch call and the constants on the
device."""

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
    namespace = {"kernels": kernels, "launch": device.runtime().launch, "libraries": libraries}
    call = load_wrapper(generated, namespace, ctx.source_path("wrapper.py"))
    return device.with_constants_on(call, generated.metadata.get("device", device.DEVICE_TYPE))
