"""Transposing kernels: a pointwise kernel whose store walks memory along one dim while one of
its loads walks it along another (a channels-last activation returned in eager's NCHW layout,
`x.transpose(-2, -1).contiguous()`).

Looped in the store's order, that load takes each element from another cache line, and every
store lands a multiple of 4 KiB from a pending load, which the CPU cannot tell apart from a
dependence: ReLU(BN(x)) of a 4x64x64x64 channels-last x into NCHW took 1.25 ms, 7.7x the same
kernel without the transpose, and tiling the loops alone did not help (1.24 ms). Instead the
kernel runs over TILE x TILE tiles of the two dims: a first phase computes a tile into a local
array, reading along the load's contiguous dim, and a second stores it along the store's
(0.31 ms). Inductor transposes tiles in registers (at::vec's transpose_mxn); a local array
keeps the generated C++ plain.
"""

import sympy

from .ctypes_map import compute_ctype
from .values import Buffer
from .kernel import KernelBuilder
from .loop_ir import Assign, Declare, Element, Var
from .sym import block_count, block_extent, loop_index

TILE = 16
MIN_EXTENT = 8  # a dim shorter than this is not worth a tile


def transposed_dims(value, out_strides):
    """(load dim, store dim) when storing `value` with `out_strides` walks memory along the
    store dim (its stride is 1) while a load of `value` walks it along the load dim, else None.
    Only for static sizes and loads whose address is linear in both dims' loop variables
    (others may sit in divisions: a head split of a fused QKV projection)."""
    sizes = value.sizes
    store_dims = [
        d
        for d, (size, stride) in enumerate(zip(sizes, out_strides))
        if stride == 1 and _static_at_least(size)
    ]
    if not store_dims or isinstance(value, Buffer):
        return None
    variables, probe = _probe(value)
    if probe.computed:
        return None
    store_var = variables[store_dims[0]]
    for address in (access.address for access in probe.accesses):  # a property: expands
        if abs(_coefficient(address, store_var) or 0) <= 1:
            continue
        for d, var in enumerate(variables):
            if (
                d != store_dims[0]
                and _static_at_least(sizes[d])
                and _coefficient(address, var) == 1
            ):
                return d, store_dims[0]
    return None


def contiguous_dim(value):
    """The dim of `value` along which each of its loads walks memory contiguously (a
    coefficient of 1 in that dim's loop variable; loads that do not move along it, a
    broadcast per-channel statistic, aside), else None. A channels-last activation read in
    its logical NCHW order gives its channel dim."""
    sizes = value.sizes
    variables, probe = _probe(value)
    if probe.computed or not probe.accesses:
        return None
    candidates = {d for d, size in enumerate(sizes) if _static_at_least(size, 2)}
    for address in (access.address for access in probe.accesses):
        moving = {d for d in candidates if _coefficient(address, variables[d]) != 0}
        if moving:
            candidates &= {d for d in moving if _coefficient(address, variables[d]) == 1}
    return next(iter(candidates)) if len(candidates) == 1 else None


def copies_to_walk(value, dim, summed):
    """The reads of `value` to copy into another layout so that every load of an element per
    row (moving along the `summed` dims) that moves along `dim` walks memory along it
    contiguously, each as (access, the dim of its buffer that `dim`'s variable indexes, to lay
    innermost); [] where all do already. None where a load that does not cannot be copied so
    (`dim`'s variable is not one of its buffer's indices), or where fewer than half of those
    loads walk it already (then rows read contiguously). A statistic of the rows (a softmax's
    row maximum) is no such load: it walked the row dim of a cross entropy's logits and had
    them copied column-major. A batch norm backward at a compiled module's output reads
    channels-last activations beside the NCHW gradient AOTAutograd hands it: summed over
    blocks of channels, the gradient's elements came from lines 4 KiB apart, which share a cache set
    (a group norm's backward over 16 channels of 4x32x32: 6.9 ms on one thread); summed
    channel by channel, each channels-last read crossed every cache line once per channel."""
    if not _static_at_least(value.sizes[dim], 2):
        return None
    variables, probe = _probe(value)
    if probe.computed:
        return None
    var, moving, walking, copies = variables[dim], 0, 0, []
    for access in (a for a in probe.accesses if not a.is_store):
        coefficient = _coefficient(access.address, var)
        if coefficient == 0 or all(_coefficient(access.address, variables[d]) == 0 for d in summed):
            continue  # the same element all along `dim` or along the rows: a statistic
        moving += 1
        if coefficient == 1:
            walking += 1
            continue
        indexed = [d for d, index in enumerate(access.index) if index == var]
        if coefficient is None or not indexed:
            return None
        copies.append((access, indexed[0]))
    return copies if moving and 2 * walking >= moving else None


def _probe(value):
    """(the loop variables of `value`'s dims, a scratch kernel holding one element of it)."""
    variables = loop_index(len(value.sizes))
    probe = KernelBuilder("probe", variables)
    value.load(probe, variables)
    return variables, probe


def _static_at_least(size, least=MIN_EXTENT):
    size = sympy.sympify(size)
    return size.is_Integer and size >= least


def _coefficient(address, var):
    """The integer a when `address` (expanded) is a * var + (terms free of var), else None
    (var inside a division or modulo, or a symbolic a)."""
    a = address.coeff(var)
    if not sympy.sympify(a).is_Integer or var in sympy.expand(address - a * var).free_symbols:
        return None
    return int(a)


def transposing_kernel(g, value, out, load_dim, store_dim):
    """Store `value` into buffer `out` tile by tile (see the module's docstring)."""
    rank = len(value.sizes)
    others = [d for d in range(rank) if d not in (load_dim, store_dim)]
    blocks = [block_count(value.sizes[d], TILE) for d in (load_dim, store_dim)]
    outer = loop_index(len(others) + 2)
    load_block, store_block = outer[-2:]
    load_width, store_width = (
        block_extent(value.sizes[d], TILE, block)
        for d, block in ((load_dim, load_block), (store_dim, store_block))
    )
    tile = Var("tile", compute_ctype(value.dtype), (TILE, TILE))

    def index(outer, load_position, store_position):
        result = [None] * rank
        for d, var in zip(others, outer):
            result[d] = var
        result[load_dim] = TILE * outer[-2] + load_position
        result[store_dim] = TILE * outer[-1] + store_position
        return result

    def declare(k, outer):
        k.add(Declare(tile, aligned=True))

    def compute(k, outer, inner):
        store_position, load_position = inner
        element = value.load(k, index(outer, load_position, store_position))
        k.add(Assign(Element(tile, (k.index(store_position), k.index(load_position))), element))

    def store(k, outer, inner):
        load_position, store_position = inner
        out.store(
            k,
            index(outer, load_position, store_position),
            Element(tile, (k.index(store_position), k.index(load_position))),
        )

    g.phased_kernel(
        [value.sizes[d] for d in others] + blocks,
        [
            dict(
                pre=declare,
                inner=[(0, store_width), (0, load_width)],
                body=compute,
                post=None,
                simd="",
            ),
            dict(
                pre=None, inner=[(0, load_width), (0, store_width)], body=store, post=None, simd=""
            ),
        ],
    )
