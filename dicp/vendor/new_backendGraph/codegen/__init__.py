"""Codegen entry: the C++ target (fused loop nests) or the Python-kernel target."""
from .. import config


def codegen(gm, ctx):
    if config.codegen_target() == "python":
        from dicp.dynamo_bridge.graph_codegen import PythonCodegen
        return PythonCodegen(gm, ctx).run()
    from .cpp_codegen import CppCodegen
    return CppCodegen(gm, ctx).run()
