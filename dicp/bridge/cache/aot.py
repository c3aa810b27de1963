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
the dicp, torch and Python versions and dicp's sources). Entries are `<cache>/aot/<key>.pkl`
with a `.sha256` digest; one that fails it or does not load is compiled again. The kernels
stay in the build cache (entries refer to them).

Dynamic shapes. A symbolic size is in the key as its expression over the graph's symbols, and
the key adds what the shape environment knows of them before the compile (ranges, the values
traced with, replacements; graph_cache.shape_env_fingerprint, as the graph cache keys on).
AOTAutograd and dicp's stages add guards to the shape environment (a decomposition branching
on a size, a loop plan comparing one): dynamo turns them into the frame's guards, so a hit
must add them too, or the warm process would reuse the graph for sizes where the cold one
recompiled. An entry records its guards as an expression over the graph's SymInt inputs
(ShapeEnv.produce_guards_expression, as torch's own AOTAutogradCache does); a hit checks it
on the values traced with, then evaluates it on the SymInts, which adds each guard to the
shape environment as the cold compile did. A graph is not stored when the compile made
symbols of its own (sizes known only at run time) or a guard over a symbol that is no input.

Float inputs. In a dynamic graph dynamo passes a Python float as a 0-d tensor input and reads
it with `.item()`; AOTAutograd's tensorify pass computes with the tensor where it can, and
otherwise asks dynamo to trace the frame again with the float specialized
(TensorifyScalarRestartAnalysis). Such a restart is stored: the entry names the floats (their
symbols) to specialize, and a hit asks dynamo for the restart without AOTAutograd's trace (0.4 s
of a warm TransformerBlock's 1.3 s). The pass names every float of the shape environment,
some no input of the graph, so the retrace may make the same graph: there the floats are
specialized already, the entry does not apply and the graph compiles, as in the cold process,
where the pass restarts only for floats it has not specialized yet (without that, 100
restarts: dynamo gave up and ran the frame eagerly).

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

import contextlib
import hashlib
import pickle

import torch
import torch.fx as fx

from dicp import config

from . import graph as graph_cache
from .entry_store import EntryStore
from .precompile import (
    autograd_config_text,
    bundling,
    load_result,
    result_input_flags,
    serialize_result,
)
from ..pipeline.symbolic import example_values, free_symbols, input_symbol, shape_env_of
from ..pipeline.torch_compat import (
    evaluate_guards,
    guards_over_inputs,
    restart_specializing,
    shape_env_state,
    specialized_floats,
    tensorify_restart_type,
)
from ..pipeline.utils import log

_STORE = EntryStore("aot", "AOT cache")


def aot_cache_stats() -> dict:
    """This process's counters: hits, misses, stores, rejected (corrupt) entries."""
    return dict(_STORE.stats)


def enabled() -> bool:
    """On with the graph cache, except under the tools that wrap each compiled graph, inside
    torch's precompile (aot_compile), which bundles results itself, and where torch's caches
    are turned off (`torch.compiler.config.force_disable_caches`: a miss goes through them)."""
    return (
        config.aot_cache
        and graph_cache.enabled()
        and config.autocompare == "off"
        and not config.dump_op_args
        and not bundling()
        and not torch.compiler.config.force_disable_caches
    )


def key(gm: fx.GraphModule, example_inputs, backend) -> str | None:
    """The key of dynamo graph `gm` compiled for `example_inputs`, or None where this cache
    does not apply (a symbolic size that is not one of the graph's SymInt inputs, an input it
    cannot describe, an unhashable constant)."""
    lifted = lifted_inputs(gm)
    try:
        inputs = _inputs_text([*lifted.values(), *example_inputs])
        parts = [
            "aot",
            backend.name,
            graph_cache.backend_fingerprint(backend),
            inputs,
            "lifted:" + ",".join(lifted),
            global_state_text(),
            graph_cache.shape_env_fingerprint(shape_env_of(example_inputs)),
        ]
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
    return {
        **dict(gm.named_parameters(remove_duplicate=False)),
        **dict(gm.named_buffers(remove_duplicate=False)),
    }


def lookup(entry_key: str, gm: fx.GraphModule, example_inputs):
    """The compiled function stored under `entry_key` for dynamo graph `gm`, or None (missing,
    corrupt, not loadable, or made for a caller with other inputs than `gm`'s). A hit adds the
    entry's shape guards to the graph's shape environment; a stored restart is raised."""
    lifted = list(lifted_inputs(gm).values())
    expected = _input_flags([*lifted, *example_inputs])
    loaded = _STORE.read(entry_key, lambda entry: _load_fitting(entry, expected, example_inputs))
    if isinstance(loaded, _Restart):
        restart_specializing(loaded.floats)
    if loaded is None or not lifted:
        return loaded

    def with_lifted_inputs(*runtime_args):
        return loaded(*lifted, *runtime_args)

    return with_lifted_inputs


@contextlib.contextmanager
def restarts_stored(entry_key: str):
    """Store the restart AOTAutograd asks of dynamo while compiling, with the floats it names."""
    before = specialized_floats()
    try:
        yield
    except tensorify_restart_type():
        floats = sorted(specialized_floats() - before)
        if floats:
            _STORE.write(entry_key, pickle.dumps((_ENTRY_FORMAT, _RESTART, floats)))
        raise


def shape_env_mark(example_inputs):
    """What `store` checks a compile of a graph with `example_inputs` against: its shape
    environment's guards, symbols and runtime asserts before the compile (None if static)."""
    env = shape_env_of(example_inputs)
    return None if env is None else shape_env_state(env)


def store(entry_key: str, compiled, gm: fx.GraphModule, example_inputs, mark=None) -> None:
    """Store `compiled` (what `compile_fx` returns, compiled under
    `precompile.serializable_results()`) with the inputs it takes, read from the result itself
    so that a load can check them against its caller's, and with the shape guards the compile
    added since `mark` (`shape_env_mark`, taken before it)."""
    try:
        guards = _guards_since(mark, example_inputs)
        data = serialize_result(compiled)
        takes = result_input_flags(compiled)
    except Exception as error:  # a result torch did not make serializable, or pickle refused
        log.info("dicp: AOT cache does not store a graph: %s", error)
        return
    caller = _input_flags([*lifted_inputs(gm).values(), *example_inputs])
    if takes != caller:  # every load would refuse it
        log.warning(
            "dicp: AOT cache does not store a graph whose result takes inputs %s "
            "where its caller passes %s",
            takes,
            caller,
        )
        return
    _STORE.write(entry_key, pickle.dumps((_ENTRY_FORMAT, takes, guards, data)))


_ENTRY_FORMAT = 2
_RESTART = "restart"  # an entry's second field when it stores a restart


class _Restart:
    def __init__(self, floats):
        self.floats = floats


class MisfitEntry(Exception):
    """A cache entry made for a caller other than the one loading it."""


def _load_fitting(entry: bytes, expected: list, example_inputs):
    version, *fields = pickle.loads(entry)
    if version != _ENTRY_FORMAT:
        raise MisfitEntry(f"entry format {version}, this dicp reads {_ENTRY_FORMAT}")
    if fields[0] == _RESTART:  # one dynamo asked for already is over: its retrace compiles
        return _Restart(fields[1]) if not set(fields[1]) <= specialized_floats() else None
    takes, guards, data = fields
    if takes != expected:
        raise MisfitEntry(
            f"its result takes {len(takes)} inputs (requires_grad {takes}); "
            f"the graph passes {len(expected)} (requires_grad {expected})"
        )
    env, symints = shape_env_of(example_inputs), _symint_inputs(example_inputs)
    if guards is not None:
        hints = [int(example_values(env)[input_symbol(s)]) for s in symints]
        if not evaluate_guards(env, guards, hints):
            raise MisfitEntry(f"its shape guards {guards} fail on sizes {hints}")
    loaded = load_result(data)
    if guards is not None:  # the guards the cold compile added, added again
        evaluate_guards(env, guards, symints)
    return loaded


def _symint_inputs(example_inputs) -> list:
    return [v for v in example_inputs if isinstance(v, torch.SymInt)]


def _guards_since(mark, example_inputs) -> str | None:
    """The shape guards of a compiled graph's result as an expression over its SymInt inputs
    (None for a static graph); raises _NotCacheable when guards over the inputs cannot
    describe what the compile did to the shape environment."""
    if mark is None:
        return None
    env, symints = shape_env_of(example_inputs), _symint_inputs(example_inputs)
    guards_before, symbols_before, asserts_before = mark
    _, symbols, asserts = shape_env_state(env)
    if symbols - symbols_before or asserts != asserts_before:
        raise _NotCacheable("the compile made symbols or runtime asserts of its own")
    try:
        return guards_over_inputs(env, guards_before, symints)
    except ValueError as error:
        raise _NotCacheable(str(error)) from error


def _input_flags(values) -> list:
    """Per input AOTAutograd takes, whether it requires grad (what a result records of it)."""
    return [isinstance(v, torch.Tensor) and v.requires_grad for v in values]


class _NotCacheable(Exception):
    pass


def _inputs_text(example_inputs) -> str:
    """The inputs as text; a symbolic size must be one of the SymInt inputs' symbols (or an
    expression over them), so that guards over those inputs bind it."""
    storages: dict = {}
    text = "|".join(_input_text(value, storages) for value in example_inputs)
    symints = _symint_inputs(example_inputs)
    layouts = [
        n
        for v in example_inputs
        if isinstance(v, torch.Tensor)
        for n in (*v.shape, *v.stride(), v.storage_offset())
    ]
    if not free_symbols(layouts) <= {input_symbol(s) for s in symints}:
        raise _NotCacheable("a symbolic size not among the graph's inputs")
    return text


def _input_text(value, storages: dict) -> str:
    if isinstance(value, torch.SymInt):
        symbol = input_symbol(value)
        if symbol is None:
            raise _NotCacheable(f"a SymInt input {value} that is no symbol of the shape env")
        return f"SymInt:{symbol}"
    if isinstance(value, (torch.SymFloat, torch.SymBool)):
        raise _NotCacheable(f"a {type(value).__name__} input")
    if not isinstance(value, torch.Tensor):
        if value is None or isinstance(value, (bool, int, float)):
            return f"{type(value).__name__}:{value!r}"
        raise _NotCacheable(f"an input of type {type(value).__name__}")
    if type(value).__name__ not in ("FakeTensor", "Tensor", "Parameter"):
        raise _NotCacheable(f"a tensor subclass {type(value).__name__}")
    storage = value.untyped_storage()._cdata  # inputs sharing a storage alias: in the key
    shared = storages.setdefault(storage, len(storages))
    return (
        f"T({value.dtype},{value.device},{_sizes(value.shape)},{_sizes(value.stride())},"
        f"{value.storage_offset()},{value.layout},{value.requires_grad},{value.is_leaf},"
        f"{value._is_view()},{value.is_conj()},{value.is_neg()},storage {shared})"
    )


def _sizes(values) -> str:
    """Sizes or strides as text, a symbolic one as its expression (str of a SymInt)."""
    return "(" + ",".join(map(str, values)) + ")"


def global_state_text() -> str:
    """What AOTAutograd's trace reads beside the graph: grad and autocast modes, and the
    default dtype and device, which a factory call without them (torch.ones(5)) takes when
    traced; a float64 default once got a float32 graph's result. Also salts torch's own
    AOTAutogradCache key (compile_fx), whose key lacks the default dtype on torch 2.11."""
    autocast = [
        (device, torch.get_autocast_dtype(device))
        for device in ("cpu", "cuda")
        if torch.is_autocast_enabled(device)
    ]
    return repr(
        (
            torch.is_grad_enabled(),
            torch.is_inference_mode_enabled(),
            autocast,
            torch.are_deterministic_algorithms_enabled(),
            torch.get_default_dtype(),
            str(torch.get_default_device()),
            autograd_config_text(),
        )
    )
