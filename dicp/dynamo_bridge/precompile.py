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
import hashlib
from typing import Any, Callable

import torch

from .artifact import CompiledGraph

try:
    from torch._inductor.output_code import OutputCode
except ImportError:  # a torch that moved it: precompile is refused with a clear error
    OutputCode = None


class PrecompileUnsupported(RuntimeError):
    pass


def keyed_autograd_cache(fingerprint: str):
    """A context in which torch's AOTAutogradCache keys include dicp's `fingerprint` (for
    normal compiles: also dicp's cache directory, so a new one starts empty, as a user who
    points DICP_CACHE_DIR elsewhere and the tests' private caches expect)."""
    tag = torch.compiler.config.cache_key_tag
    return torch.compiler.config.patch(cache_key_tag=f"{tag}|dicp:{fingerprint}")


def cacheable(compile_graph: Callable) -> Callable:
    """`compile_graph` as the kind of AOTAutograd compiler whose graphs torch's
    AOTAutogradCache keeps (SerializableAOTDispatchCompiler: it returns an OutputCode)."""
    if OutputCode is None:
        return compile_graph
    from torch._functorch._aot_autograd.schemas import SerializableAOTDispatchCompiler
    return SerializableAOTDispatchCompiler(DicpOutputCode, compile_graph)


_OWN_BUNDLING = contextvars.ContextVar("dicp_own_bundling", default=False)


@contextlib.contextmanager
def autograd_cache_bundling():
    """A context in which AOTAutogradCache keeps each graph's OutputCode itself (torch keeps
    only Inductor's by reference into its FX graph cache). A training graph's entry is saved
    only when its backward compiles inside it (dynamic shapes); a backward compiled lazily, at
    the first backward call, is not saved. Forcing it early (force_non_lazy_backward_lowering)
    was tried and gave wrong conv-weight gradients under DDP (test_distributed), cause not yet
    found (suspected: compiled early, the backward assumes the saved activations' traced
    strides, where a lazy one sees their real ones)."""
    own = not _bundling()
    token = _OWN_BUNDLING.set(own)
    try:
        with torch._functorch.config.patch(bundled_autograd_cache=True):
            yield
    finally:
        _OWN_BUNDLING.reset(token)


def _bundling() -> bool:
    return getattr(torch._functorch.config, "bundled_autograd_cache", False)


def _precompiling() -> bool:
    """Whether the user's aot_compile bundles this compile (not dicp's own cache)."""
    return _bundling() and not _OWN_BUNDLING.get()


def serializable(compiled_fn: Callable) -> Callable:
    """AOTAutograd's result, made a SerializableCallable when aot_compile bundles it."""
    if not _bundling() or getattr(compiled_fn, "serialize", None) is None:
        return compiled_fn
    from torch._dynamo.aot_compile_types import BundledAOTAutogradSerializableCallable
    return BundledAOTAutogradSerializableCallable(compiled_fn)


def output_code(compiled: CompiledGraph, fn: Callable) -> Callable:
    """`fn` (boxed) as something torch can cache and bundle into a precompiled function. A
    graph with no CompiledGraph (its codegen returned none) runs but is not saved."""
    if OutputCode is None or compiled is None:
        if _precompiling():
            raise PrecompileUnsupported(_why_not(compiled))
        if OutputCode is None:
            return fn
    code = DicpOutputCode(compiled=compiled, fn=fn)
    code._boxed_call = True
    return code


def _why_not(compiled) -> str:
    if OutputCode is None:
        return (f"torch {torch.__version__} has no torch._inductor.output_code.OutputCode: "
                f"dicp cannot precompile (aot_compile) on it; use torch 2.11 to 2.15")
    return ("this backend's codegen does not return a dicp GeneratedGraph, so its compiled "
            "graphs cannot be saved (aot_compile); return one from Backend.codegen")


if OutputCode is not None:
    @dataclasses.dataclass
    class DicpOutputCode(OutputCode):
        """A dicp graph's compiled code as torch's AOTAutogradCache and precompile keep it."""
        compiled: CompiledGraph | None = None
        fn: Callable | None = None
        serialized: bytes | None = None
        digest: str | None = None  # of `serialized`: a damaged entry is not trusted

        def __call__(self, inputs: Any) -> Any:
            return self.fn(inputs)

        def prepare_for_serialization(self) -> None:
            # torch calls this on a shallow copy: the live callable stays with the original
            if self.compiled is None:
                from torch._functorch._aot_autograd.autograd_cache import (
                    BypassAOTAutogradCache)
                raise BypassAOTAutogradCache("a dicp graph without a CompiledGraph")
            self.serialized = self.compiled.dumps(with_artifacts=True)
            self.digest = hashlib.sha256(self.serialized).hexdigest()
            self.compiled = self.fn = None

        def post_compile(self, example_inputs, constants, graph_kwargs) -> None:
            if self.fn is None:
                from .compile_fx import boxed
                from .graph import CompileContext
                from dicp.vendor import get_backend
                if hashlib.sha256(self.serialized).hexdigest() != self.digest:
                    raise ValueError("a dicp graph in torch's cache is damaged (digest "
                                     "mismatch); compiling it again")
                compiled = CompiledGraph.loads(self.serialized)
                _replay(compiled)
                ctx = CompileContext(get_backend(compiled.backend), compiled.kind, None)
                self.fn = boxed(compiled.callable(ctx))
                self.compiled, self.serialized = compiled, None

        def set_triton_bundle(self, triton_bundle: Any) -> None:
            pass  # dicp kernels are not triton's


def _replay(compiled: CompiledGraph) -> None:
    """What a loaded graph's conversion did, for those who watch: its fallbacks (the strict
    op harness) and a cache hit."""
    from . import graph_cache
    from .fallback import record_fallback
    for taken in compiled.fallbacks:
        record_fallback(taken)
    graph_cache.count_torch_hit()
