"""The backend spec and registry: what a vendor hands to dicp, and where shared code finds it.

Shared code reads a `Backend`'s fields, never its name: the entry hands the object itself down
the pipeline. A name is looked up only where a saved graph names its backend (the graph cache,
torch's precompile, a repro) or a user does (tools). The Protocols say what each callable a
vendor supplies is called with and returns; docs/vendor.md has the whole contract.

This module imports nothing else of dicp at run time: the bridge imports it, never the other
way round (the names under TYPE_CHECKING are for the signatures only).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch
    import torch.fx as fx

    from .conversion import ConversionContext
    from .operator import Operator
    from .stages import CompileContext

ENTRY_POINT_GROUP = "torch_dynamo_backends"


class OpsetTransform(Protocol):
    def __call__(self, gm: fx.GraphModule, ctx: CompileContext) -> fx.GraphModule:
        """The backend's pass pipeline, ATen graph -> vendor-op graph: `convert(gm, ctx)` (the
        conversion table) first, then the backend's rewrites (`rewrite_patterns`). A node left
        without `meta["val"]` gets it from shape inference (`Operator.infer_result`)."""
        ...


class Codegen(Protocol):
    def __call__(self, gm: fx.GraphModule, ctx: CompileContext) -> Any:
        """Vendor-op graph -> sources. Return a `GeneratedGraph` (what a `GraphCodegenBase`
        subclass's `run()` returns) so that the graph cache and torch's precompile can keep the
        graph; any other object works, but such a graph is neither cached nor saved."""
        ...


class CompileJob(Protocol):
    def __call__(self, sources: Any, ctx: CompileContext) -> Callable[[list], Any]:
        """Sources -> `call(args)`, which takes the list of graph inputs and returns the
        outputs. Build with `load_artifact(s)` (the build cache). Any callable works: dicp wraps
        it in AOTAutograd's boxed convention. On a graph-cache hit or a precompiled load this is
        the only stage that runs, on the stored sources."""
        ...


class Converter(Protocol):
    def __call__(self, ctx: ConversionContext, *args: Any, **kwargs: Any) -> Any:
        """A conversion-table row: the ATen node's arguments (tensors already converted to vendor
        nodes) -> the vendor node(s) holding its value, made with `ctx.op(...)`. Raise
        `Unsupported(reason)` to leave the node to eager fallback."""
        ...


class DecompositionFactory(Protocol):
    def __call__(self) -> Mapping[Any, Callable[..., Any]]:
        """The decomposition table, built at the first compile (`build_decompositions(...)`)."""
        ...


@dataclass(frozen=True)
class Backend:
    """What a vendor hands to dicp; register it with `dicp.api.register_backend` when its
    package is imported. Only the first four fields are required."""

    name: str  # the torch.compile backend name (its entry point's name)
    opset_transform: OpsetTransform  # ATen graph -> vendor graph
    codegen: Codegen  # vendor graph -> sources
    compile_job: CompileJob  # sources -> call(args)
    # ATen op -> decomposition, for AOTAutograd (a table, or a function returning one)
    decompositions: Mapping[Any, Callable[..., Any]] | DecompositionFactory = field(
        default_factory=dict
    )
    conversions: Mapping[Any, Converter] = field(default_factory=dict)  # ATen op -> converter
    conversion_table: str = ""  # where a missing converter goes, named in errors
    device: str = "cpu"  # the device the test harness puts inputs on
    supported_dtypes: frozenset[torch.dtype] = frozenset()  # empty: every dtype
    # op pattern ("aten.view_as_real.*", fnmatch) -> why the backend leaves it to eager: strict
    # mode and the op test harness allow these fallbacks and no other
    expected_fallbacks: Mapping[str, str] = field(default_factory=dict)
    # dtype outside supported_dtypes -> why ops on it fall back (allowed like the above)
    dtype_fallbacks: Mapping[torch.dtype, str] = field(default_factory=dict)
    # AOTAutograd leaves the writes into graph inputs (an optimizer's update of parameters and
    # state, batch norm's running statistics) in the graph as aten.copy_, for the backend to
    # write in place, as Inductor does; else they are extra outputs that AOTAutograd's runtime
    # copies into the inputs after the graph
    keeps_input_mutations: bool = False
    # A tensor the forward saves for the backward is returned in the layout the backend's code
    # made it in (GraphCodegenBase.kept_layout: a channels-last activation traced NCHW) and that
    # layout is reported to AOTAutograd, which compiles the backward for it, as Inductor's
    # layout optimization does; else saved tensors are copied into their traced layouts
    chooses_saved_layouts: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)  # whatever else the vendor carries
    # What the vendor's conversion and codegen read from the process beside the graph and the
    # knobs, as text (the host CPU backend's: whether torch runs more than one thread, which
    # decides ATen's convolution algorithm and so the layout it converts a convolution to).
    # Part of the graph and AOT cache keys: a warm start in another such state compiles again
    process_state: Callable[[], str] | None = None
    # op name -> Operator, the vocabulary: saved graphs name their ops and find them here
    vendor_ops: Mapping[str, Operator] = field(default_factory=dict)

    def __post_init__(self):
        if not self.conversion_table:
            object.__setattr__(self, "conversion_table", f"the conversion table of {self.name}")

    def decomposition_table(self) -> Mapping[Any, Callable[..., Any]]:
        """`decompositions` as a table (a factory is called)."""
        table = self.decompositions
        return table() if callable(table) else table


_REGISTRY: dict[str, Backend] = {}


def register_backend(backend: Backend) -> Backend:
    """Add `backend` under its name; registering the same object again is a no-op, another one
    under a taken name an error."""
    existing = _REGISTRY.get(backend.name)
    if existing is not None and existing is not backend:
        raise ValueError(f"a dicp backend named {backend.name!r} is already registered")
    _REGISTRY[backend.name] = backend
    return backend


def get_backend(name: str) -> Backend:
    """The registered backend `name`, importing its entry point first if needed."""
    if name not in _REGISTRY:
        _load_entry_point(name)
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        raise KeyError(
            f"no dicp backend named {name!r} (registered: {known}); "
            f"register one with dicp.api.register_backend"
        ) from None


def registered_backends() -> list[str]:
    return sorted(_REGISTRY)


def _load_entry_point(name: str) -> None:
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if entry.name == name:
            entry.load()  # importing the backend module registers it
            return
