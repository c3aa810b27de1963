"""The AOT cache: AOTAutograd's whole result for a dynamo graph, so that a warm process skips
AOTAutograd's trace and partition, not only dicp's conversion and codegen (the graph cache).

Measured on a LLaMA-LoRA training step, warm: 2.2 s with the graph cache alone, of which the
AOTAutograd trace is about 0.9 s and dicp about 0.25 s; 1.0-1.1 s with this cache.

An entry is keyed by

    sha256(the dynamo graph's code (and its submodules') + its constant tensors + each example
           input's type, dtype, device, shape, strides, offset, requires_grad, leaf and view
           flags and which earlier input shares its storage + grad, inference and autocast
           modes, deterministic-algorithm state, default dtype and device + functorch's
           config + backend fingerprint)

(graph_cache.backend_fingerprint: the backend's tables, every knob but the reporting ones,
the dicp, torch and Python versions and dicp's sources). Static graphs only: AOTAutograd adds
guards to a dynamic graph's shape environment that a hit would not add; those keep the graph
cache. Entries are `<cache>/aot/<key>.pkl` with a `.sha256` digest; one that fails it or does
not load is compiled again. The kernels stay in the build cache (entries refer to them).

torch has no public way to have AOTAutograd's result as data; the private names this takes
are in precompile.py (`serializable_results`, `serialize_result`, `load_result`):
- `BundledAOTAutogradSerializableCallable` serializes a result and loads it, as precompile does.
- AOTAutograd makes a result serializable only when it consults its own cache
  (`force_autograd_cache`) with bundling on (`bundled_autograd_cache`). So a miss here also
  computes torch's cache key (salted with dicp's fingerprint, precompile.keyed_autograd_cache)
  and stores the entry in torch's cache directory too; that key imports Inductor's lowerings,
  about 0.5-0.8 s once per process that misses. A hit here computes no torch key: that is why
  this cache exists rather than torch's alone (whose key made warm starts slower, fcea1ea).
  (A random key, `bypass_autograd_cache_key`, is not safe: dynamo restores Python's random
  state around each compile, so two graphs drew the same key and the second got the first's
  result from torch's cache.)
- `force_non_lazy_backward_lowering`: a training graph's backward compiles with its forward, so
  the result is whole when stored. A graph that needs a backward but never runs one (inference
  without torch.no_grad()) compiles it anyway, once; DICP_AOT_CACHE=0 turns this cache off.
"""
import hashlib
import pickle

import torch
import torch.fx as fx

from dicp import config

from . import graph as graph_cache
from .entry_store import EntryStore
from .precompile import (autograd_config_text, bundling, load_result, result_input_flags,
                         serialize_result)
from ..pipeline.utils import log

_STORE = EntryStore("aot", "AOT cache")


def aot_cache_stats() -> dict:
    """This process's counters: hits, misses, stores, rejected (corrupt) entries."""
    return dict(_STORE.stats)


def enabled() -> bool:
    """On with the graph cache, except under the tools that wrap each compiled graph, inside
    torch's precompile (aot_compile), which bundles results itself, and where torch's caches
    are turned off (`torch.compiler.config.force_disable_caches`: a miss goes through them)."""
    return (config.aot_cache and graph_cache.enabled() and config.autocompare == "off"
            and not config.dump_op_args and not bundling()
            and not torch.compiler.config.force_disable_caches)


def key(gm: fx.GraphModule, example_inputs, backend) -> str | None:
    """The key of dynamo graph `gm` compiled for `example_inputs`, or None where this cache
    does not apply (symbolic inputs, an input it cannot describe, an unhashable constant)."""
    lifted = lifted_inputs(gm)
    try:
        inputs = _inputs_text([*lifted.values(), *example_inputs])
        parts = ["aot", backend.name, graph_cache.backend_fingerprint(backend), inputs,
                 "lifted:" + ",".join(lifted), global_state_text()]
        skip = {id(value) for value in lifted.values()}
        for name, module in gm.named_modules():
            if isinstance(module, fx.GraphModule):
                parts += [name, module.code, *graph_cache.constant_fingerprints(module, skip)]
            elif module is not gm:  # its parameters and state are not in the key
                raise _NotCacheable(f"submodule {name} ({type(module).__name__})")
    except (_NotCacheable, graph_cache.Unhashable) as error:
        log.info("dicp: AOT cache skips a graph: %s", error)
        return None
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def lifted_inputs(gm: fx.GraphModule) -> dict:
    """The parameters and buffers of `gm` (dynamo registers an optimizer's parameters and
    state this way), by name, in the order AOTAutograd lifts them to inputs ahead of dynamo's
    (aot_module_simplified). Its result takes them first; a result loaded from this cache is
    handed them by `lookup`, since torch's loader does not (a warm optimizer step received 4
    arguments where its graph took 8)."""
    return {**dict(gm.named_parameters(remove_duplicate=False)),
            **dict(gm.named_buffers(remove_duplicate=False))}


def lookup(entry_key: str, gm: fx.GraphModule, example_inputs):
    """The compiled function stored under `entry_key` for dynamo graph `gm`, or None (missing,
    corrupt, not loadable, or made for a caller with other inputs than `gm`'s)."""
    lifted = list(lifted_inputs(gm).values())
    expected = _input_flags([*lifted, *example_inputs])
    loaded = _STORE.read(entry_key, lambda entry: _load_fitting(entry, expected))
    if loaded is None or not lifted:
        return loaded

    def with_lifted_inputs(*runtime_args):
        return loaded(*lifted, *runtime_args)
    return with_lifted_inputs


def store(entry_key: str, compiled, gm: fx.GraphModule, example_inputs) -> None:
    """Store `compiled` (what `compile_fx` returns, compiled under
    `precompile.serializable_results()`) with the inputs it takes, read from the result itself
    so that a load can check them against its caller's."""
    try:
        data = serialize_result(compiled)
        takes = result_input_flags(compiled)
    except Exception as error:  # a result torch did not make serializable, or pickle refused
        log.info("dicp: AOT cache does not store a graph: %s", error)
        return
    caller = _input_flags([*lifted_inputs(gm).values(), *example_inputs])
    if takes != caller:  # every load would refuse it
        log.warning("dicp: AOT cache does not store a graph whose result takes inputs %s "
                    "where its caller passes %s", takes, caller)
        return
    _STORE.write(entry_key, pickle.dumps((_ENTRY_FORMAT, takes, data)))


_ENTRY_FORMAT = 1


class MisfitEntry(Exception):
    """A cache entry made for a caller other than the one loading it."""


def _load_fitting(entry: bytes, expected: list):
    version, takes, data = pickle.loads(entry)
    if version != _ENTRY_FORMAT:
        raise MisfitEntry(f"entry format {version}, this dicp reads {_ENTRY_FORMAT}")
    if takes != expected:
        raise MisfitEntry(f"its result takes {len(takes)} inputs (requires_grad {takes}); "
                          f"the graph passes {len(expected)} (requires_grad {expected})")
    return load_result(data)


def _input_flags(values) -> list:
    """Per input AOTAutograd takes, whether it requires grad (what a result records of it)."""
    return [isinstance(v, torch.Tensor) and v.requires_grad for v in values]


class _NotCacheable(Exception):
    pass


def _inputs_text(example_inputs) -> str:
    storages: dict = {}
    return "|".join(_input_text(value, storages) for value in example_inputs)


def _input_text(value, storages: dict) -> str:
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        raise _NotCacheable("a symbolic input")
    if not isinstance(value, torch.Tensor):
        if value is None or isinstance(value, (bool, int, float)):
            return f"{type(value).__name__}:{value!r}"
        raise _NotCacheable(f"an input of type {type(value).__name__}")
    if type(value).__name__ not in ("FakeTensor", "Tensor", "Parameter"):
        raise _NotCacheable(f"a tensor subclass {type(value).__name__}")
    layout = (*value.shape, *value.stride(), value.storage_offset())
    if not all(isinstance(n, int) for n in layout):
        raise _NotCacheable("a symbolic input")
    storage = value.untyped_storage()._cdata  # inputs sharing a storage alias: in the key
    shared = storages.setdefault(storage, len(storages))
    return (f"T({value.dtype},{value.device},{tuple(value.shape)},{value.stride()},"
            f"{value.storage_offset()},{value.layout},{value.requires_grad},{value.is_leaf},"
            f"{value._is_view()},{value.is_conj()},{value.is_neg()},storage {shared})")


def global_state_text() -> str:
    """What AOTAutograd's trace reads beside the graph: grad and autocast modes, and the
    default dtype and device, which a factory call without them (torch.ones(5)) takes when
    traced; a float64 default once got a float32 graph's result. Also salts torch's own
    AOTAutogradCache key (compile_fx), whose key lacks the default dtype on torch 2.11."""
    autocast = [(device, torch.get_autocast_dtype(device))
                for device in ("cpu", "cuda") if torch.is_autocast_enabled(device)]
    return repr((torch.is_grad_enabled(), torch.is_inference_mode_enabled(), autocast,
                 torch.are_deterministic_algorithms_enabled(), torch.get_default_dtype(),
                 str(torch.get_default_device()), autograd_config_text()))
