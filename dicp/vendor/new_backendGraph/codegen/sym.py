"""Index arithmetic and the printers that turn sympy sizes into C++ or Python."""
import sympy


class IDiv(sympy.Function):
    """Floor division of non-negative integers (index arithmetic)."""
    is_integer = True

    @classmethod
    def eval(cls, a, b):
        if b == 1:
            return a
        if a == 0:
            return sympy.Integer(0)
        if a.is_Integer and b.is_Integer:
            return sympy.Integer(int(a) // int(b))
        return None


class IMod(sympy.Function):
    """Remainder of non-negative integers (index arithmetic)."""
    is_integer = True

    @classmethod
    def eval(cls, a, b):
        if b == 1 or a == 0:
            return sympy.Integer(0)
        if a.is_Integer and b.is_Integer:
            return sympy.Integer(int(a) % int(b))
        return None


class WrapIndex(sympy.Function):
    """An ATen index or slice bound counted from the end when negative: `index + size` if
    `index < 0`, else `index`. Under dynamic shapes an index argument is a symbol whose sign
    is only known when the kernel runs."""
    is_integer = True

    @classmethod
    def eval(cls, index, size):
        if index.is_nonnegative:
            return index
        if index.is_negative:
            return index + size
        return None


def wrap_index(index, size):
    """`index` (ATen's convention: negative counts from the end) as a position in [0, size)."""
    return WrapIndex(sympy.sympify(index), sympy.sympify(size))


def clamp_bound(bound, size):
    """A slice bound as ATen takes it: wrapped when negative, then clamped to [0, size]."""
    return sympy.Min(sympy.Max(wrap_index(bound, size), 0), sympy.sympify(size))


def index_var(prefix, i):
    return sympy.Symbol(f"{prefix}{i}", integer=True, nonnegative=True)


def loop_index(rank, prefix="i"):
    """The loop variables of a kernel's outer ("i") or inner ("r") loops."""
    return [index_var(prefix, d) for d in range(rank)]


def product(values):
    result = sympy.Integer(1)
    for value in values:
        result = result * value
    return result


def contiguous_strides(sizes):
    strides, running = [], sympy.Integer(1)
    for size in reversed(sizes):
        strides.append(running)
        running = running * size
    return list(reversed(strides))


def without_unit_max(expr):
    """`expr` with every Max(1, e) replaced by e. torch spells symbolic contiguous strides as
    products of Max(1, size) so that an empty dim does not zero a stride; in a tensor with
    elements every size is at least 1, and an empty tensor has no element to address."""
    expr = sympy.sympify(expr)
    # by name: torch's shape environment has its own Max class (a private module)
    return expr.replace(lambda e: e.func.__name__ == "Max" and len(e.args) == 2 and 1 in e.args,
                        lambda e: e.args[0] if e.args[1] == 1 else e.args[1])


def same_size(a, b):
    """Whether two size or stride expressions are equal for every tensor with elements."""
    return sympy.expand(without_unit_max(a) - without_unit_max(b)) == 0


def same_layout(sizes, strides, expected):
    """Whether two stride lists address the same elements (dims of size 1 never move)."""
    return all(size == 1 or same_size(a, b) for size, a, b in zip(sizes, strides, expected))


def is_dense(sizes, strides):
    """Whether the layout fills its storage exactly: some order of the dims has contiguous
    strides (dims of size 1 may have any stride). Compared as sympy, so no guards."""
    dims = [d for d, size in enumerate(sizes) if size != 1]
    expected = sympy.Integer(1)
    while dims:
        match = next((d for d in dims if same_size(strides[d], expected)), None)
        if match is None:
            return False
        dims.remove(match)
        expected = expected * sizes[match]
    return True


def flat_index(index, strides):
    return sympy.expand(sum((i * s for i, s in zip(index, strides)), sympy.Integer(0)))


def unflatten(flat, sizes):
    """Per-dim indices of a row-major position `flat` over `sizes`."""
    strides = contiguous_strides(sizes)
    return [IMod(IDiv(flat, stride), size) if i else IDiv(flat, stride)
            for i, (size, stride) in enumerate(zip(sizes, strides))]


# Function name -> (C++ template, Python template). torch's own symbolic functions are
# matched by class name so no private torch module is imported.
_FUNCTIONS = {
    "IDiv": ("({0} / {1})", "({0} // {1})"),
    "IMod": ("({0} % {1})", "({0} % {1})"),
    "FloorDiv": ("dicp::floordiv<int64_t>({0}, {1})", "({0} // {1})"),
    "CleanDiv": ("({0} / {1})", "({0} // {1})"),
    "CeilDiv": ("dicp::ceildiv<int64_t>({0}, {1})", "(-(-({0}) // ({1})))"),
    "IntTrueDiv": ("(static_cast<double>({0}) / {1})", "({0} / {1})"),
    "WrapIndex": ("dicp::wrap_index<int64_t>({0}, {1})", "({0} + {1} if {0} < 0 else {0})"),
    "PythonMod": ("dicp::pymod<int64_t>({0}, {1})", "({0} % {1})"),
    "Mod": ("dicp::pymod<int64_t>({0}, {1})", "({0} % {1})"),
    "ModularIndexing": ("(({0} / {1}) % {2})", "(({0} // {1}) % {2})"),
    "Max": ("dicp::max_of<int64_t>({args})", "max({args})"),
    "Min": ("dicp::min_of<int64_t>({args})", "min({args})"),
    "FloatTrueDiv": ("(static_cast<double>({0}) / {1})", "({0} / {1})"),
    "ToFloat": ("static_cast<double>({0})", "float({0})"),
    "FloatPow": ("std::pow(static_cast<double>({0}), {1})", "({0} ** {1})"),
    "PowByNatural": ("dicp::ipow<int64_t>({0}, {1})", "({0} ** {1})"),
    "OpaqueUnaryFn_sqrt": ("std::sqrt(static_cast<double>({0}))", "math.sqrt({0})"),
    "TruncToInt": ("static_cast<int64_t>({0})", "int({0})"),
    "floor": ("static_cast<int64_t>(std::floor({0}))", "math.floor({0})"),
    "ceiling": ("static_cast<int64_t>(std::ceil({0}))", "math.ceil({0})"),
    "FloorToInt": ("static_cast<int64_t>(std::floor({0}))", "math.floor({0})"),
    "CeilToInt": ("static_cast<int64_t>(std::ceil({0}))", "math.ceil({0})"),
}


class UnsupportedExpression(NotImplementedError):
    pass


class ExprPrinter:
    """Prints integer sympy expressions; `dialect` is 0 for C++, 1 for Python."""

    def __init__(self, dialect):
        self.dialect = dialect

    def __call__(self, expr) -> str:
        expr = sympy.sympify(expr)
        if expr.is_Integer:
            return str(int(expr)) if self.dialect else f"{int(expr)}L"
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
            return f"({expr.p} / {expr.q})" if self.dialect else f"({expr.p}.0 / {expr.q})"
        return self._function(expr)

    def _function(self, expr):
        name = type(expr).__name__
        if name not in _FUNCTIONS:
            raise UnsupportedExpression(f"cannot print size expression {expr} ({name})")
        template = _FUNCTIONS[name][self.dialect]
        args = [self(a) for a in expr.args]
        return template.format(*args, args=", ".join(args))


cpp_expr = ExprPrinter(0)
py_expr = ExprPrinter(1)
