"""Loops split where an index divides them, and merged where every access reads two as one.

A pointwise kernel over a view often reads its source at i // c and i % c: the [512, 256]
result of `(probs @ v).transpose(1, 2).reshape(b, t, d)` reads its [4, 4, 128, 64] source at
(i1 // 64, i1 % 64), per element, and g++ then loads with gathers. Split into loops over
(i1 // 64, i1 % 64), the same kernel indexes every dim linearly in its loop variables and the
innermost loop reads 64 contiguous floats (the kernel: 34 -> 10 us).

The other way round, a kernel over a [64, 64, 3, 3] convolution weight (an optimizer's update)
looped over four dims with an innermost loop of 3, too short to vectorize, where every access
reads the weight's dims as one run of 36,864 elements. Merged into one loop, it vectorizes:
Adam's update of the weight, 35 -> 6 us.
"""

import sympy

from .kernel import KernelBuilder
from .sym import IDiv, IMod, is_static, loop_index, product, static_extents


def split_loops(sizes, body):
    """(sizes, body) of a pointwise kernel (body(k, index) with index over `sizes`), with each
    static dim that its accesses divide by constants split into one loop per quotient; where
    none is, with adjacent dims merged (merge_loops)."""
    variables = loop_index(len(sizes))
    probe = KernelBuilder("probe", variables)
    body(probe, variables)
    parts = [
        _parts(size, _divisors(probe.accesses, variable))
        for size, variable in zip(sizes, variables)
    ]
    if all(len(p) == 1 for p in parts):
        return merge_loops(sizes, body, probe.accesses)
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
    if not is_static(size):
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


def merge_loops(sizes, body, accesses):
    """(sizes, body) with each run of adjacent static dims that every access (`accesses`, the
    body's on `sizes`) addresses as one merged into one loop; the body gets each merged dim's
    index back by division. Taken only where, in the merged kernel, no index divides a merged
    loop's variable: the body may use an index other than to address memory (a mask, iota)."""
    if any(size == 0 for size in sizes):  # no element: nothing to gain, and no division by 0
        return sizes, body
    variables = loop_index(len(sizes))
    addresses = [access.address for access in accesses]
    groups = []
    for d in range(len(sizes)):
        if groups and _reads_as_one(groups[-1], d, sizes, variables, addresses):
            groups[-1].append(d)
        else:
            groups.append([d])
    if len(groups) == len(sizes):
        return sizes, body
    merged_sizes = [product(sizes[d] for d in group) for group in groups]

    def merged_body(k, merged_index):
        index = []
        for group, variable in zip(groups, merged_index):
            index += _split_index(variable, [sizes[d] for d in group])
        return body(k, index)

    merged = loop_index(len(groups))
    probe = _IndexProbe(merged, static_extents(merged, merged_sizes))  # as a kernel's
    merged_body(probe, merged)
    joined = {v for v, group in zip(merged, groups) if len(group) > 1}
    if any(_divides_any(expr, joined) for expr in probe.indices):
        return sizes, body
    return merged_sizes, merged_body


def _reads_as_one(group, d, sizes, variables, addresses):
    """Whether dim `d` joins `group` (the dims before it): both static, and every address
    steps over `d`'s whole extent as it steps once over the group's innermost dim of more than
    one element. A dim of one element joins any group: its index is always 0."""
    if not all(is_static(sizes[e]) for e in (*group, d)):
        return False
    anchors = [e for e in group if sizes[e] != 1]
    if sizes[d] == 1 or not anchors:
        return True
    outer, inner = variables[anchors[-1]], variables[d]
    loop_vars = set(variables)
    for address in addresses:
        a, b = _coefficient(address, outer, loop_vars), _coefficient(address, inner, loop_vars)
        if a is None or b is None or sympy.expand(a - b * sizes[d]) != 0:
            return False
    return True


def _coefficient(address, variable, loop_vars):
    """c where `address` is c * variable + terms free of it, c free of loop variables; None
    where `variable` appears otherwise (divided, or times another loop variable)."""
    total = sympy.Integer(0)
    for term in sympy.Add.make_args(address):
        if not term.has(variable):
            continue
        coefficient, rest = term.as_independent(variable, as_Add=False)
        if rest != variable or coefficient.free_symbols & loop_vars:
            return None
        total += coefficient
    return total


def _split_index(variable, extents):
    """Each dim's index from `variable` running over the dims of `extents` as one, row-major."""
    index = []
    for position in range(len(extents)):
        inner = product(extents[position + 1 :])
        quotient = IDiv(variable, inner)
        index.append(quotient if position == 0 else IMod(quotient, extents[position]))
    return index


def _divides_any(expr, variables):
    return any(
        isinstance(e, (IDiv, IMod)) and e.free_symbols & variables
        for e in sympy.preorder_traversal(expr)
    )


class _IndexProbe(KernelBuilder):
    """A probe kernel that keeps every index expression its body emits, addresses or not."""

    def __init__(self, variables, extents):
        super().__init__("probe", variables)
        self.extents = extents
        self.indices = []

    def index(self, expr):
        index = super().index(expr)
        self.indices.append(index.expr)
        return index
