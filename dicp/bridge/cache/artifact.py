"""A compiled graph as data: what the graph cache stores and torch's precompile carries.

`CompiledGraph` holds what a backend's codegen generated (wrapper source, kernel sources,
constants, metadata; vendor ops by name) and the build-cache entries its compile job loaded.
Turning it back into a callable replays only the backend's compile job: no conversion, shape
inference or rendering. With `with_artifacts=True` the bytes of the built libraries travel
too, so a process with an empty cache and no compiler can load it (`install`, `prebuilt`).
"""

import dataclasses
import io
import pickle
from dataclasses import dataclass, field

from ..pipeline.backend import get_backend
from ..pipeline.codegen import GeneratedGraph
from ..pipeline.torch_compat import unset_fake_temporarily
from . import build as build_cache

FORMAT = 4  # bump when the pickled layout changes


class NotSerializable(RuntimeError):
    """A compiled graph holds something that cannot be pickled (a constant, a loader)."""


@dataclass
class CompiledGraph:
    backend: str
    kind: str
    generated: GeneratedGraph
    artifacts: tuple = ()  # ArtifactRef of every build-cache entry the graph loads
    blobs: dict = field(default_factory=dict)  # key -> artifact bytes, when they travel
    fallbacks: tuple = ()  # fallback.Fallback the conversion took, replayed on a hit
    arity: tuple = ()  # (inputs, outputs) of the ATen graph it was compiled from
    # the shape guards the stages added (an expression over the graph's inputs): a hit adds
    # them again, so that dynamo guards a warm process's frame as it guarded the cold one's
    guards: str | None = None

    def dumps(self, with_artifacts=False) -> bytes:
        """Pickled; vendor ops are stored by name (their backend resolves them on load)."""
        missing = set(self.generated.vendor_ops) - set(get_backend(self.backend).vendor_ops)
        if missing:  # it could not load back
            raise NotSerializable(
                f"{self.generated.name}: vendor ops {sorted(missing)} are "
                f"not in backend {self.backend!r}'s Backend.vendor_ops table"
            )
        blobs = {ref.key: ref.read() for ref in self.artifacts} if with_artifacts else {}
        names = dict.fromkeys(sorted(self.generated.vendor_ops))
        generated = dataclasses.replace(self.generated, vendor_ops=names)
        state = (
            FORMAT,
            self.backend,
            self.kind,
            generated,
            tuple(self.artifacts),
            blobs,
            tuple(self.fallbacks),
            self.arity,
            self.guards,
        )
        try:
            with unset_fake_temporarily():  # constants are real tensors: keep them real
                return pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as error:  # pickle raises many kinds
            raise NotSerializable(
                f"{self.generated.name}: {_unpicklable(state)} cannot be pickled ({error})"
            ) from error

    @classmethod
    def loads(cls, data: bytes) -> "CompiledGraph":
        with unset_fake_temporarily():  # or tensor constants would load as fake tensors
            version, *state = pickle.loads(data)
        if version != FORMAT:
            raise ValueError(f"compiled graph format {version}, this dicp reads {FORMAT}")
        backend, kind, generated, artifacts, blobs, fallbacks, arity, guards = state
        names = generated.vendor_ops
        generated = dataclasses.replace(generated, vendor_ops=_vendor_ops(backend, names))
        return cls(backend, kind, generated, artifacts, blobs, fallbacks, arity, guards)

    def callable(self, ctx):
        """`call(args)` of the graph through its backend's compile job, loading the carried
        libraries (if any) instead of building."""
        for ref in self.artifacts:
            if ref.key in self.blobs:
                build_cache.install(ref, self.blobs[ref.key])
        refs = [ref for ref in self.artifacts if ref.key in self.blobs]
        with build_cache.prebuilt(refs):
            return get_backend(self.backend).compile_job(self.generated, ctx)


def arity(gm) -> tuple:
    """(inputs, outputs) of an ATen graph: what AOTAutograd passes its compiled graph and
    expects back."""
    return (len(gm.graph.find_nodes(op="placeholder")), len(gm.graph.output_node().args[0]))


class MisfitGraph(ValueError):
    """A stored compiled graph whose inputs or outputs differ from its caller's graph."""


def fitting(compiled: "CompiledGraph", expected: tuple) -> "CompiledGraph":
    """`compiled`, if it takes and returns as many values as `expected` says, else raise."""
    if compiled.arity != expected:
        raise MisfitGraph(
            f"it was compiled from a graph of {compiled.arity[0]} inputs and "
            f"{compiled.arity[1]} outputs; this graph has {expected[0]} and "
            f"{expected[1]}"
        )
    return compiled


def recorded(stages, run):
    """`run()` (a GraphTransformer's `build` or `compile`), and the CompiledGraph describing the
    callable it returns: the sources and the build-cache entries the compile job loaded. The
    CompiledGraph is None for a codegen that does not hand over a GeneratedGraph (such a
    backend is neither cached nor precompiled)."""
    with build_cache.recording() as refs:
        fn = run()
    generated = stages.sources
    if not isinstance(generated, GeneratedGraph):
        return fn, None
    return fn, CompiledGraph(
        stages.backend.name, stages.ctx.kind, generated, tuple(dict.fromkeys(refs))
    )


def _vendor_ops(backend_name, names):
    table = get_backend(backend_name).vendor_ops
    missing = [name for name in names if name not in table]
    if missing:
        raise KeyError(
            f"backend {backend_name!r} has no vendor ops {missing} in its "
            f"Backend.vendor_ops table; a compiled graph naming them cannot load"
        )
    return {name: table[name] for name in names}


def _unpicklable(state) -> str:
    """The first part of `state` pickle rejects, named for the error message."""
    generated = state[3]
    for name, value in generated.constants.items():
        try:
            pickle.dump(value, io.BytesIO())
        except Exception:
            return f"constant {name} ({type(value).__name__})"
    for ref in state[4]:
        try:
            pickle.dump(ref.load, io.BytesIO())
        except Exception:
            return f"the toolchain loader {ref.load!r}"
    return "its state"
