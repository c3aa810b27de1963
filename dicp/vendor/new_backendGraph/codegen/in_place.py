"""Which input's memory a kernel may write its output into (WrapperBuilder.offer_in_place).

A pointwise kernel after a convolution or a matrix product (batch norm, bias, activation)
reads each element of the product once, where it writes its own output. Writing into the
product's memory instead of a new buffer saves the new buffer's page faults and half the
memory traffic, as Inductor's in-place buffers do. It is safe when every element of the input
is read only by the iteration that writes the same element of the output, before it writes it:
iterations then never see each other's writes, run in any order, in parallel or as vector
lanes.
"""

import dataclasses

import sympy

from . import loop_ir as L


def in_place_source(k, may_share):
    """The (output, source) Params of kernel `k` (a KernelBuilder) where an output may take
    the memory of input `source`, or None. `may_share(output base, source base)` says
    whether their buffers are alike (dtype, extent) and private."""
    return next(sources_read_where_stored(k, may_share), None)


def sources_read_where_stored(k, candidate):
    """The (output, source) Params of kernel `k`: each output it stores once and each input
    whose every element the kernel reads only where it writes the output's, before writing
    it, among those for which `candidate(output base, source base)` holds; generated one by
    one (each test walks the kernel's statements). A kernel of several outputs (a group of
    pointwise kernels: horizontal.py) writes each into memory of its own, so a pair holds
    whatever the others store."""
    at_unit_loops = {v: 0 for v in k.unit_loops}
    for output in [p for p in k.params.values() if p.writable]:
        store = _only_store(k.phases, output.name)
        if store is None:
            continue
        for source in k.params.values():
            if (
                not source.writable
                and candidate(output.base, source.base)
                and _read_only_before(k.phases, store, source.name, at_unit_loops)
            ):
                yield output, source


def _only_store(phases, pointer):
    """(phase number, part, index in the part, position) of the one store to `pointer`, or
    None where the kernel stores to it more than once or inside a branch or loop of its own."""
    found = [
        (number, part, index, statement)
        for number, phase in enumerate(phases)
        for part in _PARTS
        for index, statement in enumerate(getattr(phase, part))
        if any(isinstance(s, L.Store) and s.pointer == pointer for s in L.walk([statement]))
    ]
    if len(found) != 1 or not isinstance(found[0][3], L.Store):
        return None
    number, part, index, statement = found[0]
    return number, part, index, statement.position


_PARTS = ("pre", "body", "post")


def _read_only_before(phases, store, pointer, at_unit_loops):
    """Whether every load of `pointer` reads, before the store, an element the same outer
    iteration stores: in the store's own statement list ahead of it, at its position; or in
    an earlier phase (a norm's or softmax's reduction over the row, a max's rescan) at the
    position with that phase's inner loops renamed to the store's. Earlier phases finish
    before the store's starts, and no other outer iteration stores that row. Loop variables
    over one element count as 0 (a layout may drop a size-1 dim's term)."""
    number, part, index, position = store
    stored_in = phases[number]
    position = _at(position, at_unit_loops)
    for earlier, phase in enumerate(phases):
        for name in _PARTS:
            statements = getattr(phase, name)
            if earlier == number and name == part:
                ahead, after = statements[:index], statements[index:]
                if _loads(after, pointer) or any(
                    _at(load.position, at_unit_loops) != position for load in _loads(ahead, pointer)
                ):
                    return False
                continue
            loads = _loads(statements, pointer)
            renaming = (
                _renaming(phase, stored_in)
                if earlier < number and _loops_keep_bounds(statements, phase)
                else None
            )
            if loads and (
                renaming is None
                or any(
                    _at(load.position, {**at_unit_loops, **renaming}) != position for load in loads
                )
            ):
                return False
    return True


def _loops_keep_bounds(statements, phase):
    """Whether each loop of `statements` over one of the phase's inner variables runs within
    the phase's bounds for it (a max's rescan for a signed zero, after its loop)."""
    bounds = {str(var): (lo, hi) for var, lo, hi in phase.inner}
    for loop in (s for s in L.walk(statements) if isinstance(s, L.Loop)):
        if loop.var.name in bounds and any(
            sympy.expand(_index(mine) - theirs) != 0
            for mine, theirs in zip((loop.lo, loop.hi), bounds[loop.var.name])
        ):
            return False
    return True


def _index(value):
    return value.expr if isinstance(value, L.Index) else value


def _renaming(phase, stored_in):
    """The inner loop variables of `phase` as those of `stored_in`, or None where their loops
    differ."""
    if not phase.inner or len(phase.inner) != len(stored_in.inner):
        return None
    pairs = list(zip(phase.inner, stored_in.inner))
    if any(
        sympy.expand(lo - lo2) != 0 or sympy.expand(hi - hi2) != 0
        for (_, lo, hi), (_, lo2, hi2) in pairs
    ):
        return None
    return {var: var2 for (var, _, _), (var2, _, _) in pairs}


def _at(position, values):
    return sympy.expand(sympy.sympify(position).subs(values, simultaneous=True))


def _loads(node, pointer):
    """Every Load of `pointer` inside a statement or expression, nested ones included."""
    if isinstance(node, L.Load):
        return [node] if node.pointer == pointer else []
    if isinstance(node, (list, tuple)):
        return [load for item in node for load in _loads(item, pointer)]
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        return [
            load
            for field in dataclasses.fields(node)
            for load in _loads(getattr(node, field.name), pointer)
        ]
    return []
