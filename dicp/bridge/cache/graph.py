"""The graph cache: conversion and codegen results, keyed by the ATen graph.

A warm process skips conversion, shape inference and rendering: it loads the generated
wrapper and kernel sources of an identical graph, and the backend's compile job loads the
kernels from the build cache (keyed there by source and toolchain, so a changed compiler or
chip still rebuilds). The key is

    sha256(graph kind + the ATen graph's code (and its submodules') + every node's fake value
           (dtype, shape, strides, symbolic sizes) + the shape environment's facts about its
           symbols + its constant tensors' bytes + backend fingerprint)

where the backend fingerprint (`backend_fingerprint`) is the backend's fields and tables (each
converter's code), the process state its decisions read (`Backend.process_state`), every
DICP_* knob's effective value, the source files of dicp and of the
backend's package, and the dicp, torch and Python versions. An entry is `<key>.pkl` plus
`<key>.sha256` under `<cache>/graphs/`; one that fails its digest or does not load is rebuilt,
never trusted. Graphs holding a constant pickle cannot store are not cached.
"""

import ctypes
import functools
import hashlib
import marshal
import pickle
import platform
import re
import sys
from functools import lru_cache
from pathlib import Path

import torch
import torch.fx as fx

import dicp
from dicp import config

from .artifact import CompiledGraph, MisfitGraph, NotSerializable, arity, fitting
from .entry_store import EntryStore
from ..pipeline.symbolic import example_values
from ..pipeline.torch_compat import (
    TORCH_VERSION,
    FakeTensor,
    StorageWeakRef,
    guards_since,
    replay_guards,
)
from ..pipeline.utils import log

_FILE_KINDS = (".py", ".j2", ".h", ".txt", ".ini")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_STORE = EntryStore("graphs", "graph cache")


def graph_cache_stats() -> dict:
    """This process's counters: hits, misses, stores, rejected (corrupt) entries."""
    return dict(_STORE.stats)


def enabled() -> bool:
    """Off under the debugging knobs that need the vendor graph (dumps, recorded ops)."""
    return config.graph_cache and not config.debug and config.record_ops is None


def graph_key(gm: fx.GraphModule, kind: str, backend, fake_mode) -> str | None:
    """The cache key of ATen graph `gm`, or None when it holds something unhashable."""
    parts = [kind, backend_fingerprint(backend)]
    try:
        for name, module in gm.named_modules():
            if isinstance(module, fx.GraphModule):
                storages: dict = {}
                parts += [
                    name,
                    module.code,
                    *(_node_fingerprint(n, storages) for n in module.graph.nodes),
                ]
                parts += constant_fingerprints(module)
    except Unhashable as error:
        log.info("dicp: graph cache skips a graph holding %s", error)
        return None
    parts.append(_shape_env_fingerprint(fake_mode))
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def lookup(key: str, gm: fx.GraphModule, fake_mode):
    """The CompiledGraph stored under `key` for ATen graph `gm`, or None (missing, corrupt, not
    loadable, or compiled from a graph of other inputs or outputs). A hit adds to the shape
    environment the guards its compile added."""
    expected = arity(gm)
    return _STORE.read(
        key, lambda data: _guarded(fitting(CompiledGraph.loads(data), expected), gm, fake_mode)
    )


def recorded_guards(fake_mode, mark: int, gm: fx.GraphModule) -> str | None:
    """The shape guards added since `mark` (while `gm`'s stages ran), over its inputs."""
    return guards_since(fake_mode, mark, guard_inputs(gm))


def guard_inputs(gm: fx.GraphModule) -> list:
    """The graph's symbolic-capable inputs (fake tensors and SymInts), in order."""
    values = (n.meta.get("val") for n in gm.graph.find_nodes(op="placeholder"))
    return [v for v in values if isinstance(v, (FakeTensor, torch.SymInt))]


def _guarded(compiled: CompiledGraph, gm, fake_mode) -> CompiledGraph:
    if compiled.guards and not replay_guards(fake_mode, compiled.guards, guard_inputs(gm)):
        raise MisfitGraph(f"its shape guards ({compiled.guards}) do not hold here")
    return compiled


def store(key: str, compiled: CompiledGraph) -> None:
    try:
        data = compiled.dumps()
    except NotSerializable as error:
        log.info("dicp: graph cache does not store %s", error)
        return
    _STORE.write(key, data)


# ---- the backend's part of the key ----


def backend_fingerprint(backend) -> str:
    """What besides the graph decides a backend's output: its fields and tables, the knobs,
    the code of dicp and the backend, the versions."""
    parts = [
        backend.name,
        backend.device,
        backend.conversion_table,
        repr(sorted(map(str, backend.supported_dtypes))),
        repr(sorted(backend.expected_fallbacks.items())),
        repr(sorted((str(d), why) for d, why in backend.dtype_fallbacks.items())),
        repr(sorted(backend.options)),
        repr(backend.keeps_input_mutations),  # AOTAutograd's graphs differ with it
        repr(backend.chooses_saved_layouts),  # the forward's saved layouts, the backward's inputs
        *(
            _function_fingerprint(getattr(backend, name))
            for name in ("opset_transform", "codegen", "compile_job")
        ),
        _table_fingerprint(backend.conversions),
        _decomposition_fingerprint(backend),
        repr(sorted(backend.vendor_ops)),
        backend.process_state() if backend.process_state else "",
        _knob_fingerprint(),
        _source_fingerprint(_package_dir(dicp.__name__)),
        _source_fingerprint(_package_dir(backend.codegen.__module__)),
        dicp.__version__,
        TORCH_VERSION,
        sys.version,
        platform.machine(),
    ]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


# Knobs that change no generated code: where the cache lives, what is reported about compiles,
# and what the test harness runs. A warm start profiled with DICP_PROFILE=1 must be the warm
# start it profiles. Every other knob is in the key, whether or not it changes the output.
OUTPUT_NEUTRAL_KNOBS = (
    "cache_dir",
    "profile",
    "recompile_warn_limit",
    "record_results",
    "test_backend",
    "test_dynamic",
)


def _knob_fingerprint() -> str:
    return repr(
        [(k.env, value) for k, value, _ in config.effective() if k.name not in OUTPUT_NEUTRAL_KNOBS]
    )


# id(table) -> (table, its pairs, fingerprint); the table is kept, so ids never repeat
_TABLES: dict = {}


def _table_fingerprint(table) -> str:
    """Each entry's op and function. Kept for the table while its pairs stay the same ones (a
    table changed in place is fingerprinted again): joining 500 entries took 1.5 ms of every
    key's 1.9 ms, and a graph takes three keys."""
    pairs = tuple(table.items())
    known = _TABLES.get(id(table))
    if known is None or known[1] != pairs:  # compared by identity first: no op is hashed
        text = "\n".join(
            f"{op}:{_function_fingerprint(fn)}"
            for op, fn in sorted(pairs, key=lambda item: str(item[0]))
        )
        known = _TABLES[id(table)] = (table, pairs, text)
    return known[2]


def _decomposition_fingerprint(backend) -> str:
    """The decomposition table by what makes it: a factory by its code (the table it builds
    follows from that code, the sources of dicp and of the backend, the knobs and torch's
    version, all in the fingerprint), a table given as data by its entries. Building the
    table to read it cost each warm start 0.4-0.8 s that an AOT-cache hit does not need."""
    if callable(backend.decompositions):
        return _function_fingerprint(backend.decompositions)
    return _table_fingerprint(backend.decompositions)


_FUNCTIONS: dict = {}  # function -> fingerprint (the function is kept, so ids never repeat)


def _function_fingerprint(fn) -> str:
    """A converter's identity: its code (bytecode, constants, names), defaults and closure;
    for a functools.partial, its function and arguments."""
    if fn not in _FUNCTIONS:
        _FUNCTIONS[fn] = _fingerprint_now(fn)
    return _FUNCTIONS[fn]


def _fingerprint_now(fn) -> str:
    if isinstance(fn, functools.partial):
        return repr(
            (
                _function_fingerprint(fn.func),
                [_value_text_of(a) for a in fn.args],
                sorted((k, _value_text_of(v)) for k, v in fn.keywords.items()),
            )
        )
    code = getattr(fn, "__code__", None)
    if code is None:
        return _address_free(repr(fn))
    cells = [_cell_text(c) for c in (fn.__closure__ or ())]
    text = repr((fn.__module__, fn.__qualname__, _address_free(repr(fn.__defaults__)), cells))
    return hashlib.sha256(marshal.dumps(code) + text.encode()).hexdigest()


def _cell_text(cell) -> str:
    try:
        return _value_text_of(cell.cell_contents)
    except ValueError:  # an empty cell
        return "<empty>"


def _value_text_of(value) -> str:
    if isinstance(value, functools.partial) or hasattr(value, "__code__"):
        return _function_fingerprint(value)
    return _address_free(repr(value))


def _address_free(text: str) -> str:
    """repr without object addresses, which differ in every process (what the object is,
    its type and contents, is still there)."""
    return _ADDRESS.sub("", text)


def _package_dir(module_name: str) -> Path:
    package = sys.modules[module_name.split(".")[0]]
    return Path(package.__file__).parent  # type: ignore[arg-type]  # a package imported from files


@lru_cache(maxsize=None)
def _source_fingerprint(directory: Path) -> str:
    """The package's source files (code, templates, headers) as one digest."""
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.rglob("*") if p.suffix in _FILE_KINDS):
        digest.update(str(path.relative_to(directory)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


# ---- the graph's part of the key ----


class Unhashable(Exception):
    """A graph holds a constant the key cannot describe: it is not cached."""


def _node_fingerprint(node: fx.Node, storages: dict) -> str:
    """The node's fake value: its layout, and whether it is a view and of which storage among
    the graph's (codegen returns an output viewing an input as that view of it)."""
    return f"{node.name}:{_value_text(node.meta.get('val'), storages)}"


def _value_text(val, storages: dict) -> str:
    if isinstance(val, torch.Tensor):
        storage = storages.setdefault(StorageWeakRef(val.untyped_storage()), len(storages))
        return (
            f"T({val.dtype},{val.device},{tuple(val.shape)},{val.stride()},"
            f"{val.storage_offset()},{val.layout},view {val._is_view()},storage {storage})"
        )
    if isinstance(val, (list, tuple)):
        return "(" + ",".join(_value_text(v, storages) for v in val) + ")"
    return f"{type(val).__name__}:{val}"


def constant_fingerprints(gm: fx.GraphModule, skip=frozenset()) -> list:
    """A fingerprint of each constant `gm` reads (get_attr), submodules and the tensors whose
    ids are in `skip` (inputs, described elsewhere) excepted."""
    texts = []
    for node in gm.graph.find_nodes(op="get_attr"):
        value = getattr(gm, node.target)
        if isinstance(value, fx.GraphModule) or id(value) in skip:
            continue  # its code is part of the key already, or it is an input
        if isinstance(value, torch.Tensor):
            texts.append(_tensor_fingerprint(node.target, value))
            continue
        try:
            texts.append(hashlib.sha256(pickle.dumps(value)).hexdigest())
        except Exception:
            raise Unhashable(f"constant {node.target} ({type(value).__name__})") from None
    return texts


def _tensor_fingerprint(name, tensor) -> str:
    """Layout and storage bytes, read without a torch op (the compile runs under a fake
    mode, which would intercept one)."""
    if tensor.device.type != "cpu" or isinstance(tensor, FakeTensor):
        raise Unhashable(f"constant {name} on {tensor.device}")
    storage = tensor.untyped_storage()
    data = ctypes.string_at(storage.data_ptr(), storage.nbytes()) if storage.nbytes() else b""
    return (
        f"{tensor.dtype}{tuple(tensor.shape)}{tensor.stride()}{tensor.storage_offset()}"
        f"{hashlib.sha256(data).hexdigest()}"
    )


def _shape_env_fingerprint(fake_mode) -> str:
    return shape_env_fingerprint(getattr(fake_mode, "shape_env", None))


def shape_env_fingerprint(env) -> str:
    """Ranges, example values and replacements of the symbols (they decide what codegen can
    prove, e.g. that a size is at least 2)."""
    if env is None:
        return "no shape env"
    facts = [
        sorted((str(s), str(r)) for s, r in env.var_to_range.items()),
        sorted((str(s), str(v)) for s, v in example_values(env).items()),
        sorted((str(s), str(v)) for s, v in env.replacements.items()),
        sorted(map(str, getattr(env, "divisible", ()))),
    ]
    return repr(facts)
