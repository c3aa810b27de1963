"""The Python rendering of the wrapper IR (wrapper_ir.py): `call(args)` in wrapper.py.j2.

One method per statement kind (`statement_<Class>`), and `literal` for the values inside them.
`layouts` (variable -> (sizes, strides)) lets a view in a variable's own layout print as the
variable itself. With `labels` (DICP_PROFILE_KERNELS: a call's name -> the ATen op it lowers),
each kernel launch, library call, eager call and copy runs inside torch.profiler's
`record_function`, named `<graph>/<call> <op>`.
"""

import math

import sympy
import torch

from . import wrapper_ir as W
from .symbolic import py_expr, storage_span
from .templating import SHARED_TEMPLATES, render


def call_name(statement) -> str | None:
    """How a profile names a call statement (a kernel by its name, another call by what it
    writes), None for the other statements."""
    if isinstance(statement, W.CallKernel):
        return statement.kernel
    if isinstance(statement, (W.CallLibrary, W.CallEager)):
        return statement.result
    if isinstance(statement, W.Copy):
        return f"copy to {statement.target}"
    return None


class PythonWrapperRenderer:
    def __init__(self, layouts=None, labels=None):
        self.layouts = layouts or {}
        self.labels = labels
        self.graph_name = ""

    def render(self, graph_name, target, inputs, statements, header=None) -> str:
        """The wrapper module: `statements` as the body of `call(args)`."""
        *body, returned = statements
        if not isinstance(returned, W.Return):
            body, returned = statements, W.Return()
        self.graph_name = graph_name
        return render(
            SHARED_TEMPLATES,
            "wrapper.py.j2",
            graph_name=graph_name,
            target=target,
            header=header,
            inputs=inputs,
            lines=self.lines(body),
            outputs=[self.output(o) for o in returned.outputs],
            profiled=self.labels is not None,
            module_lines=[
                f"{s.name}_test = RangesApart({s.spans[: len(s.targets)]}, "
                f"{s.spans[len(s.targets) :]})"
                for s in body
                if isinstance(s, W.StoragesApart) and s.spans is not None
            ],
        )

    def lines(self, statements) -> list:
        return [self.profiled(s, self.statement(s)) for s in statements]

    def profiled(self, statement, line) -> str:
        """`line` inside a profiler range named for the call, where profiling is on."""
        name = call_name(statement)
        if self.labels is None or name is None:
            return line
        kind = {
            W.CallLibrary: f"library {getattr(statement, 'op', '')}",
            W.CallEager: f"eager {getattr(statement, 'fn', '')}",
        }.get(type(statement))
        label = " ".join(filter(None, (f"{self.graph_name}/{name}", kind, self.labels.get(name))))
        return f"with record_function({label!r}): {line}"

    def statement(self, s) -> str:
        return getattr(self, f"statement_{type(s).__name__}")(s)

    # ---- values ----
    def literal(self, value) -> str:
        if isinstance(value, W.Var):
            return str(value)
        if isinstance(value, W.TensorView):
            return self.view(value)
        if isinstance(value, (list, tuple)):
            items = ", ".join(self.literal(v) for v in value)
            if isinstance(value, list):
                return f"[{items}]"
            return f"({items}{',' if len(value) == 1 else ''})"
        if isinstance(value, slice):
            return (
                f"slice({self.literal(value.start)}, {self.literal(value.stop)}, "
                f"{self.literal(value.step)})"
            )
        if isinstance(value, sympy.Basic):
            return py_expr(value)
        if isinstance(value, float) and not math.isfinite(value):
            return f"float('{value}')"
        if isinstance(value, (torch.dtype, torch.memory_format, torch.layout)):
            return str(value)
        return repr(value)

    def view(self, view: W.TensorView) -> str:
        layout = (list(view.sizes), list(view.strides))
        if self.layouts.get(view.base) == layout and view.offset == 0:
            return view.base
        return self._strided(view.base, view.sizes, view.strides, view.offset)

    def _strided(self, base, sizes, strides, offset=0):
        """`base`'s memory seen with `sizes` and `strides`, `offset` elements past its own."""
        sizes, strides = self.literal(list(sizes)), self.literal(list(strides))
        if offset == 0:
            return f"{base}.as_strided({sizes}, {strides})"
        return (
            f"torch.as_strided({base}, {sizes}, {strides}, {base}.storage_offset() + "
            f"{self.literal(sympy.sympify(offset))})"
        )

    def call(self, fn, args, kwargs) -> str:
        rendered = [self.literal(a) for a in args]
        rendered += [f"{k}={self.literal(v)}" for k, v in kwargs]
        return f"{fn}({', '.join(rendered)})"

    def output(self, output: W.Output) -> str:
        value = self.literal(output.value)
        return f"own({value})" if output.own else value

    # ---- statements ----
    def statement_SizeOf(self, s):
        return f"{s.symbol} = {s.tensor}.{s.attribute}({s.dim})"

    def statement_SetSize(self, s):
        return f"{s.symbol} = {py_expr(s.expr)}"

    def statement_Allocate(self, s):
        sizes, strides = self.literal(tuple(s.sizes)), self.literal(tuple(s.strides))
        if s.offset is None and s.device == "cpu":
            return f"{s.name} = empty_strided_cpu({sizes}, {strides}, {s.dtype})"
        device = "" if s.device == "cpu" else f", device={s.device!r}"
        if s.offset is None:
            return f"{s.name} = torch.empty_strided({sizes}, {strides}, dtype={s.dtype}{device})"
        extent = s.offset + storage_span(list(s.sizes), list(s.strides))
        return (
            f"{s.name} = torch.empty({self.literal(extent)}, dtype={s.dtype}{device})"
            f".as_strided({self.literal(list(s.sizes))}, {self.literal(list(s.strides))}, "
            f"{self.literal(s.offset)})"
        )

    def statement_View(self, s):
        if s.sizes is None:
            return f"{s.name} = {s.base}"
        if s.absolute:
            return (
                f"{s.name} = {s.base}.as_strided({self.literal(list(s.sizes))}, "
                f"{self.literal(list(s.strides))}, {self.literal(s.offset)})"
            )
        return f"{s.name} = {self._strided(s.base, s.sizes, s.strides, s.offset)}"

    def statement_Reuse(self, s):
        memory = s.memory if s.sizes is None else self._strided(s.memory, s.sizes, s.strides)
        note = "in place" if s.in_place else f"reuses {s.memory}'s memory"
        return f"{s.name} = {memory}  # {note}"

    def statement_StoragesApart(self, s):
        targets, others = (self.literal(tuple(map(W.Var, v))) for v in (s.targets, s.others))
        test = "storages_apart" if s.spans is None else f"{s.name}_test"  # a RangesApart
        return f"{s.name} = {test}({targets}, {others})"

    def statement_InPlaceOf(self, s):
        return f"{s.name} = {s.target} if {s.apart} else torch.empty_like({s.target})"

    def statement_CopyBack(self, s):
        return f"if not {s.apart}: {s.target}.copy_({s.name})"

    def statement_Free(self, s):
        return f"del {', '.join(s.names)}"

    def statement_Copy(self, s):
        return f"{s.target}.copy_({self.literal(s.source)})"

    def statement_CallKernel(self, s):
        arguments = [f"{p}.data_ptr()" for p in s.pointers] + [py_expr(n) for n in s.sizes]
        arguments += [f"*storage_extent({p})" for p in s.pointers if s.extents]
        return f"kernels.{s.kernel}({', '.join(arguments)})"

    def statement_CallLibrary(self, s):
        call = self.call(f"vendor_ops[{s.op!r}]", s.args, s.kwargs)
        out = dict(s.kwargs).get("out")
        if isinstance(out, W.TensorView):  # memory of a dead buffer (wrapper_memory.py)
            return f"{s.result} = {call}  # into {out.base}'s memory"
        return f"{s.result} = {call}"

    def statement_CallEager(self, s):
        return f"{s.result} = {self.call(s.fn, s.args, s.kwargs)}"

    def statement_Unpack(self, s):
        return f"{', '.join(s.names)}, = {s.source}"

    def statement_AsTraced(self, s):
        sizes, strides = self.literal(tuple(s.sizes)), self.literal(tuple(s.strides))
        return f"{s.name} = as_traced({s.name}, {sizes}, {strides})"

    def statement_Raise(self, s):
        return f"raise RuntimeError({s.message!r})"

    def statement_Verbatim(self, s):
        return s.text
