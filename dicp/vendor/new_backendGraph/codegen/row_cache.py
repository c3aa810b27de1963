"""Row caches: a costly lazy value that a kernel computes in one phase and reads again in a
later one is kept in a local array between them, instead of being computed twice.

Softmax is the case: its sum phase computes exp(x - max) over the row, and the phase after it
divides the same exp(x - max) by the sum. Inductor keeps such values in a per-row local buffer
too. The array lives in the outer loop's body (one per outer iteration, so per thread); the
earlier phase stores each element as its loop computes it, the later one loads it.

A value is cached only where that is provably the same value:
- the same IR value at the same index, once each phase's loop variables are replaced by their
  position, over loops with the same (static) bounds: so both phases address element p of the
  array for the same element of the value;
- stored from straight-line code of the earlier phase's loop body (not under a mask, not in
  a nested loop), so every element is written before the later phase runs;
- its index uses nothing but the outer loops, the phase's own loops and sizes.

The kernel is emitted once recording its loads (`LoadRecord`), then, when `plan_row_caches`
finds something to cache, emitted again with the plan.
"""

from dataclasses import dataclass

import sympy

from . import loop_ir as L
from .costs import calls
from .ctypes_map import compute_ctype

ROW_CACHE_BYTES = 64 * 1024  # per kernel: the arrays live on each thread's stack
_CTYPE_BYTES = {
    "bool": 1,
    "int8_t": 1,
    "uint8_t": 1,
    "int16_t": 2,
    "int32_t": 4,
    "float": 4,
}  # anything else: 8


def costly(statements) -> bool:
    """Whether loop IR `statements` compute an op worth not computing twice (exp, erf, log:
    anything but arithmetic, comparisons, conversions and selects)."""
    return calls(L.computed_ops(statements))


@dataclass(frozen=True)
class LoadRecord:
    """One load of a lazy value inside a phase: its row key (see KernelBuilder.lazy), the
    phase (its identity), whether that load could store the array (straight-line body
    code), whether its code was costly, and the row keys of the lazy values of the same phase
    being computed around it (a cached one makes this load vanish)."""

    key: tuple
    phase: tuple
    can_store: bool
    costly: bool
    chain: tuple


@dataclass(frozen=True)
class RowCache:
    name: str
    ctype: str
    size: int
    storer: tuple  # the phase (identity) that fills it
    readers: frozenset  # the phases that load it
    value: object  # the IR value, held so that its id stays its own while the plan lives

    @property
    def array(self):
        return L.Var(self.name, self.ctype, (self.size,))


def plan_row_caches(records, order, values) -> dict:
    """{row key: RowCache} for the recorded loads. `order`: each phase's identity -> its
    position in the kernel; `values`: each row key's IR value."""
    by_key = {}
    for record in records:
        by_key.setdefault(record.key, []).append(record)
    candidates = {}
    for key, loads in by_key.items():
        storers = [r for r in loads if r.can_store]
        if not storers or not any(r.costly for r in loads):
            continue
        storer = min(storers, key=lambda r: order[r.phase]).phase
        later = [r for r in loads if order[r.phase] > order[storer]]
        if later:
            candidates[key] = (storer, later)
    plan, budget = {}, ROW_CACHE_BYTES
    for key in sorted(candidates, key=lambda k: min(len(r.chain) for r in candidates[k][1])):
        storer, later = candidates[key]
        readers = frozenset(r.phase for r in later if not set(r.chain) & plan.keys())
        ctype = compute_ctype(values[key].dtype)
        size = int(sympy.prod([hi - lo for lo, hi in key[2]]))  # the key's loop bounds
        cost = size * _CTYPE_BYTES.get(ctype, 8)
        if readers and cost <= budget:
            budget -= cost
            plan[key] = RowCache(f"row_cache{len(plan)}", ctype, size, storer, readers, values[key])
    return plan
