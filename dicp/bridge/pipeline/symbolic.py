"""Sizes as sympy expressions.

torch exposes a symbolic size's expression only through `SymInt.node.expr`, a private
attribute; this module is the one place that reads it.
"""

from typing import Any

import sympy
import torch

# FX warns when a node argument is a raw SymInt/SymFloat/SymBool; in dicp's vendor graphs
# symbolic sizes and scalars are legitimate op arguments (codegen turns them into sympy
# expressions), so the passes that build such nodes silence it (a regex for filterwarnings).
RAW_SYMBOLIC_WARNING = "Raw Sym(Int|Float|Bool) value"


def to_sympy(value):
    """An int, SymInt or sympy expression as a sympy expression."""
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return sympy.sympify(value.node.expr)
    if isinstance(value, bool):
        return sympy.Integer(int(value))
    if isinstance(value, int):
        return sympy.Integer(value)
    if isinstance(value, float):
        return sympy.Float(value)
    if isinstance(value, sympy.Basic):
        return value
    raise TypeError(f"not a size: {value!r}")


def is_symbolic(value) -> bool:
    return isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool, sympy.Basic))


def shape_of(fake):
    return [to_sympy(s) for s in fake.shape]


def strides_of(fake):
    return [to_sympy(s) for s in fake.stride()]


def without_unit_max(expr):
    """`expr` with every Max(1, e) replaced by e. torch spells symbolic contiguous strides as
    products of Max(1, size) so that an empty dim does not zero a stride; in a tensor with
    elements every size is at least 1, and an empty tensor has no element to address."""
    expr = sympy.sympify(expr)
    # by name: torch's shape environment has its own Max class (a private module)
    return expr.replace(
        lambda e: e.func.__name__ == "Max" and len(e.args) == 2 and 1 in e.args,
        lambda e: e.args[0] if e.args[1] == 1 else e.args[1],
    )


def same_size(a, b):
    """Whether two size or stride expressions are equal for every tensor with elements."""
    return sympy.expand(without_unit_max(a) - without_unit_max(b)) == 0


def same_layout(sizes, strides, expected):
    """Whether two stride lists address the same elements (dims of size 1 never move)."""
    return all(size == 1 or same_size(a, b) for size, a, b in zip(sizes, strides, expected))


def last_offset(sizes, strides):
    """The offset of a layout's last element from its first (non-negative strides); only a
    layout with elements has one."""
    return sum(((size - 1) * stride for size, stride in zip(sizes, strides)), 0)


def storage_span(sizes, strides):
    """How many elements a layout spans from its first: none for an empty layout, where
    `1 + last_offset` may go negative ((2, 0) with strides (1, 6): -4). A size only known at
    run time may be 0: Max bounds that case from below."""
    if any(size == 0 for size in sizes):
        return sympy.Integer(0)
    return sympy.Max(0, 1 + last_offset(sizes, strides))


def may_overlap(sizes, strides) -> bool:
    """Whether two elements of a layout may share an address (an expanded dim, unfold's
    overlapping windows): taken by stride, each dim's stride must pass the span of the dims
    before it. A layout with a symbolic size or stride is proved apart only when dense."""
    if not all(sympy.sympify(v).is_Integer for v in (*sizes, *strides)):
        return not is_dense(sizes, strides) and not any(size == 0 for size in sizes)
    if 0 in sizes:
        return False
    span = 0  # the last element the dims taken so far reach
    for stride, size in sorted(
        (abs(int(stride)), int(size)) for size, stride in zip(sizes, strides) if size > 1
    ):
        if stride <= span:
            return True
        span += (size - 1) * stride
    return False


def is_dense(sizes, strides):
    """Whether the layout fills its storage exactly, each element at an address of its own:
    some order of the dims has contiguous strides (dims of size 1 may have any stride; an
    expanded dim, stride 0, fails). Compared as sympy, so no guards."""
    dims = [d for d, size in enumerate(sizes) if size != 1]
    expected = sympy.Integer(1)
    while dims:
        match = next((d for d in dims if same_size(strides[d], expected)), None)
        if match is None:
            return False
        dims.remove(match)
        expected = expected * sizes[match]
    return True


# torch's symbolic functions (and the index functions backends define), by class name, as
# Python: matched by name so that no private torch module is imported.
PYTHON_FUNCTIONS = {
    "WrapIndex": "(({0}) + ({1}) if ({0}) < 0 else ({0}))",
    "Narrow32": "({0})",
    "IDiv": "({0} // {1})",
    "IMod": "({0} % {1})",
    "FloorDiv": "({0} // {1})",
    "CleanDiv": "({0} // {1})",
    "CeilDiv": "(-(-({0}) // ({1})))",
    "IntTrueDiv": "({0} / {1})",
    "PythonMod": "({0} % {1})",
    "Mod": "({0} % {1})",
    "ModularIndexing": "(({0} // {1}) % {2})",
    "Max": "max({args})",
    "Min": "min({args})",
    "FloatTrueDiv": "({0} / {1})",
    "ToFloat": "float({0})",
    "FloatPow": "({0} ** {1})",
    "PowByNatural": "({0} ** {1})",
    "OpaqueUnaryFn_sqrt": "math.sqrt({0})",
    "TruncToInt": "int({0})",
    "floor": "math.floor({0})",
    "ceiling": "math.ceil({0})",
    "FloorToInt": "math.floor({0})",
    "CeilToInt": "math.ceil({0})",
    "RoundToInt": "round({0})",
    "TruncToFloat": "float(math.trunc({0}))",
}


class UnsupportedExpression(NotImplementedError):
    """A size expression uses a function the printer has no template for."""


class ExprPrinter:
    """Prints integer sympy expressions with `functions` (class name -> template over the
    printed arguments `{0}`, `{1}`, ... or `{args}`, or a function of the expression and its
    printed arguments); `cpp` marks C++ literals."""

    def __init__(self, functions, cpp=False):
        self.functions, self.cpp = functions, cpp

    def __call__(self, expr) -> str:
        expr = sympy.sympify(expr)
        if expr.is_Integer:
            return f"{int(expr)}L" if self.cpp else str(int(expr))
        if expr.is_Symbol:
            return expr.name
        if expr.is_Add:
            return "(" + " + ".join(self(a) for a in expr.args) + ")"
        if expr.is_Mul:
            return "(" + " * ".join(self(a) for a in expr.args) + ")"
        if expr.is_Pow and expr.exp.is_Integer and expr.exp > 0:
            return "(" + " * ".join([self(expr.base)] * int(expr.exp)) + ")"
        if expr.is_Float:
            return repr(float(expr))
        if expr.is_Rational:
            return f"({expr.p}.0 / {expr.q})" if self.cpp else f"({expr.p} / {expr.q})"
        return self._function(expr)

    def _function(self, expr):
        name = type(expr).__name__
        if name not in self.functions:
            raise UnsupportedExpression(f"cannot print size expression {expr} ({name})")
        args = [self(a) for a in expr.args]
        template = self.functions[name]
        if callable(template):
            return template(expr, args)
        return template.format(*args, args=", ".join(args))


py_expr = ExprPrinter(PYTHON_FUNCTIONS)


def size_hints(fake_mode) -> dict:
    """Size variable name -> (the value the graph was traced with, the least value its guards
    allow, None if it may be negative); none without a shape env."""
    env = getattr(fake_mode, "shape_env", None)
    if env is None:
        return {}
    hints = {}
    for symbol, value in example_values(env).items():
        lower: Any = getattr(env.var_to_range.get(symbol), "lower", None)
        if getattr(value, "is_integer", False) or isinstance(value, int):
            known = getattr(lower, "is_integer", False) and lower.is_finite and lower >= 0
            hints[str(symbol)] = (int(value), int(lower) if known else None)
    return hints


def example_values(env) -> dict:
    # torch 2.13 renamed var_to_val (now deprecated) to backed_var_to_val
    values = getattr(env, "backed_var_to_val", None)
    return values if values is not None else env.var_to_val


def input_symbol(value):
    """The symbol a SymInt graph input stands for, or None when it is an expression or a
    size only known after a data-dependent op (unbacked): those inputs cannot be bound by a
    guard over the inputs alone."""
    expr = value.node.expr
    env = value.node.shape_env
    if isinstance(expr, sympy.Symbol) and env is not None and expr in example_values(env):
        return expr
    return None


def free_symbols(values) -> set:
    """The symbols that the SymInts among `values` use."""
    return {
        s
        for v in values
        if isinstance(v, torch.SymInt)
        for s in sympy.sympify(v.node.expr).free_symbols
    }


def shape_env_of(values):
    """The shape environment of the first SymInt among `values`, or None."""
    return next((v.node.shape_env for v in values if isinstance(v, torch.SymInt)), None)
