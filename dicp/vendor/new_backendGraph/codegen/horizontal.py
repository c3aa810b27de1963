"""Pointwise kernels over the same loops run as one kernel (horizontal fusion).

A value read by two kernels, or returned and read again, is written to memory once and each
later kernel loads it back. An optimizer's update of one parameter was three kernels over its
elements: the new first moment and the new second moment (each returned, into the optimizer's
state) and the new parameter, which loaded both back and the gradient a second time; a batch
norm's output, its activation and the saved mask were three more. Run as one kernel, each
element's values are computed in order while in registers, the buffers read once; the stores
stay.

A pointwise kernel is held back in a group of kernels over the same loops (sizes) while each
shares memory with the group (reads or writes a buffer at an element address the group uses,
one that varies with the loops) and every buffer any of them writes is accessed by all of them
at one address, different at each iteration (`elementwise`). Iterations then touch disjoint
elements of all they write, so running each iteration's bodies in program order computes what
the kernels one after another did.

Several groups are held at once (an optimizer updates the first moments of all parameters,
then the rest of each), so a group may run later than kernels emitted after its first: each
group records the groups that must run before it (`after`: one writes what it reads or writes,
or reads what it writes), a kernel joins a group only where that orders no group before
itself, and `PendingKernels.take` returns the groups in an order that keeps every such pair.
CppCodegen emits, before another kernel, the groups that kernel reads from or writes to (and
those they must run after), and every group before any wrapper statement but an allocation,
a size or a kernel launch.
"""

import heapq
from collections import defaultdict
from dataclasses import dataclass, field

import sympy

from .kernel import KernelBuilder, affine_one_to_one

# Bodies per kernel, at most: a longer kernel keeps more streams and values live at once for
# little more saved (an AdamW update is three).
MAX_BODIES = 6
# Groups held at once, at most; more emits them all. An optimizer holds one per parameter
# from its first foreach op to its last (at 32, ViT's 40 parameters each got their first
# moment's kernel apart); a kernel looks up only the groups over its loops sharing a buffer.
MAX_GROUPS = 1024


@dataclass
class Emission:
    kernel: KernelBuilder  # a group's bodies emitted as one kernel
    sizes: list  # its loops (the group's, split or merged: loop_split.py)

    @property
    def body_buffers(self):
        return self.kernel.body_buffers  # one_body


@dataclass(eq=False)
class Group:
    sizes: tuple
    split: bool  # whether its loops are split or merged where the accesses allow
    bodies: list  # body(k, index) callbacks, in program order
    emission: Emission
    origin: object  # the graph node whose lowering started it
    reads: set  # wrapper variables it loads
    writes: set  # and stores
    after: set = field(default_factory=set)  # groups that must run before it


class PendingKernels:
    """The groups held back, with the order they were started in, indexed by their loops and
    by the buffers they read and write: an optimizer's graph holds a group per parameter, and
    each kernel looks up only the groups it could join or must follow."""

    def __init__(self):
        self._held: dict[Group, int] = {}  # group -> its start number
        self._started = 0
        self._by_loops: dict[tuple, list] = defaultdict(list)  # (sizes, split) -> groups
        self._readers: dict[str, set] = defaultdict(set)  # buffer -> groups loading it
        self._writers: dict[str, set] = defaultdict(set)  # and storing it

    def __len__(self):
        return len(self._held)

    def over(self, sizes, split) -> list:
        """The groups over loops `sizes`, split alike, in the order started."""
        return list(self._by_loops.get((sizes, split), ()))

    def conflicts(self, reads, writes) -> set:
        """The groups a kernel reading `reads` and writing `writes` must run after."""
        found = set()
        for base in reads | writes:
            found |= self._writers.get(base, set())
        for base in writes:
            found |= self._readers.get(base, set())
        return found

    def may_join(self, group, conflicts) -> bool:
        """Whether `group` can run after every one of `conflicts` but itself: none of them
        runs after it already."""
        return not any(group in self._before(c) for c in conflicts if c is not group)

    def start(self, group, conflicts):
        group.after |= conflicts
        self._held[group] = self._started
        self._started += 1
        self._by_loops[(group.sizes, group.split)].append(group)
        self._index(group, group.reads, group.writes)

    def join(self, group, emission, body, reads, writes, conflicts):
        group.bodies.append(body)
        group.emission = emission
        group.reads |= reads
        group.writes |= writes
        group.after |= conflicts - {group}
        self._index(group, reads, writes)

    def take(self, reads=None, writes=None) -> list:
        """The groups a kernel reading `reads` and writing `writes` must run after (every
        group where not given), with the groups those must run after, each after those it
        must run after, else in the order started; none of them held any longer. The rest
        stay held: they neither feed that kernel nor read or write what it writes."""
        if reads is None:
            taken = set(self._held)
        else:
            taken = set()
            for group in self.conflicts(reads, writes):
                taken |= {group} | self._before(group)
        ordered = self._in_order(taken)
        for group in ordered:
            self._drop(group)
        return ordered

    def _in_order(self, taken) -> list:
        """`taken` with each group after those it must run after, else in the order started
        (Kahn's algorithm, the earliest started of the ready groups first)."""
        number = self._held
        waiting = {g: len(g.after & taken) for g in taken}
        followers = defaultdict(list)
        for group in taken:
            for before in group.after & taken:
                followers[before].append(group)
        ready = [(number[g], g) for g, count in waiting.items() if count == 0]
        heapq.heapify(ready)
        ordered = []
        while ready:
            _, group = heapq.heappop(ready)
            ordered.append(group)
            for follower in followers[group]:
                waiting[follower] -= 1
                if waiting[follower] == 0:
                    heapq.heappush(ready, (number[follower], follower))
        return ordered

    def _index(self, group, reads, writes):
        for base in reads:
            self._readers[base].add(group)
        for base in writes:
            self._writers[base].add(group)

    def _drop(self, group):
        del self._held[group]
        self._by_loops[(group.sizes, group.split)].remove(group)
        for base in group.reads:
            self._readers[base].discard(group)
        for base in group.writes:
            self._writers[base].discard(group)

    def _before(self, group) -> set:
        """The held groups that run before `group`, transitively (the groups it was ordered
        after that have been emitted since are behind it already)."""
        seen, stack = set(), [g for g in group.after if g in self._held]
        while stack:
            g = stack.pop()
            if g not in seen:
                seen.add(g)
                stack.extend(before for before in g.after if before in self._held)
        return seen


def one_body(bodies):
    """The callback running `bodies` in order at each index. A load of an element an earlier
    body stored is loaded again, not reused from before the store. Each body's loaded and
    stored buffers are recorded in `k.body_buffers`, as (loaded, stored) pairs."""

    def body(k, index):
        k.body_buffers = []
        for each in bodies:
            first = len(k.accesses)
            each(k, index)
            mine = k.accesses[first:]
            k.body_buffers.append(
                (
                    frozenset(a.base for a in mine if not a.is_store),
                    frozenset(a.base for a in mine if a.is_store),
                )
            )
            k.forget_loads({k.params[a.base].name for a in k.accesses if a.is_store})

    return body


def same_buffers(emitted, recorded) -> bool:
    """Whether each body of a new emission loads no buffer and stores the same ones as when
    it was recorded: a lowering reads its arguments' values when emitted, and a value lazy
    when a body was held back may since be in memory another body of the group writes (an
    optimizer's new second moment, inlined in the update, then written for the state)."""
    return len(emitted) == len(recorded) and all(
        loads <= was_loaded and stores == was_stored
        for (loads, stores), (was_loaded, was_stored) in zip(emitted, recorded)
    )


def elementwise(k) -> bool:
    """Whether emitted kernel `k` is one loop nest of element-wise code: no inner loops,
    reductions, row caches or data-dependent indices, and each buffer it writes accessed at
    one address, different at each iteration."""
    if (
        len(k.phases) != 1
        or k.phases[0].inner
        or k.fused_reductions
        or k.unfused
        or k.computed
        or k.plan_row_caches()
    ):
        return False
    accesses = _accesses(k)
    varying = _varying(k)
    at_unit_loops = {v: 0 for v in k.unit_loops}  # a layout may drop a size-1 dim's term
    for base in stored(k):
        mine = [a for a in accesses if a.base == base]
        if (
            any(a.overlaps for a in mine)
            or len({a.address.subs(at_unit_loops) for a in mine}) != 1
            or not _one_to_one(mine[0], varying, k.extents)
        ):
            return False
    return True


def _one_to_one(access, varying, extents) -> bool:
    """Whether `access` reaches a different element at each iteration: its index affine in
    the loops with full rank, or its address (a merged loop reads [64, 64] at (i // 64,
    i % 64), address i) affine in them with static coefficients, each larger than the span
    of the smaller ones."""
    if affine_one_to_one(access.index, varying):
        return True
    address = access.address
    if not address.is_polynomial(*varying) or any(sympy.degree(address, v) > 1 for v in varying):
        return False
    coefficients = [address.coeff(v) for v in varying]
    if not all(c.is_Integer and c != 0 and v in extents for c, v in zip(coefficients, varying)):
        return False
    span = 0
    for coefficient, v in sorted(zip(coefficients, varying), key=lambda cv: abs(int(cv[0]))):
        if abs(int(coefficient)) <= span:
            return False
        span += abs(int(coefficient)) * (int(extents[v]) - 1)
    return True


def shares(a, b) -> bool:
    """Whether kernels `a` and `b` both access some buffer element by element: at addresses
    varying with their loops (which each may split otherwise: loop_split.py), or at all in a
    kernel of one element."""
    return bool(_spanned(a) & _spanned(b))


def _spanned(k) -> set:
    varying = set(_varying(k))
    return {x.base for x in _accesses(k) if not varying or x.address.free_symbols & varying}


def loaded(k) -> set:
    return {a.base for a in _accesses(k) if not a.is_store}


def stored(k) -> set:
    return {a.base for a in _accesses(k) if a.is_store}


def _accesses(k):
    return [access for part in k.phases[0].accesses for access in part]


def _varying(k):
    return [v for v in k.outer if v not in k.unit_loops]
