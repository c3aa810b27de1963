"""The wrapper as data: the typed statements of a compiled graph's `call(args)`.

Codegen appends statements (`WrapperBuilder`); memory planning (buffer reuse, writing in place,
freeing) runs over them (`wrapper_memory.py`); a renderer prints them last: the Python wrapper
(`wrapper_python.py`), or a backend's own rendering (a native entry running runs of kernel
launches as one C++ function). Nothing reads generated code back.

The statements name no target: an allocation names a device, a kernel call is a launch of a
kernel on pointers and sizes, a library call names the vendor op. Values inside statements are
`Var` (a wrapper variable), `TensorView` (a variable's memory seen through a layout), sympy
sizes over the bound size symbols, Python numbers, strings, dtypes, slices, and lists or tuples
of those.

Each statement says which variables it reads (`reads`) and binds (`binds`); a statement that
binds tensors says so (`binds_tensors`), and only those are freed after their last use.
"""

from dataclasses import dataclass
from typing import Any

import sympy


class Var(str):
    """A wrapper variable name (printed bare, unlike a string argument)."""


@dataclass
class TensorView:
    """Memory a wrapper variable holds, seen with `sizes`, `strides` and an element `offset`
    from its data pointer; the wrapper prints it as that variable or an as_strided view."""

    base: str  # wrapper variable holding the tensor
    dtype: Any
    sizes: list
    strides: list
    offset: Any = 0


def names_in(value) -> set:
    """The wrapper variables and size symbols a statement's value reads."""
    if isinstance(value, Var):
        return {str(value)}
    if isinstance(value, TensorView):
        return (
            {value.base} | names_in(value.sizes) | names_in(value.strides) | names_in(value.offset)
        )
    if isinstance(value, (list, tuple)):
        return set().union(*(names_in(v) for v in value))
    if isinstance(value, dict):
        return names_in(list(value.values()))
    if isinstance(value, slice):
        return names_in([value.start, value.stop, value.step])
    if isinstance(value, sympy.Basic):
        return {s.name for s in value.free_symbols}
    return set()


class Statement:
    """One statement of the wrapper."""

    binds_tensors = True  # what `binds` names are tensors (freed after their last use)

    def reads(self) -> set:
        return set()

    def binds(self) -> tuple:
        return ()

    def variables(self) -> set:
        """Every variable the statement reads or binds (liveness)."""
        return self.reads() | set(self.binds())


# ---- sizes ----------------------------------------------------------------------------


@dataclass(frozen=True)
class SizeOf(Statement):
    """`symbol` is a size (`attribute` "size") or stride ("stride") of tensor `tensor` at
    `dim`: a size symbol bound from the inputs."""

    symbol: str
    tensor: str
    attribute: str
    dim: int
    binds_tensors = False

    def reads(self):
        return {self.tensor}

    def binds(self):
        return (self.symbol,)


@dataclass(frozen=True)
class SetSize(Statement):
    """`symbol` is `expr`, integer arithmetic over bound size symbols and int inputs (a size
    parameter hoisted out of the kernels, or a symbol bound from an int input)."""

    symbol: str
    expr: Any
    binds_tensors = False

    def reads(self):
        return names_in(sympy.sympify(self.expr))

    def binds(self):
        return (self.symbol,)


# ---- memory ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Allocate(Statement):
    """`name` is new memory of `dtype` on `device`, laid out as `sizes` and `strides`; with
    an `offset`, at that element offset into storage of its own (an output's layout)."""

    name: str
    dtype: Any
    sizes: tuple
    strides: tuple
    device: str = "cpu"
    offset: Any = None

    def reads(self):
        return names_in([self.sizes, self.strides, self.offset])

    def binds(self):
        return (self.name,)


@dataclass(frozen=True)
class View(Statement):
    """`name` views `base`: the same tensor (no `sizes`), or its memory with `sizes` and
    `strides` at element `offset` past base's own (`absolute`: from its storage's start)."""

    name: str
    base: str
    sizes: Any = None
    strides: Any = None
    offset: Any = 0
    absolute: bool = False

    def reads(self):
        return {self.base} | names_in([self.sizes, self.strides, self.offset])

    def binds(self):
        return (self.name,)


@dataclass(frozen=True)
class Reuse(Statement):
    """`name` takes the memory of `memory`, which dies here, seen with `sizes` and `strides`
    (`memory`'s own when None): instead of an allocation (`in_place`: a kernel writes its
    output over the input it reads, see WrapperBuilder.offer_in_place)."""

    name: str
    memory: str
    sizes: Any = None
    strides: Any = None
    in_place: bool = False

    def reads(self):
        return {self.memory} | names_in([self.sizes, self.strides])

    def binds(self):
        return (self.name,)


@dataclass(frozen=True)
class StoragesApart(Statement):
    """`name` is whether no tensor of `targets` shares its storage with another of them or
    with one of `others` (aliasing.storages_apart): inputs that did not when traced may when
    run, and a graph computing a new value in its input's memory must then not. `spans`:
    the bytes each of targets and others spans, where the same at every call (static
    shapes): then their memory ranges are tested instead (aliasing.RangesApart)."""

    name: str
    targets: tuple
    others: tuple
    spans: tuple | None = None
    binds_tensors = False

    def reads(self):
        return set(self.targets) | set(self.others)

    def binds(self):
        return (self.name,)


@dataclass(frozen=True)
class InPlaceOf(Statement):
    """`name` is input `target`'s memory where `apart` (a StoragesApart) holds, else new memory
    of its layout, which a CopyBack writes into `target` (wrapper_memory._elide_copies)."""

    name: str
    target: str
    apart: str

    def reads(self):
        return {self.target, self.apart}

    def binds(self):
        return (self.name,)


@dataclass(frozen=True)
class CopyBack(Statement):
    """`target.copy_(name)` unless `name` is `target`'s memory (an InPlaceOf's)."""

    target: str
    name: str
    apart: str

    def reads(self):
        return {self.target, self.name, self.apart}


@dataclass(frozen=True)
class Free(Statement):
    """The memory of `names` is released (the variables are dead)."""

    names: tuple

    def reads(self):
        return set(self.names)


@dataclass(frozen=True)
class Copy(Statement):
    """`source`'s elements are written into tensor `target`."""

    target: str
    source: Any

    def reads(self):
        return {self.target} | names_in(self.source)


# ---- calls ----------------------------------------------------------------------------


@dataclass(frozen=True)
class CallKernel(Statement):
    """A launch of generated kernel `kernel` on the data pointers of `pointers` (wrapper
    variables) and the integers `sizes` (sympy over size symbols); with `extents`, each
    pointer's storage extent follows (DICP_BOUNDS_CHECK)."""

    kernel: str
    pointers: tuple
    sizes: tuple = ()
    extents: bool = False

    def reads(self):
        return set(self.pointers) | names_in(self.sizes)


@dataclass(frozen=True)
class CallLibrary(Statement):
    """`result` = vendor library op `op` (its `kernel`) on `args` and `kwargs` (a matrix
    product, a convolution: the vendor's kernel library)."""

    result: str
    op: str
    args: tuple
    kwargs: tuple = ()  # (name, value) pairs

    def reads(self):
        return names_in(self.args) | names_in([v for _, v in self.kwargs])

    def binds(self):
        return (self.result,)

    def with_kwarg(self, name, value):
        return CallLibrary(self.result, self.op, self.args, (*self.kwargs, (name, value)))


@dataclass(frozen=True)
class CallEager(Statement):
    """`result` = the eager callable `fn` (its name in the wrapper: an ATen op left to eager
    fallback, a graph engine's compiled part, a tensor method) on `args` and `kwargs`."""

    result: str
    fn: str
    args: tuple
    kwargs: tuple = ()

    def reads(self):
        return names_in(self.args) | names_in([v for _, v in self.kwargs])

    def binds(self):
        return (self.result,)


@dataclass(frozen=True)
class Unpack(Statement):
    """`names` are the elements of tuple `source` (a call's several results)."""

    names: tuple
    source: str

    def reads(self):
        return {self.source}

    def binds(self):
        return self.names


@dataclass(frozen=True)
class AsTraced(Statement):
    """`name` is given the strides it was traced with where its own differ (a copy), dims
    of size 1 aside (traced_layout.py)."""

    name: str
    sizes: Any
    strides: Any

    def reads(self):
        return {self.name} | names_in([self.sizes, self.strides])

    def binds(self):
        return (self.name,)


# ---- control --------------------------------------------------------------------------


@dataclass(frozen=True)
class Output:
    """One returned value; `own`: a tensor of its own, never a view (aliasing.py)."""

    value: Any
    own: bool = False


@dataclass(frozen=True)
class Return(Statement):
    outputs: tuple = ()

    def reads(self):
        return names_in([o.value for o in self.outputs])


@dataclass(frozen=True)
class Raise(Statement):
    """A RuntimeError with `message` (DICP_INJECT_BUG_TESTING_ONLY's runtime fault)."""

    message: str


@dataclass(frozen=True)
class Verbatim(Statement):
    """A line printed as it is, which no pass reads (DICP_INJECT_BUG_TESTING_ONLY's compile
    fault: a line that is not Python)."""

    text: str


# ---- liveness -------------------------------------------------------------------------


def last_uses(statements) -> dict:
    """Variable -> the index of the last statement naming it."""
    last = {}
    for number, statement in enumerate(statements):
        for name in statement.variables():
            last[name] = number
    return last


def with_frees(statements, keep=frozenset(), inputs=()) -> list:
    """`statements` with a Free of each tensor variable they bind after the last statement
    naming it, so that peak memory follows liveness; `keep` are never freed (what the graph
    returns). `inputs`, the graph's tensor inputs, are freed alike (first if no statement
    names them), as Inductor's wrapper frees them: the caller has cleared its list, so a
    backward's saved activation dies at its last use instead of at the return."""
    tensors = {name for s in statements if s.binds_tensors for name in s.binds()}
    tensors |= set(inputs)
    frees: dict = {}
    last = last_uses(statements)
    for name in inputs:
        last.setdefault(name, -1)
    for name, number in last.items():
        if name in tensors and name not in keep:
            frees.setdefault(number, []).append(name)
    result = [Free(tuple(sorted(frees[-1])))] if -1 in frees else []
    for number, statement in enumerate(statements):
        result.append(statement)
        if number in frees:
            result.append(Free(tuple(sorted(frees[number]))))
    return result
