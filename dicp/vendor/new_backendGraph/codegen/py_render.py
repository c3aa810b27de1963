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

    def statement_For(self, s):
        head = f"for {s.var.name} in range({self.expr(s.lo)}, {self.expr(s.hi)}):"
        stop = [f"    if {s.until.name}:", "        break"] if s.until is not None else []
        return [head, *stop, *self.block(s.body)]


def _constant(const):
    if const.value in ("lowest", "highest"):
        return f"rt.limit({const.type!r}, {const.value!r})"
    return f"rt.value({const.type!r}, {const.value!r})".replace("inf)", "float('inf'))") \
        .replace("nan)", "float('nan'))")


def render_kernel(name, params, symbols, bounds_check, outer, locals_, phases) -> str:
    """The Python function `name(pointers..., sizes..., [extents...])` of one kernel:
    `outer` its (variable, size Index) loops, `phases` kernel.Phase objects run in each outer
    iteration after the declarations `locals_`."""
    printer = PyRenderer()
    arguments = [p.name for p in params] + [s.name for s in symbols]
    arguments += [f"{p.name}_{end}" for p in params for end in ("lo", "hi") if bounds_check]
    lines = [f"def {name}({', '.join(arguments)}):"]
    for p in params:
        extent = f", {p.name}_lo, {p.name}_hi" if bounds_check else ""
        lines.append(f"    {p.name} = rt.Pointer({p.name}, {p.ctype!r}{extent})")
    body = printer.lines(locals_)
    for phase in phases:
        body += printer.lines(phase.pre) + _loops(printer, phase) + printer.lines(phase.post)
    indent = "    "
    for var, size in outer:
        lines.append(f"{indent}for {var} in range({printer.expr(size)}):")
        indent += "    "
    lines += [indent + line for line in body] or [indent + "pass"]
    return "\n".join(lines) + "\n"


def _loops(printer, phase):
    lines, indent, close = [], "", []
    for i, (var, lo, hi) in enumerate(phase.bounds):
        lo, hi = printer.expr(lo), printer.expr(hi)
        if phase.chunk and i == len(phase.bounds) - 1:
            size = phase.chunk.size
            lines.append(f"{indent}for {var}_chunk in range({lo}, {hi}, {size}):")
            indent += "    "
            lines += printer.lines(phase.chunk.open, indent)
            close = printer.lines(phase.chunk.close, indent)
            lo, hi = f"{var}_chunk", f"min({var}_chunk + {size}, {hi})"
        lines.append(f"{indent}for {var} in range({lo}, {hi}):")
        indent += "    "
    body = printer.lines(phase.body, indent)
    return lines + (body or [indent + "pass"] if phase.bounds else body) + close
