"""The loop IR of a kernel: typed expressions and statements, no target's syntax.

Lowerings build it through `KernelBuilder` (kernel.py); a renderer prints it (cpp_render.py
prints C++). Expressions are frozen dataclasses, so two equal expressions are one value: the
builder removes common subexpressions by looking them up in a dict, never by comparing text.

Types are the names of the kernel's element types ("float", "double", "int64_t", "bool", ...,
and the storage types "dicp::half_t" and "dicp::bf16_t" that half values load from and store
to): `ctypes_map` maps dtypes to them, and a renderer maps them to its target's types.

Operands of an `Op` are atoms: a `Var` (a statement's result, a mutable local, an array), a
`Const` (a number of a type) or an `Index` (integer arithmetic over loop variables and sizes, a
sympy expression). An `Op` is one row of the renderer's table (`cpp_render.OPS`), named after
the vendor op it computes where there is one ("Exp", "Add") and after what it does otherwise
("Cast", "RoundTo").
"""

from dataclasses import dataclass
from typing import Any

import sympy


# ---- expressions ---------------------------------------------------------------------


@dataclass(frozen=True)
class Var:
    """A named value of a kernel: a statement's result, a mutable local (an accumulator) or a
    local array (`dims` its extents)."""

    name: str
    type: str
    dims: tuple = ()


@dataclass(frozen=True, eq=False)
class Const:
    """A number (bool, int or float; inf and NaN too) as a value of `type`. Two are equal
    when they print alike: -0.0 == 0.0 in Python, and merging them made x + -0.0 reuse
    x + 0.0 (clamp(x, min=-0.0) and clamp(x, min=0.0) in one kernel)."""

    value: Any
    type: str

    def _key(self):
        return self.type, type(self.value).__name__, repr(self.value)

    def __eq__(self, other):
        return isinstance(other, Const) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())


@dataclass(frozen=True)
class Index:
    """Integer (int64) arithmetic over loop variables, size symbols and computed indices."""

    expr: Any
    type: str = "int64_t"


@dataclass(frozen=True)
class Op:
    """`name` applied to `args`, a value of `type`; `param` is the type an op is written for
    when it is not `type` (the half type RoundTo rounds through, a comparison's operator)."""

    name: str
    type: str
    args: tuple
    param: str = ""


@dataclass(frozen=True)
class Load:
    """The element at flat `position` of pointer parameter `pointer` (storage type
    `storage`), as a value of `type`. `site` names the access for bounds checks."""

    pointer: str
    position: Any
    storage: str
    type: str
    site: str = ""


@dataclass(frozen=True)
class Element:
    """An element of local array `array` at `indices` (one Index or Var per dim)."""

    array: Var
    indices: tuple

    @property
    def type(self):
        return self.array.type


# ---- statements ----------------------------------------------------------------------


@dataclass(frozen=True)
class Let:
    """`var` is `value` from here on (a constant)."""

    var: Var
    value: Any


@dataclass(frozen=True)
class Declare:
    """A mutable local `var`, `init` its first value (None: none yet; for an array, "zeros"
    sets every element to 0). `aligned` asks for cache-line alignment."""

    var: Var
    init: Any = None
    aligned: bool = False


@dataclass(frozen=True)
class Assign:
    """`target` (a Var or an Element) becomes `value`; `combine` ("|", "+") makes it
    target combine value."""

    target: Any
    value: Any
    combine: str = ""


@dataclass(frozen=True)
class Store:
    """`value` converted to `storage` into pointer parameter `pointer` at flat `position`."""

    pointer: str
    position: Any
    storage: str
    value: Any
    site: str = ""


@dataclass(frozen=True)
class If:
    """`body` where `condition` holds, else `orelse`."""

    condition: Any
    body: tuple
    orelse: tuple = ()


@dataclass(frozen=True)
class Parallel:
    """The loop and the `collapse` - 1 loops directly inside it are shared among threads,
    where the kernel's `work` (an Index: elements times inner iterations) reaches
    `threshold`; below it one thread costs less."""

    collapse: int
    work: Any
    threshold: int


@dataclass(frozen=True)
class Chunk:
    """A loop run in chunks of `size` iterations (a sympy expression; lowering_reduce's
    SUM_CHUNK names a macro of the runtime header): `open` (statements) before each chunk,
    `close` after it. A float sum accumulates each chunk in float at the full vector width and
    adds the chunk's total to its double accumulator. With `total` (the float Var the body
    sums into) and `exact` (a double Var), `close` reads the chunk's sum from `exact`, which
    scheduling (loops.py) sets through `exact_pass`."""

    size: int
    open: tuple
    close: tuple
    total: Any = None
    exact: Any = None


def chunk_start(var: str) -> str:
    """The name renderers give the first iteration of a chunk of loop `var`."""
    return f"{var}_chunk"


FLOAT_MAX = 3.4028234663852886e38


def exact_pass(chunk, var, hi, body) -> Chunk:
    """`chunk` of loop `var` (below Index `hi`, running `body`) with `exact` set before its
    close: the float total, or, where that is not finite, the chunk summed again in double.
    A variance's squares sum in float chunks (ReduceSum's rounded_to), and a chunk of squares
    of 1.5e19 passes float's 3.4e38 where the double sum, divided into a variance of 5e36, does
    not. An inf or NaN among the values gives the same again. One comparison a chunk
    otherwise. (A square that itself passes float's range, of a deviation past 1.8e19, stays
    inf.)"""
    total, exact = chunk.total, chunk.exact
    start = sympy.Symbol(chunk_start(var.name), integer=True)
    again = Loop(
        Var(var.name, "int64_t"),
        Index(start),
        Index(sympy.Min(start + chunk.size, hi.expr)),
        _summing_into(body, total, exact),
    )
    finite = Op("Le", "bool", (total, Const(FLOAT_MAX, total.type)))
    first = (
        Declare(exact, Op("StaticCast", exact.type, (total,))),
        If(Op("LogicalNot", "bool", (finite,)), (Assign(exact, Const(0, exact.type)), again)),
    )
    return Chunk(chunk.size, chunk.open, (*first, *chunk.close))


def _summing_into(statements, total, exact) -> tuple:
    """`statements` with their sum into float `total` made a sum into double `exact`."""
    out = []
    for s in statements:
        if isinstance(s, Assign) and s.target == total:
            summed, value = s.value.args
            assert s.value.name == "Add" and summed == total and not s.combine
            s = Assign(
                exact, Op("Add", exact.type, (exact, Op("StaticCast", exact.type, (value,))))
            )
        elif isinstance(s, If):
            body, orelse = (_summing_into(b, total, exact) for b in (s.body, s.orelse))
            s = If(s.condition, body, orelse)
        out.append(s)
    return tuple(out)


@dataclass(frozen=True)
class Loop:
    """`var` from `lo` up to below `hi` (Index expressions) around `body`, with its schedule:
    `parallel` (a Parallel: threads share it), `simd` (None: scalar; else vectorized, with
    these reduction clauses, space separated: "+:acc max:m"), `chunk` (a Chunk: run in chunks,
    `simd` applying within one), `until` (a bool Var: stop early once it holds). Scheduling
    (loops.plan_loops) sets them from the kernel's accesses; renderers only print them."""

    var: Var
    lo: Any
    hi: Any
    body: tuple
    until: Any = None
    parallel: Any = None
    simd: Any = None
    chunk: Any = None


STATEMENTS = (Let, Declare, Assign, Store, If, Loop)


# ---- kernels ---------------------------------------------------------------------------


@dataclass
class Param:
    """A pointer parameter of a kernel: elements of storage type `ctype` of wrapper variable
    `base`; `writable` when the kernel stores through it, `restrict` when no other pointer
    of the kernel reaches its elements (see KernelBuilder.params_of)."""

    name: str
    ctype: str
    base: str
    writable: bool = False
    restrict: bool = False


@dataclass(frozen=True)
class Kernel:
    """A whole kernel: pointer `params`, int64 `sizes` (size symbols), with `extents` each
    pointer's storage extent after them (bounds checks), and its `body` statements."""

    name: str
    params: tuple
    sizes: tuple
    extents: bool
    body: tuple


def operands(value):
    """The atoms an expression reads."""
    if isinstance(value, Op):
        return value.args
    if isinstance(value, Element):
        return (value.array, *value.indices)
    return ()


def walk(statements):
    """Every statement, nested ones included, in order."""
    for statement in statements:
        yield statement
        if isinstance(statement, (If, Loop)):
            yield from walk(statement.body)
        if isinstance(statement, If):
            yield from walk(statement.orelse)


def copy_onto(kernel):
    """(destination, source) pointer names where `kernel` does nothing but copy `source` into
    `destination` element for element, each store at the position of its load, in one storage
    type; else None. Such a kernel changes nothing when the two are the same memory: a
    scatter's target, copied from the graph input that the copy elision then makes its memory
    (a key and value cache's index_put: the whole cache copied onto itself at each token)."""
    if len(kernel.params) != 2:
        return None
    loads, stores = {}, []
    for statement in walk(kernel.body):
        if isinstance(statement, Let) and isinstance(statement.value, Load):
            loads[statement.var] = statement.value
        elif isinstance(statement, Store):
            stores.append(statement)
        elif not isinstance(statement, Loop):
            return None
    if len(stores) != len(loads) or not all(_copied(s, loads) for s in stores):
        return None
    pairs = {(s.pointer, loads[s.value].pointer) for s in stores}
    return pairs.pop() if len(pairs) == 1 else None


def _copied(store, loads):
    load = loads.get(store.value)
    return (
        load is not None
        and load.position == store.position
        and load.storage == store.storage
        and load.pointer != store.pointer
    )


def computed_ops(statements):
    """The name of every op that `statements` compute into a local, nested ones included."""
    return (
        s.value.name for s in walk(statements) if isinstance(s, Let) and isinstance(s.value, Op)
    )


class Renderer:
    """A printer of the IR: `expr` and `statement` dispatch on the node's class to the
    subclass's `expr_<Class>` and `statement_<Class>` (one method per node kind, as torch.fx's
    Interpreter dispatches on node.op); `lines` prints statements with `indent`."""

    def expr(self, value) -> str:
        method = getattr(self, f"expr_{type(value).__name__}", None)
        if method is None:
            raise TypeError(f"not a loop IR expression: {value!r}")
        return method(value)

    def statement(self, s) -> list:
        method = getattr(self, f"statement_{type(s).__name__}", None)
        if method is None:
            raise TypeError(f"not a loop IR statement: {s!r}")
        return method(s)

    def lines(self, statements, indent="") -> list:
        return [indent + line for s in statements for line in self.statement(s)]

    def expr_Var(self, value):
        return value.name

    def expr_Element(self, value):
        return value.array.name + "".join(f"[{self.expr(i)}]" for i in value.indices)
