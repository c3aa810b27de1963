"""Which loops of a kernel may run in parallel or as SIMD, decided from its memory accesses.

`#pragma omp parallel for` and `#pragma omp simd` are promises to the compiler that iterations
of the loop do not depend on each other through memory. A kernel keeps a promise only where
its accesses prove it:

- every store must *pin* the loop's variables: one index of the store is `a * v + b` with a
  constant `a != 0`, a nonzero stride, and `b` free of the iterations that vary. Then two
  iterations store to different elements of a buffer whose layout does not overlap itself
  (every buffer a kernel writes: fresh allocations and the graph inputs eager writes in place);
- a store through a computed (data-dependent) index pins nothing: scatter, index_put and
  every backward that torch decomposes into them may hit one element from several iterations.
  Such a loop runs serially. A kernel with such a store gets no `omp simd` at all, not even on
  a loop the store does pin (embedding backward's row): what is safe there rests on index
  arithmetic a later change could break, and the gain is small next to a lost update;
- a kernel that loads an element it also stores must do so at the very index of its one store
  to that buffer (a read-modify-write of its own element); any other load of a written buffer
  may read what another iteration writes, and the kernel runs serially without SIMD.

The rule reads `Access` records only, never the lowering that made them, so every lowering
and any later loop IR that records its accesses gets it.
"""
from dataclasses import dataclass

import sympy


@dataclass(frozen=True)
class LoopPlan:
    parallel: int = 0           # outer loops one `omp parallel for` collapses (0: serial)
    simd_outer: bool = False    # `omp simd` on the innermost outer loop (no inner loops)
    simd_inner: str = None      # `omp simd` reduction clauses ("+:acc", space separated)
                                # on the last inner loop


def wanted_plan(depth, inner_depth, simd_reduction):
    """The pragmas a kernel gets when its accesses allow everything: all outer loops but the
    innermost collapsed in parallel, that one vectorized (it stays out of collapse() so the
    compiler can vectorize it); with inner loops, every outer loop parallel."""
    if depth == 0:
        return LoopPlan(simd_inner=simd_reduction if inner_depth else None)
    if inner_depth:
        return LoopPlan(parallel=depth, simd_inner=simd_reduction)
    return LoopPlan(parallel=max(depth - 1, 1), simd_outer=depth > 1)


@dataclass
class KernelLoops:
    """A kernel's loop nest as the plan sees it: loop variables with their trip counts, the
    accesses of its phases (pre and post run once per outer iteration, body once per inner
    iteration) and its computed index symbols."""
    outer: list
    inner: list
    extents: dict
    phases: tuple
    computed: set

    def pinned(self, var, stores, varying):
        return sympy.sympify(self.extents[var]) == 1 or all(
            _pins(s, var, varying, set(self.extents), self.computed) for s in stores)


def plan_loops(nest: KernelLoops, simd_reduction=None):
    """The LoopPlan of `nest`: the wanted pragmas, minus each promise its accesses break."""
    wanted = wanted_plan(len(nest.outer), len(nest.inner), simd_reduction)
    accesses = [a for phase in nest.phases for a in phase]
    if not _own_elements_only(accesses):
        return LoopPlan()
    stores = [a for a in accesses if a.is_store]
    body_stores = [a for a in nest.phases[1] if a.is_store]
    everything = set(nest.extents)
    parallel = wanted.parallel
    while parallel and not all(nest.pinned(v, stores, everything) for v in nest.outer[:parallel]):
        parallel -= 1
    if any(_is_computed(store, nest.computed) for store in stores):
        return LoopPlan(parallel)
    simd_outer = wanted.simd_outer and nest.pinned(nest.outer[-1], stores, {nest.outer[-1]})
    simd_inner = wanted.simd_inner if wanted.simd_inner and nest.pinned(
        nest.inner[-1], body_stores, {nest.inner[-1]}) else None
    return LoopPlan(parallel, simd_outer, simd_inner)


def _is_computed(store, computed):
    """A store whose address depends on a value loaded at run time."""
    return any(sympy.sympify(index).free_symbols & computed for index in store.index)


def _own_elements_only(accesses):
    """Each written buffer has one store address, and every load of it reads that address."""
    stored = {}
    for access in accesses:
        if access.is_store:
            stored.setdefault(access.base, set()).add(access.address)
    if any(len(addresses) > 1 for addresses in stored.values()):
        return False
    return all(a.is_store or a.base not in stored or a.address in stored[a.base]
               for a in accesses)


def _pins(store, var, varying, loop_vars, computed):
    """Whether distinct values of `var` make `store` write distinct elements, whatever the
    other `varying` loop variables do: some index of the store is a*var + b with a != 0 free
    of loop variables, on a dim of nonzero stride, and b free of `varying`, `var` and computed
    indices."""
    for index, stride in zip(store.index, store.strides):
        index = sympy.expand(index)
        if var not in index.free_symbols or sympy.sympify(stride).is_zero is not False:
            continue
        a = index.coeff(var)
        rest = sympy.expand(index - a * var)
        if (a.is_zero is False and not a.free_symbols & (loop_vars | computed)
                and not rest.free_symbols & (varying | computed | {var})):
            return True
    return False
