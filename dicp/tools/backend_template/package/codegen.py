"""BACKEND_NAME's codegen: each vendor op becomes one C++ kernel over contiguous memory.

dicp's GraphCodegenBase does the rest of the wrapper: inputs, constants, size arithmetic,
eager fallback for every ATen op left in the graph, tuple results and output layouts. This
class only says what a vendor op becomes (`vendor_op`) and renders the kernels (`finish`).
"""

from pathlib import Path

from dicp.api import GeneratedGraph, GraphCodegenBase, Var, render, shape_of

TEMPLATES = Path(__file__).parent / "templates"
CTYPES = {"torch.float32": "float", "torch.float64": "double"}


class Codegen(GraphCodegenBase):
    target = "cpp"

    def __init__(self, gm, ctx):
        super().__init__(gm, ctx)
        self.kernels = []  # rendered kernel sources
        self.signatures = {}  # kernel name -> number of pointer arguments

    def vendor_op(self, node):
        val = node.meta["val"]
        # operands broadcast to the result's shape and laid out contiguously, in the wrapper
        operands = [
            self.wrapper.call_op(
                "torch.Tensor.contiguous",
                [self.wrapper.call_op("torch.Tensor.expand", [self.value(arg), shape_of(val)], {})],
                {},
            )
            for arg in node.args
        ]
        out = Var(self.wrapper.allocate(val.dtype, shape_of(val), _contiguous(shape_of(val))))
        name = f"kernel_{len(self.kernels)}"
        self.kernels.append(
            render(
                TEMPLATES,
                "kernel.cpp.j2",
                name=name,
                T=CTYPES[str(val.dtype)],
                expression=node.target.cpp,
                operands=["a", "b"][: len(operands)],
            )
        )
        pointers = [out, *operands]
        self.signatures[name] = len(pointers)
        self.wrapper.call_kernel(name, pointers, [_numel(shape_of(val))])
        return out

    def finish(self):
        files = {"kernels.cpp": render(TEMPLATES, "module.cpp.j2", kernels=self.kernels)}
        return GeneratedGraph(
            self.ctx.graph_name,
            self.target,
            self.wrapper.render(),
            files if self.kernels else {},
            dict(self.vendor_ops),
            self.wrapper.constants,
            {"kernels": dict(self.signatures)},
        )


def _numel(sizes):
    numel = 1
    for size in sizes:
        numel = numel * size
    return numel


def _contiguous(sizes):
    strides, running = [], 1
    for size in reversed(sizes):
        strides.append(running)
        running = running * size
    return list(reversed(strides))


def codegen(gm, ctx):
    return Codegen(gm, ctx).run()
