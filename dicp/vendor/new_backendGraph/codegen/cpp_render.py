"""The C++ renderer of the loop IR (loop_ir.py): a table from op to C++ (the vendor pointwise
ops' from their rows in pointwise.py), and the printer of statements, loops with their pragmas
and whole kernels. A vendor targeting another language writes another table and printer;
lowerings and scheduling stay as they are.

A template names its operands `{0}`, `{1}`, ... and the op's result type `{T}` and `param`
`{P}`. Index expressions print through `cpp_expr` (the size functions of the runtime
header).
"""

import math

import sympy
import torch

from dicp.api import ExprPrinter

from ..pointwise import POINTWISE
from . import loop_ir as L
from .ctypes_map import INTEGER_CTYPES
from .sym import integer_valued
from .templates import render

# Ops of the loop level: conversions, selects, the updates of reductions and index checks.
LOOP = {
    "Cast": "dicp::cast<{T}>({0})",  # through float from a half type; an integer 0 is +0
    "StaticCast": "static_cast<{T}>({0})",
    "FloatToInt": "dicp::float_to_int<{T}>({0})",
    "ToBool": "({0} != 0)",
    "RoundTo": "dicp::cast<float>(dicp::cast<{P}>(dicp::cast<float>({0})))",  # to a half type
    "StoreRound": "dicp::cast<{T}>(dicp::cast<{P}>({0}))",  # as a store to {P} would round
    "All": "({0} && {1})",
    "Iota": "({0} + static_cast<{T}>({1}) * {2})",
    "Tril": "(({1} - {0}) <= {2} ? {3} : {T}(0))",
    "Triu": "(({1} - {0}) >= {2} ? {3} : {T}(0))",
    "Better": "{0} {P} {1} ? {0} : {1}",  # max/min update: the new element where it wins
    "IsNanCompare": "({0} != {0})",
    "ArgBetter": "({2} < 0 || {0} {P} {1} || (dicp::is_nan({0}) && !dicp::is_nan({1})))",
    # bitwise, not short-circuit, and picked by masks (Pick): g++ made a branch of each
    # test, mispredicted on data (a 2x2 max pool: 350 us against 230 without)
    "PoolBetter": "({0} & (({3} < 0) | ({1} > {2}) | dicp::is_nan({1})))",
    "Pick": "dicp::pick<{T}>({0}, {1}, {2})",  # {0} ? {1} : {2} without a branch
    "WrapIndex": "dicp::wrap_index<int64_t>({0}, {1})",
    "CheckedIndex": 'dicp::checked_index<int64_t>({0}, {1}, "{P}")',
    "InjectedCompileError": "dicp_injected_compile_error_TESTING_ONLY({0})",
    "ErfCentral": "dicp::erf_central<{T}>({0})",  # erf on (-1, 1) (value_range.py)
    "IPow": "dicp::ipow<{T}>({0}, {1})",  # Pow of integers
    "IMod": "dicp::imod<{T}>({0}, {1})",  # Fmod of integers
}
# The C++ of every loop IR op: the vendor pointwise ops' from their rows, then the loop level's
OPS = {**{row.name: row.cpp for row in POINTWISE}, **LOOP}
# Ops whose integer versions record a zero divisor (dicp_runtime.h, zero_division)
INTEGER_DIVISIONS = {"FloorDiv", "TruncDiv", "Remainder", "IMod"}


# ---- index expressions -----------------------------------------------------------------


def _typed(template):
    """A C++ helper instantiated over int64_t, or over double where an argument is a float
    (kornia's antialiased resize takes sigma = max(0.001, (h / 11 - 1) / 2) of a symbolic h;
    the int64_t max truncated it to 0 and blurred with the wrong kernel, silently)."""

    def render(expr, args):
        ctype = "int64_t" if all(integer_valued(a) for a in expr.args) else "double"
        return template.format(*args, args=", ".join(args), T=ctype)

    return render


# torch's own symbolic functions and ours, by class name -> C++ (the runtime header's helpers)
CPP_FUNCTIONS = {
    "IDiv": "({0} / {1})",
    "IMod": "({0} % {1})",
    "FloorDiv": _typed("dicp::floordiv<{T}>({0}, {1})"),
    "CleanDiv": "({0} / {1})",
    "CeilDiv": "dicp::ceildiv<int64_t>({0}, {1})",
    "IntTrueDiv": "(static_cast<double>({0}) / {1})",
    "WrapIndex": "dicp::wrap_index<int64_t>({0}, {1})",
    "Narrow32": "static_cast<int32_t>({0})",
    "PythonMod": _typed("dicp::pymod<{T}>({0}, {1})"),
    "Mod": _typed("dicp::pymod<{T}>({0}, {1})"),
    "ModularIndexing": "(({0} / {1}) % {2})",
    "Max": _typed("dicp::max_of<{T}>({args})"),
    "Min": _typed("dicp::min_of<{T}>({args})"),
    "FloatTrueDiv": "(static_cast<double>({0}) / {1})",
    "ToFloat": "static_cast<double>({0})",
    "FloatPow": "std::pow(static_cast<double>({0}), {1})",
    "PowByNatural": "dicp::ipow<int64_t>({0}, {1})",
    "OpaqueUnaryFn_sqrt": "std::sqrt(static_cast<double>({0}))",
    "TruncToInt": "static_cast<int64_t>({0})",
    "floor": "static_cast<int64_t>(std::floor({0}))",
    "ceiling": "static_cast<int64_t>(std::ceil({0}))",
    "FloorToInt": "static_cast<int64_t>(std::floor({0}))",
    "CeilToInt": "static_cast<int64_t>(std::ceil({0}))",
    # Python's round: halves to even, as nearbyint in the default rounding mode
    "RoundToInt": "static_cast<int64_t>(std::nearbyint({0}))",
    "TruncToFloat": "std::trunc(static_cast<double>({0}))",
}

cpp_expr = ExprPrinter(CPP_FUNCTIONS, cpp=True)


class CppRenderer(L.Renderer):
    """Prints a kernel's loop IR as C++ lines; `bounds_check` wraps every access in
    dicp::checked (the kernel then takes each pointer's storage extent)."""

    def __init__(self, bounds_check=False):
        self.bounds_check = bounds_check
        self.divides_integers = False  # whether a printed op may divide an integer by zero

    # ---- expressions ----
    def expr_Const(self, value):
        return _constant(value)

    def expr_Index(self, value):
        return cpp_expr(value.expr)

    def expr_Op(self, value):
        if value.name in INTEGER_DIVISIONS and value.type not in ("float", "double"):
            self.divides_integers = True
        args = [self.expr(a) for a in value.args]
        return OPS[value.name].format(*args, T=value.type, P=value.param)

    def expr_Load(self, value):
        return f"dicp::cast<{value.type}>({self._element(value)})"

    def _element(self, access):
        position = cpp_expr(access.position)
        if not self.bounds_check:
            return f"{access.pointer}[{position}]"
        pointer = access.pointer
        return (
            f'(*dicp::checked({pointer}, {position}, {pointer}_lo, {pointer}_hi, "{access.site}"))'
        )

    # ---- statements ----
    def statement_Let(self, s):
        return [f"const {s.var.type} {s.var.name} = {self.expr(s.value)};"]

    def statement_Declare(self, s):
        var = s.var
        align = "alignas(64) " if s.aligned else ""
        if var.dims:
            extents = "".join(f"[{d}]" for d in var.dims)
            zeros = " = {}" if s.init == "zeros" else ""
            return [f"{align}{var.type} {var.name}{extents}{zeros};"]
        init = "" if s.init is None else f" = {self.expr(s.init)}"
        return [f"{align}{var.type} {var.name}{init};"]

    def statement_Assign(self, s):
        operator = f"{s.combine}=" if s.combine else "="
        return [f"{self.expr(s.target)} {operator} {self.expr(s.value)};"]

    def statement_Store(self, s):
        return [f"{self._element(s)} = dicp::cast<{s.storage}>({self.expr(s.value)});"]

    def statement_If(self, s, keyword="if"):
        lines = [f"{keyword} ({_bare(self.expr(s.condition))}) {{", *self.lines(s.body, "  ")]
        if len(s.orelse) == 1 and isinstance(s.orelse[0], L.If):
            return lines + self.statement_If(s.orelse[0], "} else if")
        if s.orelse:
            lines += ["} else {", *self.lines(s.orelse, "  ")]
        return lines + ["}"]

    def statement_Loop(self, s):
        if s.parallel and s.simd is not None and s.chunk is None:  # one loop, both
            pragmas, simd = self._parallel(s.parallel, s.simd), []
        else:
            pragmas = self._parallel(s.parallel) if s.parallel else []
            simd = self._simd(s.simd) if s.simd is not None else []
        var, lo, hi = s.var.name, self.expr(s.lo), self.expr(s.hi)
        body = self.lines(s.body, "  ")
        if s.chunk is None:
            return [*pragmas, *simd, self._for(var, lo, hi, s.until), *body, "}"]
        size, start = cpp_expr(s.chunk.size), L.chunk_start(var)
        inner = self._for(var, start, f"std::min<int64_t>({start} + {size}, {hi})", s.until)
        return [
            *pragmas,
            f"for (int64_t {start} = {lo}; {start} < {hi}; {start} += {size}) {{",
            *self.lines(s.chunk.open, "  "),
            *("  " + line for line in [*simd, inner, *body, "}"]),
            *self.lines(s.chunk.close, "  "),
            "}",
        ]

    def _for(self, var, lo, hi, until=None):
        stop = f" && !{until.name}" if until is not None else ""
        return f"for (int64_t {var} = {lo}; {var} < {hi}{stop}; ++{var}) {{"

    def _parallel(self, parallel, simd=None):
        """`omp parallel for`; with `simd` (reduction clauses) `omp parallel for simd`, whose
        `if` applies to its threads only (OpenMP 5's unnamed `if` would turn off its lanes
        too)."""
        collapse = f" collapse({parallel.collapse})" if parallel.collapse > 1 else ""
        if simd is None:
            construct, condition = "parallel for", ""
        else:
            construct, condition = "parallel for simd", "parallel: "
            collapse += "".join(f" reduction({c})" for c in simd.split())
        return [
            f"#pragma omp {construct}{collapse} if({condition}{self.expr(parallel.work)} >= "
            f"{parallel.threshold})"
        ]

    def _simd(self, clauses):
        return ["#pragma omp simd" + "".join(f" reduction({c})" for c in clauses.split())]

    # ---- kernels ----
    def kernel(self, kernel) -> str:
        """The C++ of a whole kernel (loop_ir.Kernel): its signature and body in the file
        skeleton kernel.cpp.j2."""
        return render(
            "kernel.cpp.j2",
            name=kernel.name,
            parameters=self.parameters(kernel),
            body=self._unless_onto_itself(kernel) + self.lines(kernel.body),
        )

    @staticmethod
    def _unless_onto_itself(kernel) -> list:
        """A copy kernel's return where its source is its destination (L.copy_onto)."""
        pair = L.copy_onto(kernel)
        if pair is None:
            return []
        destination, source = pair
        return [
            f"if (static_cast<const void*>({destination}) == static_cast<const void*>({source}))",
            "  return;  // the copy is onto itself",
        ]

    def parameters(self, kernel) -> list:
        """The C++ parameters of a kernel: its pointers, its sizes, and with bounds checks
        each pointer's storage extent."""
        pointers = [
            f"{self.pointer_type(p.ctype, p.writable)}"
            f"{' __restrict__' if p.restrict else ''} {p.name}"
            for p in kernel.params
        ]
        extents = [
            f"int64_t {p.name}_{end}"
            for p in kernel.params
            for end in ("lo", "hi")
            if kernel.extents
        ]
        return pointers + [f"int64_t {s}" for s in kernel.sizes] + extents

    @staticmethod
    def pointer_type(ctype, writable):
        """The C++ type of a pointer to elements of `ctype`."""
        return f"{'' if writable else 'const '}{ctype}*"

    # ---- native entries (native_entry.py) ----
    def entry(self, entry) -> str:
        """The C++ of a graph's native entries (native_entry.NativeEntry) in the skeleton
        graph_entry.cpp.j2: each segment's function calling its steps in order."""
        segments = [
            (
                s.function,
                self._entry_parameters(s, entry.bounds_check),
                [self.step(step) for step in s.steps],
            )
            for s in entry.segments
        ]
        external = [
            (name, [self.pointer_type(p.ctype, p.writable) for p in params] + ["int64_t"] * ints)
            for name, (params, ints) in entry.external.items()
        ]
        return render(
            "graph_entry.cpp.j2",
            segments=segments,
            products=entry.products,
            external=external,
            bounds_check=entry.bounds_check,
        )

    def _entry_parameters(self, segment, bounds_check):
        """Byte pointers to the roots, the size variables, with bounds checks each root's
        storage extent (`lo_<root>`, `hi_<root>`)."""
        extents = [f"int64_t {bound}_{root}" for root in segment.roots for bound in ("lo", "hi")]
        return (
            [f"char* {root}" for root in segment.roots]
            + [f"int64_t {p}" for p in segment.params]
            + (extents if bounds_check else [])
        )

    def step(self, step) -> str:
        return getattr(self, f"step_{type(step).__name__}")(step)

    def step_KernelStep(self, s):
        arguments = [
            f"reinterpret_cast<{self.pointer_type(p.ctype, p.writable)}>({_address(pointer)})"
            for p, pointer in s.pointers
        ]
        arguments += list(s.sizes)
        if s.extents:
            arguments += [bound for _, pointer in s.pointers for bound in _extent(pointer)]
        return f"{s.function}({', '.join(arguments)});"

    def step_SideBySide(self, s):
        """Independent kernels (side_by_side.py): a parallel loop over them, each taken by the
        next free thread."""
        cases = [f"    case {i}: {self.step(step)} break;" for i, step in enumerate(s.steps)]
        lines = [
            "#pragma omp parallel for schedule(dynamic, 1)",
            f"for (int64_t task = 0; task < {len(s.steps)}; ++task) {{",
            "  switch (task) {",
            *cases,
            "  }",
            "}",
        ]
        return "\n  ".join(lines)

    def step_ProductStep(self, s):
        """graph_entry.cpp.j2's `product`; with checks, run only where every element each
        operand spans lies in its storage (the first one outside is reported, as a kernel's
        access is)."""
        bias = f"reinterpret_cast<const float*>({_address(s.bias)})" if s.bias else "nullptr"
        call = (
            f"product({', '.join(map(_integer, s.shape))}, {_operand(s.a, 'const float*')}, "
            f"{_operand(s.b, 'const float*')}, {bias}, "
            f"reinterpret_cast<float*>({_address(s.out.pointer)}), {_integer(s.out.ld)}, "
            f"{_integer(s.out.step)});"
        )
        if not s.checks:
            return call
        site = f"product {s.number} of this entry, operand"
        checks = [
            f"matrix_in_bounds({', '.join(map(_integer, (*shape, m.ld, m.step)))}, "
            f"{str(m.transposed).lower()}, {', '.join(_extent(m.pointer))}, "
            f'"{site} {role}")'
            for role, m, shape in s.checks
        ]
        return f"if ({' & '.join(checks)}) {call}"


def _constant(const):
    if const.value in ("lowest", "highest"):
        limit = "lowest" if const.value == "lowest" else "max"
        return f"std::numeric_limits<{const.type}>::{limit}()"
    if (
        isinstance(const.value, float)
        and math.isinf(const.value)
        and const.type not in ("float", "double")
    ):
        return _constant(L.Const("lowest" if const.value < 0 else "highest", const.type))
    return _literal(const.value, const.type)


def _bare(condition):
    """A condition without the parentheses `if` adds itself."""
    if condition.startswith("(") and condition.endswith(")") and _balanced(condition[1:-1]):
        return condition[1:-1]
    return condition


def _balanced(text):
    depth = 0
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0


def _literal(value, ctype):
    """A Python number as a C++ literal of `ctype` (never a symbolic size: int() on one
    would specialize it and make dynamo recompile for every new size)."""
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        raise TypeError(f"symbolic value {value} reached a C++ literal; pass it as sympy")
    if isinstance(value, bool) or ctype == "bool":
        return "true" if value else "false"
    if isinstance(value, float) and ctype in INTEGER_CTYPES and math.isfinite(value):
        # C++ leaves a float outside the target's range undefined (g++ folds -4.0 into
        # uint8_t to 0); eager converts through int64, truncating, then wraps
        value = int(value)
    if isinstance(value, float):
        if math.isnan(value):
            return f"std::numeric_limits<{ctype}>::quiet_NaN()"
        if math.isinf(value):
            sign = "-" if value < 0 else ""
            return f"{sign}std::numeric_limits<{ctype}>::infinity()"
        return f"static_cast<{ctype}>({value!r})"
    return f"static_cast<{ctype}>({int(value)}LL)"


def _integer(value):
    """An int or a polynomial in size variables as C++ (an entry's int64 parameters)."""
    value = sympy.sympify(value)
    return str(int(value)) if value.is_Integer else cpp_expr(value)


def _address(pointer):
    """A native entry's pointer (native_entry.Pointer): its root's bytes at its offset."""
    return f"{pointer.root} + {_integer(pointer.offset)}"


def _operand(operand, ctype):
    """A product's matrix: its address, whether it is transposed, its ld and step."""
    return (
        f"reinterpret_cast<{ctype}>({_address(operand.pointer)}), "
        f"{str(operand.transposed).lower()}, {_integer(operand.ld)}, {_integer(operand.step)}"
    )


def _extent(pointer):
    """C++ for [lo, hi): the elements of `pointer`'s storage around it, from its root's
    extent, which the entry takes after its size variables (`lo_<root>`, `hi_<root>`)."""
    elements = sympy.expand(sympy.sympify(pointer.offset) / pointer.dtype.itemsize)
    shift = "" if elements == 0 else f" - ({_integer(elements)})"
    return tuple(f"{bound}_{pointer.root}{shift}" for bound in ("lo", "hi"))
