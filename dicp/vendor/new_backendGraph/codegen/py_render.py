"""The Python renderer of the loop IR: each kernel as a Python function with the C++ kernel's
parameters (data pointers, sizes) and its loops, element by element, on py_runtime.

The same lowering and schedule as the C++ target, printed another way: no compiler needed,
and slow (one Python call per op and element), for checking a schedule or a renderer on small
inputs (DICP_NEW_BACKENDGRAPH_TARGET=python_loops). Loop plans (parallel, SIMD) are C++'s
business and are not printed.
"""

from dicp.api import py_expr

from . import loop_ir as L


class PyRenderer(L.Renderer):
    """Prints loop IR as Python lines (four-space indents)."""

    # ---- expressions ----
    def expr_Const(self, value):
        return _constant(value)

    def expr_Index(self, value):
        return py_expr(value.expr)

    def expr_Op(self, value):
        args = [repr(value.type), *(self.expr(a) for a in value.args)]
        args += [repr(value.param)] if value.param else []
        return f"rt.{value.name}({', '.join(args)})"

    def expr_Load(self, value):
        return f"rt.load({value.pointer}, {py_expr(value.position)}, {value.type!r})"

    # ---- statements ----
    def block(self, statements, indent="    "):
        return self.lines(statements, indent) or [indent + "pass"]

    def statement_Let(self, s):
        return [f"{s.var.name} = {self.expr(s.value)}"]

    def statement_Declare(self, s):
        var = s.var
        if var.dims:
            return [f"{var.name} = rt.array({var.dims!r}, {_constant(L.Const(0, var.type))})"]
        return [f"{var.name} = {'None' if s.init is None else self.expr(s.init)}"]

    def statement_Assign(self, s):
        value = self.expr(s.value)
        if s.combine:
            name = {"+": "Add", "|": "BitwiseOr"}[s.combine]
            value = f"rt.{name}({s.target.type!r}, {self.expr(s.target)}, {value})"
        return [f"{self.expr(s.target)} = {value}"]

    def statement_Store(self, s):
        return [f"rt.store({s.pointer}, {py_expr(s.position)}, {self.expr(s.value)})"]

    def statement_If(self, s, keyword="if"):
        lines = [f"{keyword} {self.expr(s.condition)}:", *self.block(s.body)]
        if len(s.orelse) == 1 and isinstance(s.orelse[0], L.If):
            return lines + self.statement_If(s.orelse[0], "elif")
        if s.orelse:
            lines += ["else:", *self.block(s.orelse)]
        return lines

    def statement_Loop(self, s):
        """A loop, its schedule aside (threads and vectors are C++'s business); a chunked
        loop runs in chunks as the C++ one does (a chunked sum rounds per chunk)."""
        lo, hi = self.expr(s.lo), self.expr(s.hi)
        stop = [f"    if {s.until.name}:", "        break"] if s.until is not None else []
        if s.chunk is None:
            return [f"for {s.var.name} in range({lo}, {hi}):", *stop, *self.block(s.body)]
        var, size = s.var.name, py_expr(s.chunk.size)
        start = L.chunk_start(var)
        inner = [
            f"for {var} in range({start}, min({start} + {size}, {hi})):",
            *stop,
            *self.block(s.body),
        ]
        return [
            f"for {start} in range({lo}, {hi}, {size}):",
            *self.lines(s.chunk.open, "    "),
            *("    " + line for line in inner),
            *self.lines(s.chunk.close, "    "),
        ]

    # ---- kernels ----
    def kernel(self, kernel) -> str:
        """The Python function of a kernel (loop_ir.Kernel), taking the C++ kernel's
        arguments: pointers, sizes, [extents]."""
        params = kernel.params
        arguments = [p.name for p in params] + list(kernel.sizes)
        arguments += [f"{p.name}_{end}" for p in params for end in ("lo", "hi") if kernel.extents]
        lines = [f"def {kernel.name}({', '.join(arguments)}):"]
        for p in params:
            extent = f", {p.name}_lo, {p.name}_hi" if kernel.extents else ""
            lines.append(f"    {p.name} = rt.Pointer({p.name}, {p.ctype!r}{extent})")
        return "\n".join(lines + self.block(kernel.body)) + "\n"


def _constant(const):
    if const.value in ("lowest", "highest"):
        return f"rt.limit({const.type!r}, {const.value!r})"
    return f"rt.value({const.type!r}, {const.value!r})".replace("inf)", "float('inf'))").replace(
        "nan)", "float('nan'))"
    )
