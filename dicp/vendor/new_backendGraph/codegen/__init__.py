"""Codegen entry: the C++ target (fused loop nests), the same loop nests printed as Python
(python_loops), or the Python-kernel target (vendor ops as torch ops)."""

from .. import config


def codegen(gm, ctx):
    if config.codegen_target() == "python":
        from dicp.api import PythonCodegen

        return PythonCodegen(gm, ctx).run()
    from .cpp_codegen import CppCodegen, LoopPythonCodegen

    if config.codegen_target() == "python_loops":
        return LoopPythonCodegen(gm, ctx).run()
    return CppCodegen(gm, ctx).run()
