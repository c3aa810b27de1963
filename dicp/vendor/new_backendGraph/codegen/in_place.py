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
    """The (output, source) Params of kernel `k` (a KernelBuilder) where its one output may
    take the memory of input `source`, or None. `may_share(output base, source base)` says
    whether their buffers are alike (dtype, layout) and private."""
    writable = [p for p in k.params.values() if p.writable]
    if len(writable) != 1:
        return None
    output = writable[0]
    store = _only_store(k.phases, output.name)
    if store is None:
        return None
    at_unit_loops = {v: 0 for v in k.unit_loops}
    for source in k.params.values():
        if source is not output and may_share(output.base, source.base) and \
                _read_only_before(k.phases, store, source.name, at_unit_loops):
            return output, source
    return None


def _parts(phases):
    return [statements for phase in phases for statements in (phase.pre, phase.body, phase.post)]


def _only_store(phases, pointer):
    """(the statement list holding the one store to `pointer`, its index there, its
    position), or None where the kernel stores to it more than once or inside a branch or
    loop of its own."""
    found = [(statements, number, statement) for statements in _parts(phases)
             for number, statement in enumerate(statements)
             if any(isinstance(s, L.Store) and s.pointer == pointer for s in L.walk([statement]))]
    if len(found) != 1 or not isinstance(found[0][2], L.Store):
        return None
    statements, number, statement = found[0]
    return statements, number, statement.position


def _read_only_before(phases, store, pointer, at_unit_loops):
    """Whether every load of `pointer` in the kernel is in the store's statement list, ahead
    of the store, at the store's position (loop variables over one element taken as 0: a
    layout may drop a size-1 dim's term)."""
    statements, number, position = store
    everywhere = sum(len(_loads(part, pointer)) for part in _parts(phases))
    ahead = [load for statement in statements[:number] for load in _loads(statement, pointer)]
    same = lambda a, b: sympy.sympify(a).subs(at_unit_loops) == sympy.sympify(b).subs(at_unit_loops)  # noqa: E731
    return len(ahead) == everywhere and all(same(load.position, position) for load in ahead)


def _loads(node, pointer):
    """Every Load of `pointer` inside a statement or expression, nested ones included."""
    if isinstance(node, L.Load):
        return [node] if node.pointer == pointer else []
    if isinstance(node, (list, tuple)):
        return [load for item in node for load in _loads(item, pointer)]
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        return [load for field in dataclasses.fields(node)
                for load in _loads(getattr(node, field.name), pointer)]
    return []
