"""The torch internals dicp relies on, in one place.

torch has no public API for these, and private names can move between releases. dicp supports
torch 2.11 to 2.15 (`dicp/supported_torch.py`); each name below has the same signature on 2.11.0,
2.13.0 and 2.15.0. When a release moves one, adapt it here by feature detection (try the new
location, then the old), never by comparing `torch.__version__`.
"""

import contextlib

import torch

# AOTAutograd wrapped as a dynamo backend (functionalize, decompose, partition fw/bw).
from torch._dynamo.backends.common import aot_autograd

# Inductor's forward/backward partitioner: saves what minimizes memory, recomputing cheap ops.
from functorch.compile import min_cut_rematerialization_partition

# The fake-tensor mode dynamo traced a graph with, so inference reuses its shape environment.
from torch._guards import detect_fake_mode

# The types of ATen operators: `torch.ops.aten.add` is a packet, `.Tensor` an overload.
from torch._ops import OpOverload, OpOverloadPacket
from torch._subclasses import FakeTensor, FakeTensorMode

# Leave the compile's fake mode for a moment: tensors unpickled inside it would come back fake,
# products timed inside it would time fake tensors' dispatch (gemm.py).
from torch._subclasses.fake_tensor import unset_fake_temporarily

# Decompositions of listed ops, from torch's registry (the core table itself is public).
from torch._decomp import get_decompositions

# Flattening of nested outputs (tuples, lists, dicts) for the op collector.
from torch.utils import _pytree as pytree

# A storage's identity, comparable on fake tensors (whose storages have no data pointer).
from torch.multiprocessing.reductions import StorageWeakRef

# The release, for cache keys.
TORCH_VERSION = torch.__version__

__all__ = [
    "TORCH_VERSION",
    "StorageWeakRef",
    "build_config",
    "FakeTensor",
    "FakeTensorMode",
    "OpOverload",
    "OpOverloadPacket",
    "aot_autograd",
    "core_aten_decompositions",
    "detect_fake_mode",
    "empty_strided_cpu",
    "get_decompositions",
    "min_cut_rematerialization_partition",
    "post_autograd_decompositions",
    "pytree",
    "report_output_strides",
    "saved_for_backward",
    "same_storage",
    "storage_key",
    "tangents_in_memory_format",
    "unset_fake_temporarily",
    "guard_mark",
    "guards_since",
    "replay_guards",
    "shape_env_state",
    "guards_over_inputs",
    "evaluate_guards",
    "specialized_floats",
    "restart_specializing",
    "tensorify_restart_type",
]


def build_config() -> str:
    """The build's libraries and flags (its MKL and oneDNN versions among them)."""
    return torch.__config__.show()


def core_aten_decompositions():
    """torch's core ATen decomposition table (public since 2.6 as torch.export's default)."""
    return torch.export.default_decompositions()


def post_autograd_decompositions() -> dict:
    """torch's core ATen decompositions without the entries for CompositeImplicitAutograd ops.

    The export table adds one for every such op of every namespace, each calling the op's own
    composite kernel, as the dispatcher does for any op of that kind with or without an entry
    (above autograd when tracing for a backward, in functionalization otherwise): those
    entries change no graph AOTAutograd makes (checked over the model suite, bench/ and the
    held-out workloads, static and dynamic), and listing them walks every operator torch
    has, 0.5-1 s per process. torch builds the rest with a private function, which is why it
    is reached here; a torch without it gets the export table."""
    try:
        from torch._decomp import _core_aten_decompositions_post_autograd
    except ImportError:
        return dict(core_aten_decompositions().items())
    return _core_aten_decompositions_post_autograd()


def tangents_in_memory_format():
    """A context in which AOTAutograd expects each tangent in a memory format (contiguous,
    channels-last) rather than in its output's strides, as it does under dynamic shapes.
    With strides, a tangent is copied into `empty_strided` of them at run time, which keeps
    one of the gradients that share an element where the layout overlaps itself (unfold's
    windows); torch 2.13 takes memory formats only for expanded dims."""
    config = torch._functorch.config
    if not hasattr(config, "guess_tangent_strides_as_outputs"):  # memory formats always
        return contextlib.nullcontext()
    return config.patch(guess_tangent_strides_as_outputs=False)


# ---- the forward's saved tensors in a layout of the backend's choosing (Inductor's layout
# optimization does the same through the same two attributes; no public equivalent) ----


def saved_for_backward() -> slice | None:
    """Which outputs of the forward graph being compiled AOTAutograd saves for the backward,
    when it also collects the forward's output strides for compiling that backward (it sets
    the tracing context's `fw_metadata` and `output_strides` before it calls the forward
    compiler). None otherwise: then the saved tensors must keep their traced layouts."""
    context = torch._guards.TracingContext.try_get()
    metadata = getattr(context, "fw_metadata", None)
    if metadata is None or getattr(context, "output_strides", None) is None:
        return None
    try:
        return metadata.tensors_saved_for_backwards_slice
    except (AttributeError, AssertionError):  # a release without it, or metadata incomplete
        return None


def report_output_strides(strides: list) -> bool:
    """Tell AOTAutograd the strides of the forward's outputs (one entry per output, None for
    "as traced"), so that it compiles the backward for the saved tensors' real layouts.
    False where no compile listens (no tracing context, or one that is not collecting)."""
    context = torch._guards.TracingContext.try_get()
    collected = getattr(context, "output_strides", None)
    if collected is None:
        return False
    collected.extend(strides)
    return True


# ---- shape guards a compile adds (ShapeEnv's guard list and the guard-expression methods
# Inductor's FX graph cache uses to store and replay them; no public equivalent) ----


def guard_mark(fake_mode) -> int:
    """Where the shape environment's guard list stands now (0 without one)."""
    env = getattr(fake_mode, "shape_env", None)
    return len(env.guards) if env is not None else 0


def guards_since(fake_mode, mark: int, placeholders) -> str | None:
    """The guards added to the shape environment after `mark`, as an expression over
    `placeholders` (the graph's fake inputs), or None if none were added. Raises if they
    cannot be expressed over the placeholders."""
    env = getattr(fake_mode, "shape_env", None)
    if env is None or len(env.guards) == mark:
        return None
    added = env.guards[mark:]
    code = env.produce_guards_expression(placeholders, guards=added)
    if code is None:
        raise ValueError(
            f"guards {[str(g.expr) for g in added]} are not expressible over the graph's inputs"
        )
    return code


def replay_guards(fake_mode, code: str, placeholders) -> bool:
    """Evaluate a `guards_since` expression over `placeholders`: symbolic ones add the same
    guards to this shape environment. Whether they hold."""
    return bool(fake_mode.shape_env.evaluate_guards_expression(code, placeholders))


def shape_env_state(env):
    """(guards, symbols, runtime asserts) of a shape environment: what a compile added is what
    differs afterwards (the AOT cache's mark)."""
    asserts = sum(map(len, getattr(env, "deferred_runtime_asserts", {}).values()))
    return len(env.guards), set(env.var_to_range), asserts


def guards_over_inputs(env, mark: int, symints) -> str | None:
    """Every guard of `env` as an expression over the SymInt inputs `symints`; raises
    ValueError if a guard added since `mark` uses a symbol that is none of theirs."""
    inputs = {s.node.expr for s in symints}
    if any(not guard.expr.free_symbols <= inputs for guard in env.guards[mark:]):
        raise ValueError("a shape guard over a symbol that is not an input")
    return env.produce_guards_expression(symints, guards=env.get_pruned_guards(symints))


def evaluate_guards(env, code: str, args) -> bool:
    """A `guards_over_inputs` expression on `args`: on ints whether it holds; on SymInts it
    also adds its guards to `env`."""
    return bool(env.evaluate_guards_expression(code, args))


# ---- dynamo's restart when AOTAutograd cannot turn a float input into a tensor (the
# tensorify pass raises TensorifyScalarRestartAnalysis after naming, in TensorifyState, the
# float symbols dynamo should specialize when it traces again; no public equivalent) ----


def specialized_floats() -> set[str]:
    """The float symbols (their names, e.g. "zf0") dynamo is asked to specialize."""
    from torch._dynamo.symbolic_convert import TensorifyState

    return set(TensorifyState.force_specializations)


def restart_specializing(names) -> None:
    """Ask dynamo to trace the frame again with the float symbols `names` specialized, as the
    tensorify pass does."""
    from torch._dynamo.symbolic_convert import TensorifyState

    for name in names:
        TensorifyState.specialize(name)
    raise tensorify_restart_type()


def tensorify_restart_type():
    return torch._dynamo.exc.TensorifyScalarRestartAnalysis


def recompiles_raise():
    """A context in which a dynamo recompile raises `RecompileError` instead of compiling
    again: the fuzzer's check that one dynamic-shape build serves every size, for any backend
    (dynamo's config has no public equivalent)."""
    return torch._dynamo.config.patch(error_on_recompile=True)


def recompile_error_type():
    return torch._dynamo.exc.RecompileError


def same_storage(a, b) -> bool:
    """Whether tensors `a` and `b` (fake or real) view one storage."""
    return storage_key(a) == storage_key(b)


def storage_key(tensor):
    """A hashable identity of `tensor`'s storage (fake or real), equal for tensors viewing one
    storage: tensors grouped by storage without comparing every pair."""
    return StorageWeakRef(tensor.untyped_storage())


# ---- the wrappers' CPU buffers (Inductor's wrappers allocate with the same function; torch's
# public allocator parses its arguments in Python first) ----


def _fast_empty_strided_cpu():
    """The wrappers' CPU buffers: `(sizes, strides, dtype) -> tensor`, Inductor's wrappers'
    allocator, which takes its arguments without torch's Python argument parser (0.9 against
    torch.empty_strided's 2.5 us a call; a training step allocates hundreds). Where a release
    lacks it, torch.empty_strided."""
    try:
        from torch._C._dynamo.guards import _empty_strided_cpu
    except ImportError:
        return lambda sizes, strides, dtype: torch.empty_strided(sizes, strides, dtype=dtype)
    return _empty_strided_cpu


empty_strided_cpu = _fast_empty_strided_cpu()
