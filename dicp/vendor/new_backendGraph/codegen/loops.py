"""Which loops of a kernel may run in parallel or as SIMD, decided from its memory accesses.

`#pragma omp parallel for` and `#pragma omp simd` are promises to the compiler that iterations
of the loop do not depend on each other through memory. A kernel keeps a promise only where
its accesses prove it:

- every store must *pin* the loop's variables: one index of the store is `a * v + b` with a
  constant `a != 0`, a nonzero stride, and `b` free of the iterations that vary. Then two
  iterations store to different elements of a buffer whose layout does not overlap itself
  (every buffer a kernel writes: fresh allocations and the graph inputs eager writes in place);
- a store through a computed (data-dependent) index pins no loop for `parallel for`:
  scatter, index_put and every backward that torch decomposes into them may hit one element
  from several iterations. Such a loop runs serially. For `omp simd`, whose lanes differ only
  in the vectorized loop's variable, a computed index whose value is loaded at indices free of
  that variable (KernelBuilder.computed_symbols) is the same in every lane, and counts as
  fixed: a scattered row's columns (embedding backward, a KV-cache write) still pin their
  loop. A computed index that may vary across lanes, or whose dependence is unknown, pins
  nothing;
- a kernel that loads an element it also stores must do so at the very index of its one store
  to that buffer (a read-modify-write of its own element); any other load of a written buffer
  may read what another iteration writes, and the kernel runs serially without SIMD;
- a store into a layout that overlaps itself (a value realized in the layout of unfold's
  overlapping windows, as eager returns them) pins no loop for `parallel for`: distinct
  indices may reach one element. SIMD lanes that differ in one index only, of nonzero stride
  (the store's only use of the loop variable), still reach distinct elements.

The rule reads `Access` records only, never the lowering that made them, so every lowering
and any later loop IR that records its accesses gets it.
"""

from dataclasses import dataclass, field

import sympy

from . import loop_ir as L


@dataclass(frozen=True)
class LoopPlan:
    parallel: int = 0  # outer loops one `omp parallel for` collapses (0: serial)
    simd_outer: bool = False  # `omp simd` on the innermost outer loop (no inner loops)
    simd_phases: tuple = ()  # per phase: `omp simd` on its last inner loop with these
    # reduction clauses ("+:acc", space separated; "" none), or
    # None for no `omp simd`


@dataclass(frozen=True)
class PhaseLoops:
    """One phase of a kernel: the inner loops it runs inside each outer iteration (none for a
    phase of straight-line code), the accesses of its body (once per inner iteration) and of
    the code around its loops, and the `omp simd` reduction clauses it asks for (None: none)."""

    inner: tuple
    body: tuple
    around: tuple
    simd: str = None


@dataclass
class KernelLoops:
    """A kernel's loop nest as the plan sees it: outer loop variables, the phases run in
    order inside each outer iteration, the trip count of every loop and the computed index
    symbols. A reduction fused into its consumer is a phase before the consumer's."""

    outer: list
    phases: tuple
    extents: dict
    computed: set
    starts: dict = field(default_factory=dict)  # inner loops not starting at 0: their start
    # computed index -> the symbols its value varies with (None or absent: unknown)
    computed_symbols: dict = field(default_factory=dict)

    def pinned(self, var, stores, varying):
        bounded = {v: e for v, e in self.extents.items() if self.starts.get(v, 0) == 0}
        return sympy.sympify(self.extents[var]) == 1 or all(
            _pins(s, var, varying, set(self.extents), bounded, self.computed) for s in stores
        )

    def lanes_pinned(self, var, stores):
        """Whether SIMD lanes over `var`, every other variable fixed, store to distinct
        elements: as `pinned`, with each computed index the same in every lane taken as
        fixed (a nonzero coefficient still may not name it)."""
        same_in_lanes = {
            s
            for s in self.computed
            if self.computed_symbols.get(s) is not None and var not in self.computed_symbols[s]
        }
        bounded = {v: e for v, e in self.extents.items() if self.starts.get(v, 0) == 0}
        return sympy.sympify(self.extents[var]) == 1 or all(
            _pins(
                s,
                var,
                {var},
                set(self.extents) | same_in_lanes,
                bounded,
                self.computed - same_in_lanes,
            )
            for s in stores
        )

    def accesses(self):
        return [a for phase in self.phases for a in phase.around + phase.body]


def plan_loops(nest: KernelLoops):
    """The LoopPlan of `nest`: everything allowed (all outer loops but the innermost collapsed
    in parallel and that one vectorized; with inner loops, every outer loop parallel and each
    phase's last inner loop vectorized), minus each promise its accesses break."""
    accesses, no_simd = nest.accesses(), (None,) * len(nest.phases)
    if not _own_elements_only(accesses):
        return LoopPlan(simd_phases=no_simd)
    stores = [a for a in accesses if a.is_store]
    has_inner = any(phase.inner for phase in nest.phases)
    depth = len(nest.outer)
    parallel = depth if has_inner else max(depth - 1, 1) if depth else 0
    everything = set(nest.extents)
    while parallel and not all(nest.pinned(v, stores, everything) for v in nest.outer[:parallel]):
        parallel -= 1
    simd_outer = depth >= 1 and not has_inner and nest.lanes_pinned(nest.outer[-1], stores)
    return LoopPlan(parallel, simd_outer, tuple(_phase_simd(nest, p) for p in nest.phases))


def _phase_simd(nest, phase):
    if phase.simd is None or not phase.inner:
        return None
    body_stores = [a for a in phase.body if a.is_store]
    return phase.simd if nest.lanes_pinned(phase.inner[-1], body_stores) else None


def _own_elements_only(accesses):
    """Each written buffer has one store address, and every load of it reads that address."""
    stored = {}
    for access in accesses:
        if access.is_store:
            stored.setdefault(access.base, set()).add(access.address)
    if any(len(addresses) > 1 for addresses in stored.values()):
        return False
    return all(a.is_store or a.base not in stored or a.address in stored[a.base] for a in accesses)


def _pins(store, var, varying, loop_vars, bounded, computed):
    """Whether distinct values of `var` make `store` write distinct elements, whatever the
    other `varying` loop variables do: some index of the store is a*var + b with a != 0 free
    of loop variables, on a dim of nonzero stride, and b free of `varying`, `var` and computed
    indices, or b = c + s with c free of them and s a loop variable from 0 to below |a|
    (`bounded`: trip counts of the loops starting at 0), as a*block + column with fewer than
    |a| columns per block. The store's memory offset counts as such an index too: a loop over
    merged dims (loop_split.merge_loops) indexes each dim by division, as (i // 512, i % 512),
    and only the offset, i, shows that it pins its loop."""
    if store.overlaps and (varying != {var} or _uses(store, var) != 1):
        return False
    candidates = [*zip(store.index, store.strides), (store.address, 1)]
    for index, stride in candidates:
        index = sympy.expand(index)
        if var not in index.free_symbols or sympy.sympify(stride).is_zero is not False:
            continue
        a = index.coeff(var)
        if a.is_zero is not False or a.free_symbols & (loop_vars | computed):
            continue
        rest = sympy.expand(index - a * var)
        if not rest.free_symbols & (varying | computed | {var}):
            return True
        if _within_block(rest, abs(a), varying | computed | {var}, bounded):
            return True
        if _beside_blocks(rest, a, var, varying | computed | {var}, loop_vars, bounded):
            return True
    return False


def _uses(store, var):
    """How many of the store's per-dim indices use loop variable `var`."""
    return sum(var in sympy.sympify(index).free_symbols for index in store.index)


def _beside_blocks(rest, a, var, excluded, loop_vars, extents):
    """rest = c + sum of b * w: c free of `excluded`, each w a loop variable and each b a
    multiple of |a| times var's trip count, as block + a*column of a split loop (128*i0 + i1
    over i1 < 128): a * var then differs modulo that multiple for distinct var, and the sum
    does not."""
    if var not in extents or not sympy.sympify(extents[var]).is_Integer or not a.is_Integer:
        return False
    span = abs(a) * int(extents[var])
    if span == 0:  # a loop of no iterations
        return False
    for term in sympy.Add.make_args(rest):
        if not term.free_symbols & excluded:
            continue
        b, w = term.as_coeff_Mul()
        if w not in loop_vars or not b.is_Integer or b % span != 0:
            return False
    return True


def _within_block(rest, width, excluded, extents):
    """rest = c + s: c free of `excluded`, s a loop variable from 0 whose trip count is at
    most `width`, so 0 <= s < width."""
    for s in rest.free_symbols & set(extents):
        c = sympy.expand(rest - s)
        if (
            rest.coeff(s) == 1
            and not c.free_symbols & (excluded | {s})
            and _at_most(sympy.sympify(extents[s]), width)
        ):
            return True
    return False


def _at_most(extent, bound):
    if (extent - bound).is_nonpositive:
        return True
    return isinstance(extent, sympy.Min) and any(
        (arg - bound).is_nonpositive for arg in extent.args
    )


def on_one_thread(work, threshold) -> bool:
    """Whether a kernel doing `work` (an Index: elements) runs its loops on one thread: a
    static amount below `threshold` gets no parallel region, whose `if` would still cost the
    runtime's team setup on each call (0.3 us: 116 kernels of an SGD step over a small CNN's
    58 tensors)."""
    return bool(getattr(work.expr, "is_Integer", False) and work.expr < threshold)


def loop_nest(k, outer, plan, work, threshold):
    """The statements of kernel `k` (a KernelBuilder) as one loop nest with its schedule:
    the outer loops ((variable, size Index) each) around the row caches and the phases, each
    phase's pre part, its inner loops around its body, its post part. `plan` (a LoopPlan)
    says which loops run in parallel (where `work` reaches `threshold`) or as SIMD."""
    body = [*k.row_cache_declarations()]
    for phase, simd in zip(k.phases, plan.simd_phases):
        body += [*phase.pre, *_inner_loops(phase, simd), *phase.post]
    worth_threads = not on_one_thread(work, threshold)
    for depth in reversed(range(len(outer))):
        var, size = outer[depth]
        parallel = (
            L.Parallel(plan.parallel, work, threshold)
            if depth == 0 and plan.parallel and worth_threads
            else None
        )
        simd = "" if depth == len(outer) - 1 and plan.simd_outer else None
        body = [
            L.Loop(
                L.Var(var.name, "int64_t"),
                L.Index(0),
                size,
                tuple(body),
                parallel=parallel,
                simd=simd,
            )
        ]
    return tuple(body)


def _inner_loops(phase, simd):
    """A phase's inner loops around its body; the last one vectorized with the reduction
    clauses `simd` (None: not), and run in the phase's chunks if it has them."""
    body = tuple(phase.body)
    if not phase.bounds:
        return list(body)
    for depth in reversed(range(len(phase.bounds))):
        var, lo, hi = phase.bounds[depth]
        last = depth == len(phase.bounds) - 1
        chunk = phase.chunk if last else None
        if chunk is not None and chunk.exact is not None:
            chunk = L.exact_pass(chunk, var, hi, body)
        body = (
            L.Loop(
                L.Var(var.name, "int64_t"),
                lo,
                hi,
                body,
                simd=simd if last else None,
                chunk=chunk,
            ),
        )
    return list(body)
