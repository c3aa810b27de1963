"""WrapperBuilder: builds the wrapper IR (wrapper_ir.py) of a graph's `call(args)`, which binds
sizes, allocates, launches kernels, calls library kernels and eager fallbacks. Shared by every
backend: a vendor's codegen adds statements for its kernels; memory planning
(wrapper_memory.py) and rendering (wrapper_python.py) come last."""

import sympy
import torch

from dicp import config

from . import wrapper_ir as W
from .provenance import origin_op
from .symbolic import shape_of, storage_span, strides_of
from .wrapper_ir import TensorView, Var
from .wrapper_memory import fits, plan_memory
from .wrapper_python import PythonWrapperRenderer, call_name

__all__ = ["TensorView", "Var", "WrapperBuilder"]

_LITERALS = (
    bool,
    int,
    float,
    str,
    sympy.Basic,
    slice,
    type(None),
    torch.dtype,
    torch.memory_format,
    torch.layout,
)


# Statements before which a codegen's held-back kernels need not run (before_statement): they
# read no tensor, or launch a kernel, which the codegen orders itself
_NOT_AFTER_HELD_KERNELS = (W.Allocate, W.SetSize, W.SizeOf, W.CallKernel)


class LibraryOp(str):
    """How the wrapper names vendor library op `op` (`GraphCodegenBase.vendor_op_source`):
    a call of it is a CallLibrary, not an eager call."""

    op: str

    def __new__(cls, op):
        source = super().__new__(cls, f"vendor_ops[{op!r}]")
        source.op = op
        return source


class WrapperBuilder:
    def __init__(self, graph_name, target, device="cpu"):
        self.graph_name = graph_name
        self.target = target
        self.device = device  # where allocations go unless a call names another device
        # the printer of the wrapper IR as Python (a device backend prints its launches)
        self.renderer = PythonWrapperRenderer
        self.inputs: list = []
        self.tensor_inputs: list = []  # the inputs holding tensors (freed after last use)
        self.input_bytes: dict = {}  # tensor input -> the bytes it spans, if the same each call
        self.statements: list = []
        self.outputs: list = []  # wrapper_ir.Output of each returned value
        self.bound: set = set()
        self.constants: dict = {}
        self.layouts: dict = {}  # wrapper var -> (sizes, strides) of the tensor it holds
        # Buffers this wrapper allocated that no other variable can view yet: no ATen call
        # has seen them. Only these may be written through a `__restrict__` pointer.
        self.private: set = set()
        self.dtypes: dict = {}  # private buffer -> its dtype
        self.allocations: dict = {}  # buffer -> the index of the statement allocating it
        self.in_place_offers: list = []  # (output, source, call index): see offer_in_place
        self.copy_offers: list = []  # (target, source, call index): see offer_copy_elision
        self.reads_where_stored: set = set()  # (output, source, call index): see note_...
        self.writes_out: set = set()  # results of calls that take memory as `out=`
        self._named_private: dict = {}  # call result -> the private buffers its call names
        self._next = 0
        self.lowering = None  # the graph node being lowered (GraphCodegenBase.run)
        self.origins: dict = {}  # call's name (wrapper_python.call_name) -> the op it lowers
        # Called before each statement but an allocation, a size or a kernel launch: a codegen
        # holding kernels back to run several as one emits them there, ahead of anything that
        # could read them
        self.before_statement = lambda: None

    def fresh(self, prefix="buf"):
        self._next += 1
        return f"{prefix}{self._next}"

    def add(self, statement: W.Statement) -> W.Statement:
        if not isinstance(statement, _NOT_AFTER_HELD_KERNELS):
            self.before_statement()
        self.statements.append(statement)
        name = call_name(statement)
        if name is not None and self.lowering is not None:
            self.origins.setdefault(name, origin_op(self.lowering))
        return statement

    # ---- symbols ----
    def bind(self, expr, source):
        """Bind a size symbol from int input `source` the first time it is seen."""
        self._bind(expr, lambda symbol: W.SetSize(symbol, sympy.Symbol(source)))

    def bind_tensor(self, name, fake):
        span = storage_span(shape_of(fake), strides_of(fake))
        if span.is_Integer:
            self.input_bytes[name] = int(span) * fake.dtype.itemsize
        for d, size in enumerate(shape_of(fake)):
            self._bind(size, lambda symbol, d=d: W.SizeOf(symbol, name, "size", d))

    def bind_strides(self, name, fake):
        for d, stride in enumerate(strides_of(fake)):
            self._bind(stride, lambda symbol, d=d: W.SizeOf(symbol, name, "stride", d))

    def _bind(self, expr, statement):
        expr = sympy.sympify(expr)
        if isinstance(expr, sympy.Symbol) and expr not in self.bound:
            self.add(statement(expr.name))
            self.bound.add(expr)

    def set_size(self, symbol, expr):
        """Size symbol `symbol` computed from the bound sizes (a kernel's size parameter)."""
        self.add(W.SetSize(symbol.name, expr))

    # ---- values ----
    def constant(self, value):
        name = Var(f"const{len(self.constants)}")
        self.constants[str(name)] = value
        return name

    def value(self, value):
        """`value` as a statement's value: an object the wrapper cannot write as a literal
        (a tensor, a module) becomes a constant of the wrapper."""
        if isinstance(value, (list, tuple)):
            return type(value)(self.value(v) for v in value)
        if isinstance(value, (Var, TensorView, *_LITERALS)):
            return value
        return self.constant(value)

    # ---- statements ----
    def allocate(self, dtype, sizes, strides, device=None):
        name = self.fresh()
        self.own(name, dtype, sizes, strides)
        self.allocations[name] = len(self.statements)
        self.add(W.Allocate(name, dtype, tuple(sizes), tuple(strides), device or self.device))
        return name

    def allocate_at(self, dtype, sizes, strides, offset, device=None):
        """A new tensor with `sizes` and `strides` at element `offset` into memory of its own
        (an output's layout); no buffer the wrapper plans."""
        name = Var(self.fresh())
        self.add(
            W.Allocate(name, dtype, tuple(sizes), tuple(strides), device or self.device, offset)
        )
        return name

    def own(self, name, dtype, sizes, strides):
        """Record `name` as private: memory of exactly this layout (from offset 0) that no
        other variable views (a fresh allocation, or a call's result that is new memory)."""
        self.private.add(name)
        self.dtypes[name] = dtype
        self.layouts[name] = (list(sizes), list(strides))

    def own_fresh_result(self, name, dtype, sizes, strides, writes_out=False):
        """`name`, just assigned from a library call, is new memory (see own), and the call
        keeps no view of its arguments (a matrix product): those private before it stay so.
        `writes_out`: the call takes `out=`, memory of the result's layout to write into
        (see wrapper_memory.py), and returns what it wrote."""
        self.keeps_no_views(name)
        self.own(name, dtype, sizes, strides)
        if writes_out:
            self.writes_out.add(name)

    def keeps_no_views(self, name):
        """The library call bound to `name` returns new memory only, a tensor or a tuple of
        them, and keeps no view of its arguments (an attention's output and log-sum-exp):
        those private before it stay so. A key and value cache written through index_put
        before attention then takes the copy back into the graph's cache input in place
        (offer_copy_elision), as Inductor updates a static cache."""
        self.private |= self._named_private.get(name, set())

    def call_op(self, op_source, args, kwargs) -> Var:
        """A fresh variable bound to `op_source(*args, **kwargs)`: a vendor library op (named
        by `vendor_op_source`) or an eager callable. The call may view any buffer it reads:
        those are no longer private."""
        self.before_statement()  # kernels held back still see their buffers private
        name = Var(self.fresh())
        args = tuple(self.value(a) for a in args)
        kwargs = tuple((key, self.value(v)) for key, v in kwargs.items())
        statement: W.CallLibrary | W.CallEager
        if isinstance(op_source, LibraryOp):
            statement = W.CallLibrary(name, op_source.op, args, kwargs)
        else:
            statement = W.CallEager(name, str(op_source), args, kwargs)
        self._named_private[name] = statement.reads() & self.private
        self.private -= self._named_private[name]
        self.add(statement)
        return name

    def call_kernel(self, kernel, pointers, sizes=(), extents=False):
        """A launch of kernel `kernel` on the data pointers of the variables `pointers` and
        the integers `sizes` (sympy); `extents`: each pointer's storage extent follows."""
        self.add(W.CallKernel(kernel, tuple(pointers), tuple(sizes), extents))

    def view(self, base, sizes, strides, offset, absolute=False) -> Var:
        """A fresh variable viewing `base`'s memory (see wrapper_ir.View)."""
        name = Var(self.fresh())
        self.add(W.View(name, base, list(sizes), list(strides), offset, absolute))
        return name

    def copy(self, target, source):
        self.add(W.Copy(target, source))

    def unpack(self, source, count) -> list:
        names = [Var(self.fresh()) for _ in range(count)]
        if names:
            self.add(W.Unpack(tuple(names), source))
        return names

    # ---- buffer reuse ----
    def may_share(self, output, source) -> bool:
        """Whether kernel output `output` (allocated, not yet written) could take the memory of
        private buffer `source` (wrapper_memory.fits)."""
        return (
            output in self.allocations
            and source in self.private
            and output in self.private
            and fits(self, output, source)
        )

    def offer_in_place(self, output, source):
        """The kernel call just added reads `source` only where it writes `output`, each
        element before writing it (see may_share). If that call is the last use of `source`
        and `source` is no graph output, `output` is `source` instead of a new allocation:
        no new memory (a fresh buffer's first touch costs a page fault per 4 KB; a 4 MB
        batch norm after a convolution ran 4x slower than in place)."""
        self.in_place_offers.append((output, source, len(self.statements) - 1))

    def note_read_where_stored(self, output, source):
        """The kernel call just added reads each element of `source` only where it writes the
        same element of `output`, before writing it (in_place.py's test, for any source)."""
        self.reads_where_stored.add((output, source, len(self.statements) - 1))

    def offer_copy_elision(self, target, source):
        """The kernel call just added copies private buffer `source` into graph input `target`
        (an optimizer's parameter or state: AOTAutograd puts each such copy at the graph's
        end), both of one dtype and layout, no other input sharing `target`'s storage. Where
        nothing between `source`'s allocation and the copy reads `target` other than kernels
        reading it where they write `source` (note_read_where_stored), `source` is `target`'s
        memory instead and the copy goes (wrapper_memory._elide_copies): no temporary, no
        copy kernel, as Inductor writes a mutated input in place."""
        self.copy_offers.append((target, source, len(self.statements) - 1))

    # ---- the result ----
    def returned(self) -> set:
        return W.Return(tuple(self.outputs)).reads()

    def planned(self) -> list:
        """The statements with memory planned (wrapper_memory.py), the Return last."""
        return plan_memory(self) + [W.Return(tuple(self.outputs))]

    def render(self, statements=None, header=None) -> str:
        """The Python wrapper of `statements` (by default, the planned ones)."""
        labels = self.origins if config.profile_kernels else None
        return self.renderer(self.layouts, labels).render(
            self.graph_name,
            self.target,
            self.inputs,
            self.planned() if statements is None else statements,
            header,
        )
