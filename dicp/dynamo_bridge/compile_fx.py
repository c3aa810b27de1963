"""The dynamo -> AOTAutograd -> backend bridge."""
from torch._dynamo.backends.common import aot_autograd

from dicp.vendor import get_backend

from .graph import GraphTransformer


def _graph_compiler(backend, kind):
    def compile_graph(gm, example_inputs):
        compiled = GraphTransformer(gm, backend, kind, example_inputs).compile_to_callable()
        compiled._boxed_call = True  # AOTAutograd passes one list it lets us clear
        return compiled
    compile_graph.__name__ = f"{backend.name}_{kind}_compiler"
    return compile_graph


def _decompositions(backend):
    table = backend.decompositions
    return table() if callable(table) else table


def compile_fx(gm, example_inputs, backend_name: str):
    """Compile a dynamo FX graph for the registered backend `backend_name`."""
    backend = get_backend(backend_name)
    compiler = aot_autograd(
        fw_compiler=_graph_compiler(backend, "forward"),
        bw_compiler=_graph_compiler(backend, "backward"),
        inference_compiler=_graph_compiler(backend, "inference"),
        decompositions=_decompositions(backend),
    )
    return compiler(gm, example_inputs)
