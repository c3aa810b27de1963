"""The entry from dynamo: a dynamo graph through AOTAutograd, each graph AOTAutograd makes through
the pipeline's stages, with the caches around them and the debugging tools' hooks on the result.

    compile_fx(gm, example_inputs, backend)
      AOT cache hit: AOTAutograd's whole result, loaded, its shape guards    cache/aot.py
      added again (or the restart it asked of dynamo, asked again)
      else AOTAutograd (the backend's decompositions), then per forward, backward or inference
      graph (`_graph_compiler`):
        graph cache hit: the stored sources through the compile job         cache/graph.py
        else every stage: conversion, inference, codegen, compile job       pipeline/stages.py
        -> the graph hooks (debugging tools), AOTAutograd's boxed convention, and torch's
           OutputCode, which precompile and the AOT cache save               cache/precompile.py
"""

import contextlib

import torch

from dicp import config, profile

from . import debug  # noqa: F401  (registers the debugging tools' hooks)
from .cache import aot as aot_cache
from .cache import graph as graph_cache
from .cache.artifact import arity, recorded
from .cache.precompile import keyed_autograd_cache, output_code, serializable, serializable_results
from .pipeline import hooks
from .pipeline.backend import Backend
from .pipeline.dynamo_context import current_frame, inside_dicp, install
from .pipeline.fallback import observe_fallbacks, record_fallback
from .pipeline.recompiles import forget_compiles, note_compile, traced_inputs
from .pipeline.stages import GraphTransformer, boxed
from .pipeline.symbolic import may_overlap
from .pipeline.torch_compat import (
    aot_autograd,
    guard_mark,
    min_cut_rematerialization_partition,
    report_output_strides,
    saved_for_backward,
    tangents_in_memory_format,
)
from .pipeline.traced_layout import restride_inputs
from .pipeline.utils import log


def compile_fx(gm, example_inputs, backend: Backend):
    """Compile a dynamo FX graph for `backend` (a backend's entry-point function calls this)."""
    if install():  # torch._dynamo.reset() dropped dynamo's hooks: it forgot every frame
        forget_compiles()
    with inside_dicp():
        with profile.stage("setup"):
            config.check_environment()  # after the backend is loaded, so its knobs are known
            note_compile(current_frame(gm).function, traced_inputs(gm, example_inputs))
        entry_key = None
        if aot_cache.enabled():
            with profile.stage("load"):
                entry_key = aot_cache.key(gm, example_inputs, backend)
                cached = aot_cache.lookup(entry_key, gm, example_inputs) if entry_key else None
            if cached is not None:
                return cached
        with profile.stage("setup"):  # a hit needs neither AOTAutograd nor its table
            compiler = _aot_compiler(backend)
        salt = graph_cache.backend_fingerprint(backend) + aot_cache.global_state_text()
        with profile.stage("aot_autograd"), keyed_autograd_cache(salt), _tangent_layouts(gm):
            if entry_key is None:
                return serializable(compiler(gm, example_inputs))
            mark = aot_cache.shape_env_mark(example_inputs)
            with serializable_results(entry_key), aot_cache.restarts_stored(entry_key):
                compiled = serializable(compiler(gm, example_inputs))
        aot_cache.store(entry_key, compiled, gm, example_inputs, mark)
        return compiled


def _aot_compiler(backend):
    """AOTAutograd with the backend's decompositions and dicp's graph compilers. The forward
    saves for the backward what Inductor's does (min-cut): pointwise ops fuse into kernels, so
    recomputing one in the backward is cheap, and saving its result costs memory until the
    backward (a LLaMA block's training step on emu: peak 10.50 MB with the default partition,
    which saves every value the backward reads, 8.48 MB with min-cut; eager 10.22 MB)."""
    return aot_autograd(
        fw_compiler=_graph_compiler(backend, "forward"),
        bw_compiler=_graph_compiler(backend, "backward"),
        inference_compiler=_graph_compiler(backend, "inference"),
        decompositions=backend.decomposition_table(),
        partition_fn=min_cut_rematerialization_partition,
        keep_inference_input_mutations=backend.keeps_input_mutations,
    )


def _tangent_layouts(gm):
    """How AOTAutograd lays out `gm`'s tangents: in their outputs' strides unless an output
    may overlap itself (x.sin().unfold(0, 3, 1)), whose strides cannot hold a gradient: the
    runtime copy into them lost all but one of the windows' gradients per element."""
    outputs = [n.meta.get("example_value") for n in gm.graph.output_node().all_input_nodes]
    if any(
        isinstance(v, torch.Tensor) and not _symbolic(v) and may_overlap(v.shape, v.stride())
        for v in outputs
    ):
        return tangents_in_memory_format()
    return contextlib.nullcontext()


def _symbolic(tensor):
    """Whether a size or stride is symbolic: AOTAutograd lays out its tangent by memory format
    already."""
    return not all(isinstance(v, int) for v in (*tensor.shape, *tensor.stride()))


def _graph_compiler(backend, kind):
    def compile_graph(gm, example_inputs):
        with inside_dicp():  # AOTAutograd compiles the backward lazily, outside compile_fx
            restride_inputs(gm, example_inputs)  # saved tensors in the forward's layouts
            stages = GraphTransformer(gm, backend, kind, example_inputs)
            if kind == "forward" and backend.chooses_saved_layouts:
                stages.ctx.saved_outputs = saved_for_backward()
            before = profile.stage_totals()
            compiled, record = _cached_or_built(stages)
            strides = getattr(stages.sources, "output_strides", None)
            if strides and not report_output_strides(strides):  # only asked when it listens
                raise RuntimeError(f"{stages.ctx.graph_name}: AOTAutograd took no strides")
            stages.account(before)
            compiled = hooks.wrap_graph(compiled, gm, stages)
            return output_code(record, boxed(compiled, kind))

    compile_graph.__name__ = f"{backend.name}_{kind}_compiler"
    return compile_graph


def _cached_or_built(stages):
    """(the graph's callable, its CompiledGraph or None): the graph cache's sources through the
    backend's compile job, or every stage (and the result stored)."""
    key, aten_arity = None, arity(stages.gm)  # what AOTAutograd passes and expects back
    aten_gm, fake_mode = stages.gm, stages.ctx.fake_mode
    if graph_cache.enabled():
        with profile.stage("load"):
            kind = f"{stages.ctx.kind} saving {stages.ctx.saved_outputs}"
            key = graph_cache.graph_key(aten_gm, kind, stages.backend, fake_mode)
            cached = graph_cache.lookup(key, aten_gm, fake_mode) if key else None
            if cached is not None:  # conversion and codegen done by an earlier process
                for taken in cached.fallbacks:  # observers see them as if converted now
                    record_fallback(taken)
                stages.sources = cached.generated
                built = recorded(stages, stages.compile)
                return _as_stored(built, cached.fallbacks, aten_arity)
    mark = guard_mark(fake_mode)
    with observe_fallbacks() as fallbacks:
        built = recorded(stages, stages.build)
    fn, record = _as_stored(built, fallbacks, aten_arity)
    if key and record is not None and _record_guards(record, fake_mode, mark, aten_gm):
        graph_cache.store(key, record)
    return fn, record


def _record_guards(record, fake_mode, mark, aten_gm) -> bool:
    """Keep in `record` the shape guards the stages added (a vendor op's shape rule may guard
    on a size that AOTAutograd's trace did not), for a hit to add them again; False if they
    cannot be kept, and the graph is then not stored."""
    try:
        record.guards = graph_cache.recorded_guards(fake_mode, mark, aten_gm)
    except Exception as error:  # torch raises many kinds
        log.info(
            "dicp: graph cache does not store a graph whose compile added shape guards "
            "it cannot express: %s",
            error,
        )
        return False
    return True


def _as_stored(built, fallbacks, aten_arity):
    """`built` (callable, CompiledGraph), the CompiledGraph recording what a cache checks and
    replays on a hit: the fallbacks conversion took, the ATen graph's inputs and outputs."""
    fn, record = built
    if record is not None:
        record.fallbacks = tuple(fallbacks)
        record.arity = aten_arity
    return fn, record
