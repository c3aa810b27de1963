"""The backend spec and registry: the only place shared code learns about vendors."""
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Callable, Mapping

ENTRY_POINT_GROUP = "torch_dynamo_backends"


@dataclass(frozen=True)
class Backend:
    """What a vendor hands to dicp. Shared code reads these fields and never a backend name.

    opset_transform(gm, ctx) -> gm      ATen graph -> vendor-op graph
    codegen(gm, ctx) -> sources         vendor-op graph -> generated sources
    compile_job(sources, ctx) -> fn     sources -> callable taking the list of graph inputs
    expected_fallbacks                  op pattern ("aten.view_as_real.*", fnmatch) -> why the
                                        backend runs it as eager fallback; strict mode and the
                                        op test harness allow these fallbacks and no other
    vendor_ops                          op name -> Operator: the vocabulary, by which the graph
                                        cache and precompiled functions name the ops a
                                        wrapper calls
    dtype_fallbacks                     dtype -> why ops on it run as eager fallback (a dtype
                                        outside supported_dtypes the backend declares: allowed
                                        like expected_fallbacks)
    """
    name: str
    opset_transform: Callable
    codegen: Callable
    compile_job: Callable
    decompositions: Mapping = field(default_factory=dict)
    conversions: Mapping = field(default_factory=dict)
    conversion_table: str = ""  # where a converter for a missing op would go
    device: str = "cpu"
    supported_dtypes: frozenset = frozenset()  # empty: every dtype
    expected_fallbacks: Mapping[str, str] = field(default_factory=dict)
    dtype_fallbacks: Mapping[Any, str] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)
    vendor_ops: Mapping[str, Any] = field(default_factory=dict)


_REGISTRY: dict[str, Backend] = {}


def register_backend(backend: Backend) -> Backend:
    from .dynamo_context import install
    install()  # time dynamo and AOTAutograd for the compile profile, from the first compile on
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
        raise KeyError(f"no dicp backend named {name!r} (registered: {known}); "
                       f"register one with dicp.vendor.register_backend") from None


def registered_backends() -> list[str]:
    return sorted(_REGISTRY)


def _load_entry_point(name: str) -> None:
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if entry.name == name:
            entry.load()  # importing the backend module registers it
            return
