"""The C++ renderer of the loop IR (loop_ir.py): a table from op to C++ (the vendor pointwise
ops' from their rows in pointwise.py), and the printer of statements, loops with their pragmas
and whole kernels. A vendor targeting another language writes another table and printer;
lowerings and scheduling stay as they are.

A template names its operands `{0}`, `{1}`, ... and the op's result type `{T}` and `param`
`{P}`. Index expressions print through `sym.cpp_expr` (the size functions of the runtime
header).
"""
import math

from ..pointwise import POINTWISE
from . import loop_ir as L
from .ctypes_map import literal
from .sym import cpp_expr
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
    "PoolBetter": "({0} && ({3} < 0 || {1} > {2} || dicp::is_nan({1})))",
    "WrapIndex": "dicp::wrap_index<int64_t>({0}, {1})",
    "CheckedIndex": 'dicp::checked_index<int64_t>({0}, {1}, "{P}")',
    "InjectedCompileError": "dicp_injected_compile_error_TESTING_ONLY({0})",
    "ErfCentral": "dicp::erf_central<{T}>({0})",  # erf on (-1, 1) (value_range.py)
    "IPow": "dicp::ipow<{T}>({0}, {1})",          # Pow of integers
    "IMod": "dicp::imod<{T}>({0}, {1})",          # Fmod of integers
}
# The C++ of every loop IR op: the vendor pointwise ops' from their rows, then the loop level's
OPS = {**{row.name: row.cpp for row in POINTWISE}, **LOOP}
# Ops whose integer versions record a zero divisor (dicp_runtime.h, zero_division)
INTEGER_DIVISIONS = {"FloorDiv", "TruncDiv", "Remainder", "IMod"}


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
        return f'(*dicp::checked({pointer}, {position}, {pointer}_lo, {pointer}_hi, ' \
               f'"{access.site}"))'

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
        pragmas = self._parallel(s.parallel) if s.parallel else []
        simd = self._simd(s.simd) if s.simd is not None else []
        var, lo, hi = s.var.name, self.expr(s.lo), self.expr(s.hi)
        body = self.lines(s.body, "  ")
        if s.chunk is None:
            return [*pragmas, *simd, self._for(var, lo, hi, s.until), *body, "}"]
        size = s.chunk.size
        inner = self._for(var, f"{var}_chunk", f"std::min<int64_t>({var}_chunk + {size}, {hi})",
                          s.until)
        return [*pragmas, f"for (int64_t {var}_chunk = {lo}; {var}_chunk < {hi}; "
                f"{var}_chunk += {size}) {{", *self.lines(s.chunk.open, "  "),
                *("  " + line for line in [*simd, inner, *body, "}"]),
                *self.lines(s.chunk.close, "  "), "}"]

    def _for(self, var, lo, hi, until=None):
        stop = f" && !{until.name}" if until is not None else ""
        return f"for (int64_t {var} = {lo}; {var} < {hi}{stop}; ++{var}) {{"

    def _parallel(self, parallel):
        collapse = f" collapse({parallel.collapse})" if parallel.collapse > 1 else ""
        return [f"#pragma omp parallel for{collapse} if({self.expr(parallel.work)} >= "
                f"{parallel.threshold})"]

    def _simd(self, clauses):
        return ["#pragma omp simd" + "".join(f" reduction({c})" for c in clauses.split())]

    # ---- kernels ----
    def kernel(self, kernel) -> str:
        """The C++ of a whole kernel (loop_ir.Kernel): its signature and body in the file
        skeleton kernel.cpp.j2."""
        return render("kernel.cpp.j2", name=kernel.name, parameters=self.parameters(kernel),
                      body=self.lines(kernel.body))

    def parameters(self, kernel) -> list:
        """The C++ parameters of a kernel: its pointers, its sizes, and with bounds checks
        each pointer's storage extent."""
        pointers = [f"{self.pointer_type(p.ctype, p.writable)}"
                    f"{' __restrict__' if p.restrict else ''} {p.name}" for p in kernel.params]
        extents = [f"int64_t {p.name}_{end}" for p in kernel.params for end in ("lo", "hi")
                   if kernel.extents]
        return pointers + [f"int64_t {s}" for s in kernel.sizes] + extents

    @staticmethod
    def pointer_type(ctype, writable):
        """The C++ type of a pointer to elements of `ctype`."""
        return f"{'' if writable else 'const '}{ctype}*"


def _constant(const):
    if const.value in ("lowest", "highest"):
        limit = "lowest" if const.value == "lowest" else "max"
        return f"std::numeric_limits<{const.type}>::{limit}()"
    if isinstance(const.value, float) and math.isinf(const.value) and \
            const.type not in ("float", "double"):
        return _constant(L.Const("lowest" if const.value < 0 else "highest", const.type))
    return literal(const.value, const.type)


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
