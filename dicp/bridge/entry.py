"""The dynamo -> AOTAutograd -> backend bridge."""
from dicp import config, profile
from .pipeline.backend import get_backend

from .cache import aot as aot_cache
from .pipeline.dynamo_context import current_frame, inside_dicp, install
from .pipeline.stages import GraphTransformer
from .cache.graph import backend_fingerprint
from .cache.precompile import keyed_autograd_cache, output_code, serializable, serializable_results
from .pipeline.recompiles import forget_compiles, note_compile, traced_inputs
from .debug.result_record import recording
from .pipeline.torch_compat import aot_autograd


def _graph_compiler(backend, kind):
    def compile_graph(gm, example_inputs):
        with inside_dicp():  # AOTAutograd compiles the backward lazily, outside compile_fx
            transformer = GraphTransformer(gm, backend, kind, example_inputs)
            compiled = boxed(transformer.compile_to_callable(), kind)
            return output_code(transformer.compiled_graph, compiled)
    compile_graph.__name__ = f"{backend.name}_{kind}_compiler"
    return compile_graph


def boxed(fn, kind):
    """`fn(args)` in AOTAutograd's boxed calling convention: it receives the one list of graph
    inputs and may empty it to free inputs early; the list is emptied after the call in any
    case. Whatever callable a backend's compile job returns (a function, a bound method, an
    object) is wrapped, so the convention is dicp's business, not the vendor's. `kind`: the
    graph's (forward, backward, inference), for DICP_RECORD_RESULTS."""
    fn = recording(fn, kind)

    def call(args):
        try:
            return fn(args)
        finally:
            args.clear()
    call._boxed_call = True
    return call


def _decompositions(backend):
    table = backend.decompositions
    return table() if callable(table) else table


def compile_fx(gm, example_inputs, backend_name: str):
    """Compile a dynamo FX graph for the registered backend `backend_name`."""
    if install():  # torch._dynamo.reset() dropped dynamo's hooks: it forgot every frame
        forget_compiles()
    with inside_dicp():
        with profile.stage("setup"):
            backend = get_backend(backend_name)
            config.check_environment()  # after the backend is loaded, so its knobs are known
            note_compile(current_frame(gm).function, traced_inputs(gm, example_inputs))
            compiler = aot_autograd(
                fw_compiler=_graph_compiler(backend, "forward"),
                bw_compiler=_graph_compiler(backend, "backward"),
                inference_compiler=_graph_compiler(backend, "inference"),
                decompositions=_decompositions(backend),
            )
        entry_key = None
        if aot_cache.enabled():
            with profile.stage("load"):
                entry_key = aot_cache.key(gm, example_inputs, backend)
                cached = aot_cache.lookup(entry_key, gm, example_inputs) if entry_key else None
            if cached is not None:
                return cached
        salt = backend_fingerprint(backend) + aot_cache.global_state_text()
        with profile.stage("aot_autograd"), keyed_autograd_cache(salt):
            if entry_key is None:
                return serializable(compiler(gm, example_inputs))
            with serializable_results():
                compiled = serializable(compiler(gm, example_inputs))
        aot_cache.store(entry_key, compiled, gm, example_inputs)
        return compiled
