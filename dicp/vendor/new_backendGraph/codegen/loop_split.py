"""Loops split where an index divides them.

A pointwise kernel over a view often reads its source at i // c and i % c: the [512, 256]
result of `(probs @ v).transpose(1, 2).reshape(b, t, d)` reads its [4, 4, 128, 64] source at
(i1 // 64, i1 % 64), per element, and g++ then loads with gathers. Split into loops over
(i1 // 64, i1 % 64), the same kernel indexes every dim linearly in its loop variables and the
innermost loop reads 64 contiguous floats (the kernel: 34 -> 10 us).
"""

import sympy

from .kernel import KernelBuilder
from .sym import IDiv, IMod, loop_index


def split_loops(sizes, body):
    """(sizes, body) of a pointwise kernel (body(k, index) with index over `sizes`), with each
    static dim that its accesses divide by constants split into one loop per quotient."""
    variables = loop_index(len(sizes))
    probe = KernelBuilder("probe", variables)
    body(probe, variables)
    parts = [
        _parts(size, _divisors(probe.accesses, variable))
        for size, variable in zip(sizes, variables)
    ]
    if all(len(p) == 1 for p in parts):
        return sizes, body
    split_sizes = [extent for p in parts for extent in p]

    def split_body(k, split_index):
        position, index = 0, []
        for p in parts:
            index.append(_compose(split_index[position : position + len(p)], p))
            position += len(p)
        return body(k, index)

    return split_sizes, split_body


def _divisors(accesses, variable):
    """The constants c with variable // c or variable % c in an access's address (a view and
    its inverse, a [4, 128, 688] view of a [512, 688] product read back as [512, 688], fold
    them away: splitting that loop gains nothing)."""
    found = set()
    for access in accesses:
        for e in sympy.preorder_traversal(access.address):
            if isinstance(e, (IDiv, IMod)) and e.args[0] == variable and e.args[1].is_Integer:
                found.add(int(e.args[1]))
    return found


def _parts(size, divisors):
    """The extents, outermost first, of the loops that replace one of `size`: a chain of the
    divisors each dividing the next and the size (the smaller ones first)."""
    if not isinstance(size, (int, sympy.Integer)):
        return [size]
    chain = []
    for c in sorted(divisors):
        if 1 < c < size and size % c == 0 and all(c % d == 0 for d in chain):
            chain.append(c)
    bounds = [int(size)] + chain[::-1] + [1]
    return [bounds[j] // bounds[j + 1] for j in range(len(bounds) - 1)]


def _compose(variables, extents):
    """The original loop variable from its split ones: sum of each times the inner extents."""
    index, scale = sympy.Integer(0), 1
    for variable, extent in zip(reversed(variables), reversed(extents)):
        index += variable * scale
        scale *= extent
    return index
