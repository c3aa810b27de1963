"""Memory planning over the wrapper IR (wrapper_ir.py), as Inductor's wrapper plans its
AllocateLine, ReuseLine and FreeIfNotReusedLine: outputs written in place of inputs that die at
their kernel, new buffers in the memory of dead ones, and a Free after each last use.

`plan_memory(wrapper)` reads what the WrapperBuilder recorded while codegen appended
statements: the private buffers (memory only this wrapper views), their dtypes and layouts,
where each allocation is, the in-place offers and the calls that take `out=`.
"""

import sympy

from . import wrapper_ir as W
from .symbolic import is_dense, last_offset


def plan_memory(wrapper) -> list:
    """The wrapper's statements with memory planned, Frees included."""
    returned = wrapper.returned()
    blocks = [[s] for s in wrapper.statements]  # each statement and what replaces it
    elided = _elide_copies(wrapper, blocks, returned)
    in_place = _reuse_dying_sources(wrapper, blocks, returned, elided)
    statements = [s for block in blocks for s in block]
    statements = _reuse_dead_memory(wrapper, statements, in_place, returned)
    return W.with_frees(statements, keep=returned, inputs=wrapper.tensor_inputs)


def same_extent(layout, other):
    """Whether two layouts, (sizes, strides) each, span as many elements from their first."""
    return sympy.expand(last_offset(*layout) - last_offset(*other)) == 0


def fits(wrapper, name, donor):
    """Whether buffer `name` can take buffer `donor`'s memory: the same dtype, each element
    at an address of its own in both (an expanded output's later stores would feed its own
    loads), the same extent of memory (a [4, 128, 256] sum may take a [512, 256] product's)."""
    if (
        wrapper.dtypes.get(name) != wrapper.dtypes.get(donor)
        or donor not in wrapper.layouts
        or name not in wrapper.layouts
    ):
        return False
    if not all(is_dense(*wrapper.layouts[n]) for n in (name, donor)):
        return False
    return same_extent(wrapper.layouts[name], wrapper.layouts[donor])


def _elide_copies(wrapper, blocks, returned) -> set:
    """Take (in `blocks`) each copy offer (WrapperBuilder.offer_copy_elision) that is safe: the
    copy is the source's last use, neither is returned, no statement after it names the
    target, and nothing before it that names the target could see it change early: before
    the source's allocation only sizes, kernels (which make no views) and library calls
    returning new memory; from there only kernels reading it where they write the source.
    The source is then the target's memory (InPlaceOf, its allocation gone) and the copy
    goes, unless at run time the target shares its storage with another input (a
    StoragesApart first tests every taken target against every other input): then the source
    is new memory copied into the target at the end (CopyBack), the plan without elision.
    An elided source is no private buffer: its memory is the input's, never reused or
    written in place of. Returns the sources taken."""
    statements = wrapper.statements
    last_use = W.last_uses(statements)
    naming = _statements_naming(statements, {target for target, _, _ in wrapper.copy_offers})
    taken = {}  # source -> target
    for target, source, call in wrapper.copy_offers:
        allocation = wrapper.allocations[source]
        if (
            {target, source} & returned
            or last_use.get(source) != call
            or last_use.get(target) != call
            or not isinstance(statements[allocation], W.Allocate)
            or not all(
                _reads_target_safely(wrapper, statements[n], n, allocation, target, source)
                for n in naming[target]
                if n < call
            )
        ):
            continue
        blocks[allocation], blocks[call] = [], []
        wrapper.private.discard(source)
        taken[source] = target
    if taken:
        apart = wrapper.fresh("storages_apart")
        targets = tuple(taken.values())
        others = tuple(t for t in wrapper.tensor_inputs if t not in targets)
        in_place = [W.InPlaceOf(s, t, apart) for s, t in taken.items()]
        spans = tuple(wrapper.input_bytes.get(name) for name in (*targets, *others))
        fixed = None not in spans  # each input's range the same at every call
        test = W.StoragesApart(apart, targets, others, spans if fixed else None)
        blocks[0] = [test, *in_place, *blocks[0]]
        blocks[-1] = [*blocks[-1], *(W.CopyBack(t, s, apart) for s, t in taken.items())]
    return set(taken)


def _statements_naming(statements, names: set) -> dict[str, list[int]]:
    """Name in `names` -> the numbers of the statements naming it, in order: read once for
    all copy offers (an optimizer's graph offers one per parameter and state)."""
    naming: dict[str, list[int]] = {name: [] for name in names}
    for number, statement in enumerate(statements):
        for name in statement.variables() & names:
            naming[name].append(number)
    return naming


def _reads_target_safely(wrapper, statement, number, allocation, target, source):
    if number >= allocation:
        return (source, target, number) in wrapper.reads_where_stored
    if isinstance(statement, W.CallLibrary):  # a result of new memory views no input
        return set(statement.binds()) <= wrapper.private
    return isinstance(statement, (W.SizeOf, W.CallKernel))


def _reuse_dying_sources(wrapper, blocks, returned, elided):
    """Take (in `blocks`) each in-place offer where its source dies at the call and nothing
    between the output's allocation and the call names the output (a concatenation's earlier
    kernels write into it); none involving a source whose copy was `elided` (its memory is an
    input's). The allocation goes; the output is bound to the source just before the call.
    Taking an offer moves no name's last use (the call names both), so one pass decides every
    offer, chains (a kernel in place of a buffer that itself took another's memory) included.
    Returns the offers taken, output -> source."""
    statements = wrapper.statements
    last_use = W.last_uses(statements)
    taken = {}
    for output, source, call in wrapper.in_place_offers:
        allocation = wrapper.allocations[output]
        if (
            source in returned
            or {output, source} & elided
            or last_use.get(source) != call
            or any(output in s.variables() for s in statements[allocation + 1 : call])
        ):
            continue
        blocks[allocation] = []
        blocks[call] = [_taking(wrapper, output, source, in_place=True), *blocks[call]]
        taken[output] = source
    return taken


def _taking(wrapper, name, memory, in_place=False):
    """`name` bound to `memory`'s memory: itself, or seen with `name`'s strides where they
    differ on dims of size 1."""
    layout = wrapper.layouts[name]
    if wrapper.layouts[memory] == layout:
        return W.Reuse(name, memory, in_place=in_place)
    sizes, strides = layout
    return W.Reuse(name, memory, sizes, strides, in_place)


class _Pool:
    """Memory groups (a buffer and those in place of it or reusing it) and the dead ones."""

    def __init__(self):
        self.group = {}  # buffer -> the first buffer of its memory
        self.members = {}  # first buffer -> every buffer on that memory
        self.dead = []  # names of dead memory, oldest first
        self.pooled = set()  # first buffers of the memory in `dead`

    def start(self, name):
        self.group[name], self.members[name] = name, {name}

    def join(self, name, root):
        self.group[name] = root
        self.members[root] = self.members[root] | {name}


def _reuse_dead_memory(wrapper, statements, in_place, returned):
    """`statements` with each new buffer taking the memory of a dead one of the same dtype and
    extent where there is one, as Inductor's wrapper reuses buffers: memory just freed is in
    cache and mapped, a fresh allocation of a few MB is neither (five matrix products of a
    LLaMA block: 4.9 ms into fresh results, 4.6 ms into reused ones). Memory is dead after
    the last statement naming any of its group, if all are private and none is returned. A
    kernel writes every element of its output, so stale contents are never read.
    `in_place`: the outputs written in place of a source, output -> source."""
    last_use = W.last_uses(statements)
    pool = _Pool()
    out = []
    for number, statement in enumerate(statements):
        statement = _take_dead_memory(wrapper, statement, in_place, pool)
        out.append(statement)
        for name in sorted(statement.variables()):
            root = pool.group.get(name)
            members = pool.members.get(root, set())
            if (
                root is not None
                and root not in pool.pooled
                and last_use.get(name) == number
                and all(last_use.get(m, -1) <= number for m in members)
                and not members & returned
                and members <= wrapper.private
            ):
                pool.dead.append(name)
                pool.pooled.add(root)
    return out


def _created(statement):
    """The buffer a statement creates memory for (an allocation, a call's result), or None."""
    if isinstance(statement, (W.Allocate, W.CallLibrary, W.CallEager)):
        return statement.binds()[0]
    if isinstance(statement, W.Reuse) and statement.in_place:
        return statement.name
    return None


def _take_dead_memory(wrapper, statement, in_place, pool):
    """One statement, rewritten to take dead memory if it allocates or writes a result; a
    statement creating a private buffer starts (or joins) a group of memory."""
    name = _created(statement)
    if name is None:
        return statement
    if name in in_place:
        root = pool.group.get(in_place[name])
        if root is not None:
            pool.join(name, root)
        return statement
    if name not in wrapper.private or name not in wrapper.dtypes:
        return statement  # no buffer of its own: a view, another call's result
    allocates = (
        isinstance(statement, W.Allocate)
        and name in wrapper.allocations
        and statement.offset is None
    )
    takes_memory = allocates or (
        isinstance(statement, W.CallLibrary) and name in wrapper.writes_out
    )  # else a convolution's result
    donor = next((d for d in pool.dead if fits(wrapper, name, d)), None) if takes_memory else None
    if donor is None:
        pool.start(name)
        return statement
    pool.dead.remove(donor)
    root = pool.group[donor]
    pool.pooled.discard(root)
    pool.join(name, root)
    if allocates:
        return _taking(wrapper, name, donor)
    sizes, strides = wrapper.layouts[name]
    return statement.with_kwarg("out", W.TensorView(donor, wrapper.dtypes[name], sizes, strides))
