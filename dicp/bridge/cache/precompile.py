"""torch's precompile and AOTAutogradCache for dicp backends. Private torch API, isolated.

`torch.compile(...).aot_compile(...)`, `save_compiled_function` and
`torch.compiler.load_compiled_function` bundle each AOTAutograd graph's compiled code. torch
only bundles an `OutputCode` (torch._inductor.output_code, no public equivalent): AOTAutograd
asserts that type when `bundled_autograd_cache` is on, which aot_compile turns on; torch's own
aot_eager does the same (`AOTEagerOutputCode`). So every dicp graph compiler returns a
`DicpOutputCode`: it runs the compiled graph, and when torch saves it, it carries the graph as
data (`artifact.CompiledGraph`) with the bytes of its built libraries; on load it installs them
in the build cache and replays the backend's compile job, with no compiler needed.

aot_compile also looks graphs up in torch's AOTAutogradCache, whose key knows nothing of dicp's
knobs and tables. `keyed_autograd_cache` salts it through the public
`torch.compiler.config.cache_key_tag`, so an entry compiled under other dicp settings misses.

aot_compile on torch 2.11 wraps a result for saving only when the backend is Inductor or an
`AotAutograd` object; dicp's backends are functions, so `serializable` wraps it in torch's own
`BundledAOTAutogradSerializableCallable` (torch._dynamo.aot_compile_types), as later releases
do for any result that can `serialize`. On those, torch wraps it once more: the outer wrapper
delegates to the inner one, and loading gives back a single wrapper.

`OutputCode` has the same four methods on torch 2.11, 2.13 and 2.15. On a torch without it,
dicp returns plain callables and saving a precompiled function raises `PrecompileUnsupported`.
"""

import contextlib
import contextvars
import dataclasses
import random
from typing import Any
from collections.abc import Callable

import torch

from dicp import config

from ..pipeline.backend import get_backend
from ..pipeline.fallback import record_fallback
from ..pipeline.stages import CompileContext, boxed
from .artifact import CompiledGraph

try:
    from torch._inductor.output_code import OutputCode
except ImportError:  # a torch that moved it: precompile is refused with a clear error
    OutputCode = None  # type: ignore[misc,assignment]


class PrecompileUnsupported(RuntimeError):
    pass


# Whether a serialized DicpOutputCode carries its built libraries (precompile: it loads where
# there is no cache and no compiler) or refers to them in the build cache (the AOT cache).
_CARRY_ARTIFACTS = contextvars.ContextVar("dicp_carry_artifacts", default=True)


@contextlib.contextmanager
def artifacts_by_reference():
    """Serialize compiled graphs without their libraries' bytes."""
    token = _CARRY_ARTIFACTS.set(False)
    try:
        yield
    finally:
        _CARRY_ARTIFACTS.reset(token)


@contextlib.contextmanager
def serializable_results(key: str):
    """AOTAutograd's results made serializable (`serialize_result`) as they are compiled:
    bundled, through torch's AOTAutogradCache (which only then makes them), a training
    graph's backward compiled with its forward so that the result is whole, and compiled
    graphs referring to their libraries in the build cache rather than carrying them.

    torch's cache is consulted under a key made from `key` (dicp's AOT-cache key, which
    holds all a result depends on) instead of its own: torch's key imports Inductor's
    lowerings and hashes triton's sources, 1.5-8 s of a cold start. torch takes a nonce,
    `random.random()`, when it does not compute its key (`bypass_autograd_cache_key`,
    meant for precompile, after the check that torch's FX graph cache, which dicp does not
    use, is off); dynamo restores Python's random state around each compile, so two graphs
    drew the same nonce and the second got the first's result (a bug once). Seeded with
    `key` and dicp's cache directory, the nonce is the same only for the same key in the same
    cache: torch's cache directory is shared by every dicp cache, and an entry made for
    another one (a test's own cold cache) refers to kernels that are not in this one's build
    cache (a bug once: a cold cache built no kernels). The caller's random state is put back
    afterwards."""
    state = random.getstate()
    random.seed(f"{key}|{config.cache_dir.resolve()}")
    try:
        with (
            torch._functorch.config.patch(
                bundled_autograd_cache=True,
                force_autograd_cache=True,
                force_non_lazy_backward_lowering=True,
                bypass_autograd_cache_key=True,
            ),
            torch._inductor.config.patch(fx_graph_cache=False),
            artifacts_by_reference(),
        ):
            yield
    finally:
        random.setstate(state)


def serialize_result(compiled_fn) -> bytes:
    """A result compiled under `serializable_results()` as bytes (raises if it cannot be)."""
    from torch._dynamo.aot_compile_types import BundledAOTAutogradSerializableCallable

    with artifacts_by_reference():
        return BundledAOTAutogradSerializableCallable.serialize_compile_artifacts(compiled_fn)


def result_input_flags(compiled_fn) -> list:
    """Per input a result compiled under `serializable_results()` takes (the parameters and
    buffers AOTAutograd lifted, then dynamo's), whether it requires grad, as the result itself
    records them (its runtime metadata)."""
    entry = compiled_fn.compiled_fn.serialize()
    return [info.requires_grad for info in entry.runtime_metadata.input_info]


def load_result(data: bytes):
    """The callable `serialize_result` saved."""
    from torch._dynamo.aot_compile_types import BundledAOTAutogradSerializableCallable

    return BundledAOTAutogradSerializableCallable.deserialize_compile_artifacts(data)


def bundling() -> bool:
    """Whether AOTAutograd bundles results now (inside aot_compile, or serializable_results)."""
    return getattr(torch._functorch.config, "bundled_autograd_cache", False)


def autograd_config_text() -> str:
    """functorch's config, which decides what AOTAutograd makes of a graph."""
    return repr(sorted(torch._functorch.config.save_config_portable().items()))


def keyed_autograd_cache(fingerprint: str):
    """A context in which torch's AOTAutogradCache keys include dicp's `fingerprint`."""
    tag = torch.compiler.config.cache_key_tag
    return torch.compiler.config.patch(  # type: ignore[attr-defined]  # torch config modules
        cache_key_tag=f"{tag}|dicp:{fingerprint}"
    )


def serializable(compiled_fn: Callable) -> Callable:
    """AOTAutograd's result, made a SerializableCallable when aot_compile bundles it."""
    if not bundling() or getattr(compiled_fn, "serialize", None) is None:
        return compiled_fn
    from torch._dynamo.aot_compile_types import BundledAOTAutogradSerializableCallable

    return BundledAOTAutogradSerializableCallable(compiled_fn)


def output_code(compiled: CompiledGraph, fn: Callable) -> Callable:
    """`fn` (boxed) as something torch can bundle into a precompiled function."""
    if OutputCode is None or compiled is None:
        if bundling() and _CARRY_ARTIFACTS.get():  # aot_compile: it cannot be saved
            raise PrecompileUnsupported(_why_not(compiled))
        if bundling() and OutputCode is not None:  # the AOT cache: not stored, no error
            return _unsaved_output_code(fn)
        return fn
    return _boxed(DicpOutputCode(compiled=compiled, fn=fn))


def _unsaved_output_code(fn: Callable) -> Callable:
    """`fn` as an OutputCode (AOTAutograd asserts one while bundling) that is never saved."""
    return _boxed(DicpOutputCode(compiled=None, fn=fn))


def _boxed(code):
    code._boxed_call = True  # AOTAutograd's convention: called with the list of inputs
    return code


def _why_not(compiled) -> str:
    if OutputCode is None:
        return (
            f"torch {torch.__version__} has no torch._inductor.output_code.OutputCode: "
            f"dicp cannot precompile (aot_compile) on it; use torch 2.11 to 2.15"
        )
    return (
        "this backend's codegen does not return a dicp GeneratedGraph, so its compiled "
        "graphs cannot be saved (aot_compile); return one from Backend.codegen"
    )


if OutputCode is not None:

    @dataclasses.dataclass
    class DicpOutputCode(OutputCode):
        """A dicp graph's compiled code as torch's AOTAutogradCache and precompile keep it."""

        compiled: CompiledGraph | None = None
        fn: Callable | None = None
        serialized: bytes | None = None

        def __call__(self, inputs: Any) -> Any:
            return self.fn(inputs)  # type: ignore[misc]  # None only while saved, never called

        def prepare_for_serialization(self) -> None:
            # torch calls this on a shallow copy: the live callable stays with the original
            if self.compiled is None:  # torch skips saving it, quietly
                from torch._functorch._aot_autograd.autograd_cache import BypassAOTAutogradCache

                raise BypassAOTAutogradCache(
                    "a dicp graph whose codegen returned no GeneratedGraph cannot be saved"
                )
            self.serialized = self.compiled.dumps(with_artifacts=_CARRY_ARTIFACTS.get())
            self.compiled = self.fn = None

        def post_compile(self, example_inputs, constants, graph_kwargs) -> None:
            if self.fn is None:
                assert self.serialized is not None, "a DicpOutputCode saved without its graph"
                compiled = CompiledGraph.loads(self.serialized)
                for taken in compiled.fallbacks:  # observers see them as if converted now
                    record_fallback(taken)
                ctx = CompileContext(get_backend(compiled.backend), compiled.kind, None)
                self.fn = boxed(compiled.callable(ctx), compiled.kind)
                self.compiled, self.serialized = compiled, None

        def set_triton_bundle(self, triton_bundle: Any) -> None:
            pass  # dicp kernels are not triton's
