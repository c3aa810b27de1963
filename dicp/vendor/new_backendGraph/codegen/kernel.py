"""KernelBuilder: builds one kernel's loop IR (loop_ir.py): its parameters, statements and
memory accesses, with structural CSE and masked scopes."""

from dataclasses import dataclass, field

import sympy

from dicp.api import may_overlap

from . import loop_ir as L
from .costs import DIVIDING_OPS
from .ctypes_map import compute_ctype, storage_ctype
from .invariants import hoist_invariants
from .row_cache import LoadRecord, costly, plan_row_caches
from .sym import (
    Narrow32,
    contiguous_strides,
    flat_index,
    integer_valued,
    loop_index,
    simplify_in_loops,
)


@dataclass(frozen=True)
class Access:
    """One load or store of a kernel, as IR: the wrapper variable it addresses and the per-dim
    index into that buffer's layout (`strides`, `offset`). Indices are sympy over the loop
    variables, size symbols and the kernel's computed (data-dependent) index symbols. The loop
    plan (`loops.plan_loops`) decides parallelism and vectorization from these records.
    `overlaps`: a store into a layout whose elements of nonzero stride may share an address
    (a value realized in the layout of unfold's overlapping windows)."""

    base: str
    index: tuple
    strides: tuple
    offset: object
    is_store: bool
    overlaps: bool = False

    @property
    def address(self):
        return sympy.expand(self.offset + flat_index(self.index, self.strides))


@dataclass
class Block:
    statements: list = field(default_factory=list)
    cse: dict = field(default_factory=dict)  # expression -> the Var holding it


@dataclass
class Phase:
    """Code run once per outer iteration of a kernel: `pre`, then the inner loops `inner`
    ((variable, lo, hi) each, sympy; `bounds`: the same with sizes hoisted, as Index) around
    `body`, then `post` (loop IR statements); the accesses of each part, and the `omp simd`
    reduction clauses its last inner loop may take (None: no `omp simd`)."""

    inner: list
    bounds: list
    pre: list
    body: list
    post: list
    accesses: tuple
    simd: str = None
    chunk: L.Chunk = None  # its last inner loop's chunks


@dataclass
class _OpenPhase:
    """A phase being emitted: its identity (the same in every emission of the kernel: which
    reduction at which index, or which of the kernel's own phases), loop variables, bounds
    and current part."""

    identity: tuple
    variables: tuple
    bounds: tuple
    part: str = "pre"


# Statements of these types that neither read memory nor divide are loop-index arithmetic
# (positions, masks such as a causal attention's i <= j): a few vector integer ops each, which
# cost next to nothing to recompute.
INDEX_CTYPES = ("int64_t", "int32_t", "bool")


class KernelBuilder:
    """Statements are emitted into the innermost open block; CSE is scoped to blocks."""

    def __init__(self, name, loop_vars=(), bounds_check=False, size_params=None, row_caches=None):
        self.name = name
        self.outer = tuple(loop_vars)  # the loops a fused reduction is computed inside
        self.unit_loops = set()  # those of them that run once
        self.phases: list[Phase] = []
        self.fused = {}  # (reduction, kept index) -> its value in this kernel
        self.fused_reductions = []  # the reductions it computes
        self.unfused = []  # reductions this kernel could not compute inside it
        self.reduction_uses = None  # a probe's record: the loop variables each read uses
        self._masks = 0
        self._phases_started = 0
        self._open: list[_OpenPhase] = []  # phases being emitted, innermost last
        self._phase_order = {}  # phase identity -> position in `phases`
        self._pending_identity = None  # the identity of the next phase (fused_reduction)
        self._own_phases = 0  # phases of the kernel's own started so far
        self._row_stores = set()  # row keys whose caches this emission stores
        self.row_caches = row_caches or {}  # row key -> RowCache (row_cache.py)
        self._row_records = []  # a LoadRecord per lazy load with a row key
        self._row_values = {}  # row key -> its IR value
        self._lazy_chain = []  # row keys of the lazy values being computed
        self.size_params = {} if size_params is None else size_params  # expression -> symbol
        self._hoisted = {}
        self.bounds_check = bounds_check  # every access checked against its storage
        self.params: dict[str, L.Param] = {}
        self.symbols: set = set()
        self.loop_vars = set(loop_vars)
        self.extents = {}  # loop variable -> its static extent (index simplification)
        self.size_extents = {}  # loop variable -> its extent in sizes (index simplification)
        self.computed: set = set()  # symbols of data-dependent indices (loaded at run time)
        self.computed_symbols = {}  # computed index -> the symbols its value varies with
        self.computed_sizes = {}  # computed index -> the size of the dim it indexes
        self._var_symbols = {}  # Let-bound var name -> the symbols its value varies with
        self.accesses: list[Access] = []
        self.blocks = [Block()]
        self._next = 0
        self.index_statements = 0  # emitted integer or boolean arithmetic on loop indices

    # ---- parameters ----
    def pointer(self, base, dtype, writable=False) -> str:
        if base not in self.params:
            prefix = "out" if writable else "in"
            self.params[base] = L.Param(f"{prefix}_{base}", storage_ctype(dtype), base, writable)
        param = self.params[base]
        param.writable = param.writable or writable
        return param.name

    def index_extents(self):
        """Loop variable -> extent, static or in sizes, for simplifying index expressions."""
        return {**self.size_extents, **self.extents}

    def index(self, expr) -> L.Index:
        """An index/size expression as IR, recording the size symbols it needs."""
        expr = self._hoist(simplify_in_loops(sympy.sympify(expr), self.index_extents()))
        self.symbols |= expr.free_symbols - self.loop_vars - self.computed
        return L.Index(expr)

    def _hoist(self, expr):
        """`expr` with each function of sizes alone (FloorDiv(s0, 4), Max(1, ...)) replaced by
        an int64 size parameter the wrapper computes once per call (`size_params`). Under dynamic
        shapes chained views nest such functions, and printed in full at every use they ran
        to 400 KB of C++ per index in a Swin block. Shared subtrees are hoisted once."""
        if expr.is_Atom or not expr.free_symbols:
            return expr
        if expr not in self._hoisted:
            if (
                isinstance(expr, sympy.Function)
                and integer_valued(expr)
                and not expr.free_symbols & (self.loop_vars | self.computed)
            ):
                symbol = sympy.Symbol(
                    f"hs{len(self.size_params)}", integer=True, nonnegative=expr.is_nonnegative
                )
                self._hoisted[expr] = self.size_params.setdefault(expr, symbol)
            else:
                self._hoisted[expr] = expr.func(*(self._hoist(a) for a in expr.args))
        return self._hoisted[expr]

    def computed_index(self, value, size, what: str):
        """A data-dependent index (IR `value`, negatives counting from the end of a dim of
        `size`) as an index symbol. Stores through it may collide across iterations (see
        loops.plan_loops); with bounds checks an index outside the dim is reported as `what`."""
        if self.bounds_check:
            wrapped = L.Op("CheckedIndex", "int64_t", (value, self.index(size)), f"{what} is")
        else:
            wrapped = L.Op("WrapIndex", "int64_t", (value, self.index(size)))
        symbol = sympy.Symbol(self.emit(wrapped).name, integer=True)
        self.computed.add(symbol)
        self.computed_symbols[symbol] = self._varies_with(wrapped)
        self.computed_sizes[symbol] = sympy.sympify(size)
        return symbol

    def _varies_with(self, expr):
        """The symbols (loop variables, sizes) the value of IR `expr` depends on through its
        indices, computed indices expanded; None when unknown (a mutable local's value)."""
        if isinstance(expr, (L.Index, L.Load)) or isinstance(expr, sympy.Basic):
            index = (
                expr.expr
                if isinstance(expr, L.Index)
                else expr.position
                if isinstance(expr, L.Load)
                else expr
            )
            found = set()
            for symbol in sympy.sympify(index).free_symbols:
                inner = (
                    self.computed_symbols.get(symbol, {symbol})
                    if symbol in self.computed
                    else {symbol}
                )
                if inner is None:
                    return None
                found |= inner
            return frozenset(found)
        if isinstance(expr, L.Var):
            return self._var_symbols.get(expr.name)
        if isinstance(expr, L.Op):
            found = set()
            for arg in expr.args:
                inner = self._varies_with(arg)
                if inner is None:
                    return None
                found |= inner
            return frozenset(found)
        if isinstance(expr, (L.Const, bool, int, float, str)):
            return frozenset()
        return None

    # ---- memory ----
    def load(self, buffer, index) -> L.Var:
        """The element of `buffer` (a values.Buffer) at per-dim `index`, in its compute type."""
        pointer, position, site = self._access(buffer, index, is_store=False)
        position = self._narrowed(position)
        return self.emit(
            L.Load(
                pointer, position, storage_ctype(buffer.dtype), compute_ctype(buffer.dtype), site
            )
        )

    def _narrowed(self, position):
        """`position` with each term of data-dependent indices alone (a gather's `2 * t7`)
        as a Narrow32 where every valid index keeps it inside int32: a computed index lies in
        [0, size) of its dim (wrapped; bounds checks send an invalid one to 0), so the term's
        magnitude is below |coefficient| * the product of those sizes, when they are known
        numbers. Stores keep 64-bit positions: a scatter's collisions are planned on them."""
        if not position.free_symbols & self.computed:
            return position
        terms = [self._narrowed_term(term) for term in sympy.Add.make_args(position)]
        return sympy.Add(*terms)

    def _narrowed_term(self, term):
        if not term.free_symbols or not term.free_symbols <= self.computed:
            return term
        coefficient, rest = term.as_coeff_Mul()
        bound = abs(coefficient)
        for factor in sympy.Mul.make_args(rest):
            size = self.computed_sizes.get(factor)
            if size is None or not size.is_Integer:
                return term
            bound *= size
        return Narrow32(term) if bound.is_Integer and bound < 2**31 else term

    def store(self, buffer, index, value):
        pointer, position, site = self._access(buffer, index, is_store=True)
        self.add(L.Store(pointer, position, self.params[buffer.base].ctype, value, site))

    def _access(self, buffer, index, is_store):
        """Records the access; returns (pointer parameter, hoisted flat position, the access's
        name for bounds checks)."""
        ptr = self.pointer(buffer.base, buffer.dtype, writable=is_store)
        access = Access(
            buffer.base,
            tuple(simplify_in_loops(sympy.sympify(i), self.index_extents()) for i in index),
            tuple(buffer.strides),
            buffer.offset,
            is_store,
            is_store and _overlapping(buffer.sizes, buffer.strides),
        )
        self.accesses.append(access)
        site = (
            f"{'store to' if is_store else 'load of'} buffer {buffer.base} at element"
            if self.bounds_check
            else ""
        )
        return ptr, self.index(access.address).expr, site

    # ---- statements ----
    def emit(self, expr) -> L.Var:
        """A Var holding IR expression `expr`: the one an enclosing block already has for an
        equal expression, else a new statement."""
        for block in reversed(self.blocks):
            if expr in block.cse:
                return block.cse[expr]
        var = L.Var(self._fresh(), expr.type)
        self._var_symbols[var.name] = self._varies_with(expr)
        self.blocks[-1].statements.append(L.Let(var, expr))
        self.blocks[-1].cse[expr] = var
        if expr.type in INDEX_CTYPES and _index_arithmetic(expr):
            self.index_statements += 1
        return var

    def definition(self, var):
        """The expression a Let bound to `var` in an enclosing block, or None."""
        for block in reversed(self.blocks):
            for expr, bound in block.cse.items():
                if bound == var:
                    return expr
        return None

    def op(self, name, type_, *args, param=""):
        """`emit` of op `name` (a row of the renderer's table) on `args`."""
        return self.emit(L.Op(name, type_, tuple(args), param))

    def add(self, statement):
        self.blocks[-1].statements.append(statement)

    def new_var(self, type_, prefix="acc", dims=()) -> L.Var:
        """A fresh name for a mutable local (an accumulator; an array when `dims` are given),
        for a Declare statement."""
        return L.Var(self._fresh(prefix), type_, tuple(dims))

    def declare(self, type_, init=None, prefix="acc", dims=(), aligned=False) -> L.Var:
        """A mutable local declared here."""
        var = self.new_var(type_, prefix, dims)
        self.add(L.Declare(var, init, aligned))
        return var

    def masked(self, condition, body, other, type_) -> L.Var:
        """`body()` evaluated only where `condition` holds, else `other` (no stray loads)."""
        var = L.Var(self._fresh(), type_)
        self.add(L.Declare(var, other))
        value, statements = self.conditional(body)
        self.add(L.If(condition, (*statements, L.Assign(var, value))))
        return var

    def select_first(self, cases, type_) -> L.Var:
        """The value of the first (condition, body) case that holds (a condition of None
        always holds); each body runs only there."""
        var = L.Var(self._fresh(), type_)
        self.add(L.Declare(var))
        chain = ()
        for condition, body in reversed(cases):
            value, statements = self.conditional(body)
            branch = (*statements, L.Assign(var, value))
            chain = branch if condition is None else (L.If(condition, branch, chain),)
        self.blocks[-1].statements.extend(chain)
        return var

    def conditional(self, body):
        """(`body()`, its statements): code that runs only where a condition holds."""
        self._masks += 1
        try:
            return self.scoped(body)
        finally:
            self._masks -= 1

    def forget_values(self):
        """After a store, earlier loads may be stale: stop reusing them."""
        self.blocks[-1].cse.clear()

    def forget_loads(self, pointers):
        """After stores to `pointers`, their earlier loads may be stale: stop reusing those
        (values computed from them stay right: they name the loads' variables)."""
        for block in self.blocks:
            stale = [e for e in block.cse if isinstance(e, L.Load) and e.pointer in pointers]
            for expr in stale:
                del block.cse[expr]

    def scoped(self, body):
        """(`body()`, the statements it emitted into a block of its own, whose values are not
        reused after it), for the caller to nest in an If or a For."""
        self.blocks.append(Block())
        value = body()
        inner = self.blocks.pop()
        return value, tuple(inner.statements)

    def _fresh(self, prefix="t"):
        var = f"{prefix}{self._next}"
        self._next += 1
        return var

    # ---- phases ----
    def phase(self, inner, pre=None, body=None, post=None, simd=None, chunk=None):
        """Emit a phase (see Phase) with fresh inner loop variables over the (lo, hi) bounds
        `inner`: pre(k), body(k, variables), post(k, variables). Returns what post returns.
        `chunk()`, called after the body, gives the phase's Chunk and its simd clauses, or
        None for whole loops with `simd`."""
        started, self._phases_started = self._phases_started, self._phases_started + 1
        variables = loop_index(len(inner), f"r{started}_" if started else "r")
        self.loop_vars |= set(variables)
        loops = [(v, sympy.sympify(lo), sympy.sympify(hi)) for v, (lo, hi) in zip(variables, inner)]
        self.extents.update({v: int(hi) for v, lo, hi in loops if lo == 0 and hi.is_Integer})
        self.size_extents.update(
            {
                v: hi
                for v, lo, hi in loops
                if lo == 0 and not hi.is_Integer and not hi.free_symbols & self.loop_vars
            }
        )
        identity = self._pending_identity or ("own", self._own_phases)
        self._own_phases += identity[0] == "own"
        self._pending_identity = None
        opened = _OpenPhase(identity, tuple(variables), tuple((lo, hi) for _, lo, hi in loops))
        self._open.append(opened)
        chain, self._lazy_chain = self._lazy_chain, []
        parts, accesses, result = [], [], None
        try:
            for part, callback, args in (
                ("pre", pre, ()),
                ("body", body, (variables,)),
                ("post", post, (variables,)),
            ):
                opened.part = part
                if callback is not None:
                    result = callback(self, *args)
                parts.append(self.take_statements())
                accesses.append(tuple(self.take_accesses()))
        finally:
            self._open.pop()
            self._lazy_chain = chain
        bounds = [(v, self.index(lo), self.index(hi)) for v, lo, hi in loops]
        chunked = chunk() if chunk is not None and loops else None
        if chunked is not None:
            chunked, simd = chunked
        if loops:  # a chunk's open and close run inside the loop too
            around = [*chunked.open, *chunked.close] if chunked is not None else []
            runs = all(lo.is_Integer and hi.is_Integer and hi > lo for _, lo, hi in loops)
            parts[0], parts[1] = hoist_invariants(
                parts[0], parts[1], variables, self.computed, around, runs
            )
        self._phase_order[identity] = len(self.phases)
        self.phases.append(Phase(loops, bounds, *parts, tuple(accesses), simd, chunked))
        return result

    # ---- row caches (row_cache.py) ----
    def lazy(self, value, index, compute):
        """The IR variable of lazy `value` at `index`: `compute()`, or its element of a row
        cache in a phase that reads one; the phase that fills the cache also stores it."""
        key = self._row_key(value, index)
        if key is None:
            return compute()
        opened, cache = self._open[-1], self.row_caches.get(key)
        if cache is not None and opened.identity in cache.readers:
            return self.emit(L.Element(cache.array, (self._row_position(opened),)))
        block = self.blocks[-1]
        first = len(block.statements)
        self._lazy_chain.append(key)
        try:
            var = compute()
        finally:
            self._lazy_chain.pop()
        can_store = opened.part == "body" and not self._masks and len(self.blocks) == 1
        if cache is not None and opened.identity == cache.storer and can_store:
            self.add(L.Assign(L.Element(cache.array, (self._row_position(opened),)), var))
            self._row_stores.add(key)
        self._row_values[key] = value
        self._row_records.append(
            LoadRecord(
                key,
                opened.identity,
                can_store,
                costly(block.statements[first:]),
                tuple(self._lazy_chain),
            )
        )
        return var

    def _row_key(self, value, index):
        """(value's id, index with the phase's loop variables replaced by their position, the
        loops' bounds), or None where no row cache may serve this load."""
        if not self._open or not self._open[-1].variables:
            return None
        opened = self._open[-1]
        if not all(lo.is_Integer and hi.is_Integer for lo, hi in opened.bounds):
            return None
        index = tuple(sympy.sympify(i) for i in index)
        used = set().union(*(i.free_symbols for i in index))
        own = set(opened.variables)
        if not used & own or used & (self.computed | (self.loop_vars - own - set(self.outer))):
            return None
        positions = {v: sympy.Symbol(f"row{j}") for j, v in enumerate(opened.variables)}
        return id(value), tuple(i.xreplace(positions) for i in index), opened.bounds

    def _row_position(self, opened):
        extents = [hi - lo for lo, hi in opened.bounds]
        strides = [int(sympy.prod(extents[j + 1 :])) for j in range(len(extents))]
        return self.index(
            sum(
                (v - lo) * stride
                for v, (lo, _), stride in zip(opened.variables, opened.bounds, strides)
            )
        )

    def plan_row_caches(self):
        """The row caches a second emission of this kernel should use (row_cache.py)."""
        return plan_row_caches(self._row_records, self._phase_order, self._row_values)

    def row_caches_hold(self):
        """Whether this emission stores every row cache it has, in a phase before each phase
        that reads it (a second emission could order its phases differently)."""
        order = self._phase_order
        return all(
            key in self._row_stores
            and cache.storer in order
            and all(order.get(reader, -1) > order[cache.storer] for reader in cache.readers)
            for key, cache in self.row_caches.items()
        )

    def row_cache_declarations(self):
        return [L.Declare(cache.array, aligned=True) for cache in self.row_caches.values()]

    def fused_reduction(self, reduction, kept_index):
        """The value of lazy `reduction` at `kept_index`, computed by a phase of this kernel
        before the one being emitted. That computes it once per outer iteration only when the
        index uses exactly the outer loop variables, each iteration a different element (group
        norm's statistics at channel // 8, fused, were computed 8 times: 3.3 times eager's
        time), and safely only outside conditional code
        (a padded or masked index may be out of range where the condition fails). A second
        kernel reading it would compute it again: it reads it from memory instead. Otherwise
        the reduction is listed in `unfused`: the caller realizes it and emits again."""
        kept_index = tuple(
            simplify_in_loops(sympy.sympify(i), self.index_extents()) for i in kept_index
        )
        key = (id(reduction), kept_index)
        if key in self.fused:
            return self.fused[key]
        used = set().union(*(i.free_symbols for i in kept_index)) & (self.loop_vars | self.computed)
        if self.reduction_uses is not None:  # a probe asking which loops reductions need
            self.reduction_uses.append(used)
            return L.Const(0, compute_ctype(reduction.dtype))
        varying = set(self.outer) - self.unit_loops
        if (
            self._masks
            or used - self.unit_loops != varying
            or not _one_to_one(kept_index, reduction.kept_sizes(), varying)
            or reduction.computed_in_kernel
            or reduction.column_sum is not None
        ):
            self.unfused.append(reduction)
            return L.Const(0, compute_ctype(reduction.dtype))
        saved = self.blocks, self.accesses
        self.blocks, self.accesses = [Block()], []
        self._pending_identity = ("reduction",) + key
        try:
            self.fused[key] = reduction.emit_phase(self, kept_index)
            self.fused_reductions.append(reduction)
        finally:
            self.blocks, self.accesses = saved
        return self.fused[key]

    def take_statements(self):
        statements = self.blocks[0].statements
        self.blocks = [Block()]
        return statements

    def statements(self):
        """Every statement emitted so far into the open blocks (a probe's element)."""
        return [s for block in self.blocks for s in block.statements]

    def take_accesses(self):
        accesses, self.accesses = self.accesses, []
        return accesses

    def params_of(self, private=frozenset(), shared=()):
        """(pointer Params in parameter order, size symbols); with bounds checks, each
        pointer's storage extent follows as two more int64 arguments.

        `restrict` (C++'s `__restrict__`) promises that no two pointers reach one element
        while one of them writes. It holds when every buffer the kernel writes is `private`:
        allocated by this graph and never seen by an ATen call, so no other wrapper variable
        can view it. A kernel writing anything else (a graph input in place) gets no
        restrict at all, and the Params `shared` (an output that may take an input's memory:
        in_place.py) get none either."""
        params = sorted(self.params.values(), key=lambda p: (not p.writable, p.name))
        restrict = all(p.base in private for p in params if p.writable)
        unrestricted = {id(p) for p in shared}
        for param in params:
            param.restrict = restrict and id(param) not in unrestricted
        return params, sorted(self.symbols, key=str)


def _overlapping(sizes, strides):
    """Whether a layout's dims of nonzero stride may overlap (a stride-0 dim pins no loop in
    the plan already)."""
    strided = [(size, stride) for size, stride in zip(sizes, strides) if stride != 0]
    return bool(strided) and may_overlap(*zip(*strided))


# Index functions that divide (a division's cost is not an index statement's)
_DIVIDING_FUNCTIONS = {
    "IDiv",
    "IMod",
    "FloorDiv",
    "ModularIndexing",
    "CleanDiv",
    "CeilDiv",
    "PythonMod",
    "Mod",
    "IntTrueDiv",
    "FloatTrueDiv",
}


def _index_arithmetic(expr):
    """Whether integer/bool `expr` is loop-index arithmetic: no memory read, no division."""
    if isinstance(expr, (L.Load, L.Element)):
        return False
    if isinstance(expr, L.Op) and expr.name in DIVIDING_OPS:
        return False
    return not any(_divides(a.expr) for a in L.operands(expr) if isinstance(a, L.Index))


def _divides(expr):
    return any(
        type(e).__name__ in _DIVIDING_FUNCTIONS or (e.is_Rational and not e.is_Integer)
        for e in sympy.preorder_traversal(expr)
    )


def _one_to_one(index, sizes, variables):
    """Whether `index` (expressions in loop `variables`, within `sizes`) takes a different
    value at each point of the loops: affine in them with coefficients of full column rank,
    or, through divisions and remainders, a row-major position affine in each of them (rows
    merged as [b t, d] read a norm's [b, t] at (row // t, row % t), which is row). A floor
    division alone (channel // 8) is not."""
    variables = sorted(variables, key=str)
    if not variables:
        return True
    if all(_affine(expr, variables) for expr in index):
        return affine_one_to_one(index, variables)
    flat = flat_index(index, contiguous_strides(sizes))
    return _affine(flat, variables) and all(sympy.diff(flat, v) != 0 for v in variables)


def affine_one_to_one(index, variables):
    """Whether `index` is affine in loop `variables` with coefficients of full column rank
    (a different value at each point of the loops)."""
    variables = sorted(variables, key=str)
    if not all(_affine(sympy.sympify(expr), variables) for expr in index):
        return False
    rows = [[sympy.diff(expr, v) for v in variables] for expr in index]
    return not variables or sympy.Matrix(rows).rank() == len(variables)


def _affine(expr, variables):
    return expr.is_polynomial(*variables) and all(sympy.degree(expr, v) <= 1 for v in variables)
