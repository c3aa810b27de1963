"""Index arithmetic over loop variables and sizes, as sympy (its C++ is cpp_render's)."""

import sympy

from dicp.api import is_dense, py_expr, same_layout, same_size  # noqa: F401


class IDiv(sympy.Function):
    """Floor division of non-negative integers (index arithmetic)."""

    is_integer = True

    @classmethod
    def eval(cls, a, b):
        if b == 1:
            return a
        if a == 0:
            return sympy.Integer(0)
        if a.is_Integer and b.is_Integer:
            return sympy.Integer(int(a) // int(b))
        return None


class Narrow32(sympy.Function):
    """A term of a load's position made of data-dependent indices, known to lie in int32's
    range for every valid index (kernel.KernelBuilder.load), printed as a 32-bit value. g++ runs a
    vector loop whose gathered element is addressed through a 64-bit computed index with
    scalar code, and vectorizes it with a 32-bit one: a Swin window softmax's relative-position
    bias, rows of 16, took 425 us against 137 us."""

    is_integer = True


class IMod(sympy.Function):
    """Remainder of non-negative integers (index arithmetic)."""

    is_integer = True

    @classmethod
    def eval(cls, a, b):
        if b == 1 or a == 0:
            return sympy.Integer(0)
        if a.is_Integer and b.is_Integer:
            return sympy.Integer(int(a) % int(b))
        return None


class WrapIndex(sympy.Function):
    """An ATen index or slice bound counted from the end when negative: `index + size` if
    `index < 0`, else `index`. Under dynamic shapes an index argument is a symbol whose sign
    is only known when the kernel runs."""

    is_integer = True

    @classmethod
    def eval(cls, index, size):
        if index.is_nonnegative:
            return index
        if index.is_negative:
            return index + size
        return None


def wrap_index(index, size):
    """`index` (ATen's convention: negative counts from the end) as a position in [0, size)."""
    return WrapIndex(sympy.sympify(index), sympy.sympify(size))


def clamp_bound(bound, size):
    """A slice bound as ATen takes it: wrapped when negative, then clamped to [0, size]."""
    return sympy.Min(sympy.Max(wrap_index(bound, size), 0), sympy.sympify(size))


def index_var(prefix, i):
    return sympy.Symbol(f"{prefix}{i}", integer=True, nonnegative=True)


def loop_index(rank, prefix="i"):
    """The loop variables of a kernel's outer ("i") or inner ("r") loops."""
    return [index_var(prefix, d) for d in range(rank)]


def product(values):
    result = sympy.Integer(1)
    for value in values:
        result = result * value
    return result


def is_static(size):
    """Whether a size is known at compile time (an int, not a symbol or an expression)."""
    return isinstance(size, (int, sympy.Integer))


def static_extents(variables, sizes):
    """Loop variable -> extent, for the loops of static extent (index simplification)."""
    return {v: int(size) for v, size in zip(variables, sizes) if is_static(size)}


def size_extents(variables, sizes):
    """Loop variable -> extent, for the loops whose extent is an expression in sizes (dynamic
    shapes; index simplification only: `static_extents` is what other passes read)."""
    return {v: sympy.sympify(size) for v, size in zip(variables, sizes) if not is_static(size)}


def contiguous_strides(sizes):
    strides, running = [], sympy.Integer(1)
    for size in reversed(sizes):
        strides.append(running)
        running = running * size
    return list(reversed(strides))


def flat_index(index, strides):
    return fold_div_mod(
        sympy.expand(sum((i * s for i, s in zip(index, strides)), sympy.Integer(0)))
    )


def fold_div_mod(expr):
    """`expr` with each pair c*IMod(y, n) + c*n*IDiv(y, n) folded into c*y, as
    y = n*(y div n) + y mod n (for C++'s truncating / and % too). A view and its inverse (a
    [4, 128, 688] view of a [512, 688] product read as [512, 688]) then index the memory as
    the product does: one multiply-add instead of a division per row, and an access a kernel
    can see is the same element as its store (in_place.py)."""
    if not isinstance(expr, sympy.Add) or not expr.has(IMod):  # most indices: no pair to fold
        return expr
    terms = list(expr.args)
    folded = True
    while folded:
        folded = _fold_one_pair(terms)
    return sympy.Add(*terms)


def _fold_one_pair(terms) -> bool:
    for i, mod_term in enumerate(terms):
        coefficient, mod = _split(mod_term, IMod)
        if mod is None:
            continue
        y, n = mod.args
        for j, div_term in enumerate(terms):
            scale, div = _split(div_term, IDiv)
            if (
                div is not None
                and _divides_like(div, y, n)
                and sympy.expand(scale - coefficient * n) == 0
            ):
                terms[:] = [t for k, t in enumerate(terms) if k not in (i, j)] + [coefficient * y]
                return True
    return False


def _split(term, function):
    """(coefficient, the one `function` factor of `term`) or (None, None)."""
    factors = [f for f in sympy.Mul.make_args(term) if isinstance(f, function)]
    if len(factors) != 1:
        return None, None
    return term / factors[0], factors[0]


def _divides_like(div, y, n) -> bool:
    """Whether IDiv `div` is y div n: IDiv(y, n) itself, or IDiv(z, s*n) where y = IDiv(z, s)."""
    z, m = div.args
    if z == y and m == n:
        return True
    return isinstance(y, IDiv) and y.args[0] == z and sympy.expand(y.args[1] * n - m) == 0


def simplify_in_loops(expr, extents):
    """`expr` with each IDiv(a, c) and IMod(a, c) whose a is c * q + r, r between 0 and c - 1
    for every value of the loop variables (`extents`: variable -> loop extent, an int or an
    expression in sizes), replaced by q and r. Views split and merge dims with such
    divisions; a loop whose variables run over the split dims (loop_split.py) then reads each
    dim's index without one."""
    if not expr.has(IDiv, IMod):
        return expr
    return expr.replace(
        lambda e: isinstance(e, (IDiv, IMod)), lambda e: _quotient_or_remainder(e, extents)
    )


def _quotient_or_remainder(e, extents):
    """IDiv(c q + r, c) = q + IDiv(r, c) and IMod(c q + r, c) = IMod(r, c) for r >= 0; the
    division of r vanishes where r < c over the loops."""
    a, c = e.args
    if not (c.is_Integer and c > 0):
        return _by_integer_factor(e, extents)
    quotient, remainder = [], []
    for term in sympy.Add.make_args(sympy.expand(a)):
        coefficient = term.as_coeff_Mul()[0]
        (quotient if coefficient.is_Integer and coefficient % c == 0 else remainder).append(term)
    q, r = sympy.Add(*quotient) / c, sympy.Add(*remainder)
    top = _largest(r, extents)
    if top is not None and _below(top, c):
        return q if isinstance(e, IDiv) else r
    if not quotient or not _nonnegative(r):
        return e
    return q + IDiv(r, c) if isinstance(e, IDiv) else IMod(r, c)


def _by_integer_factor(e, extents):
    """IDiv(a, g n) = IDiv(IDiv(a, g), n) and IMod(a, g n) = g IMod(IDiv(a, g), n) + IMod(a, g)
    for a >= 0, an integer g > 1 and a positive size n, where the division by g vanishes over
    the loops. Under dynamic shapes a view merging a dim of static size g with one of size n
    divides by their product: a [2, s, 64] buffer read as [2 s, 64] divided the row by 64 s.
    The RMSNorm of a LLaMA then saw its row reduction depend on the column and recomputed it
    for every element (64 times the work). Split so, the division is gone, and fold_div_mod
    folds the rest back into the row."""
    a, c = e.args
    g, n = c.as_coeff_Mul()
    if not (g.is_Integer and g > 1 and n.is_positive):
        return _by_size(e, extents)
    inner = _simplified(IDiv(a, g), extents)
    if inner.has(IDiv):  # the division by g stays: one division by g n is simpler
        return _by_size(e, extents)
    if isinstance(e, IDiv):
        return IDiv(inner, n)
    return g * IMod(inner, n) + _simplified(IMod(a, g), extents)


def _by_size(e, extents):
    """IDiv(a, g n) = IDiv(q, g) and IMod(a, g n) = n IMod(q, g) + r, for a = n q + r with r
    between 0 and n - 1 over the loops, n a product of sizes and g an integer. Under dynamic
    shapes a view divides by sizes: a group norm's [N, C, H, W] read as [N, G, C / G, H W]
    divided each element's position by (C / G) H W, and its backward ran five divisions an
    element, 6x the time of static shapes. Split so, the group is the channel's IDiv by C / G."""
    a, c = e.args
    g, n = c.as_coeff_Mul()
    if not (g.is_Integer and g > 0 and _divisor(n)):
        return e
    quotient, remainder = [], []
    for term in sympy.Add.make_args(sympy.expand(a)):
        multiple, left = sympy.fraction(term / n)
        if left == 1 and multiple.as_coeff_Mul()[0].is_Integer:
            quotient.append(multiple)
        else:
            remainder.append(term)
    q, r = sympy.Add(*quotient), sympy.Add(*remainder)
    top = _largest(r, extents)
    if top is None or not _below(top, n):
        return e
    if isinstance(e, IDiv):
        return _simplified(IDiv(q, g), extents)
    return n * _simplified(IMod(q, g), extents) + r


def _simplified(e, extents):
    """IDiv or IMod `e` simplified over the loops; `e` as it is if it evaluated to another
    expression when built (a division by 1, of 0, of constants)."""
    return _quotient_or_remainder(e, extents) if isinstance(e, (IDiv, IMod)) else e


def _divisor(size) -> bool:
    """Whether `size` is positive wherever an index divides by it: a positive number, or a
    non-negative expression in sizes (C // 32 under dynamic shapes), 0 only where a view's dim
    is empty and its loops run no iteration."""
    size = sympy.sympify(size)
    return bool(size.is_positive) or (not size.is_Number and _is_size(size))


def _below(top, bound) -> bool:
    """Whether `top` < `bound` for every value of the sizes (both integer expressions)."""
    return _nonnegative(sympy.expand(bound - 1 - top))


def _largest(expr, extents):
    """The largest value of `expr` over the loops, or a bound on it, where it is a
    non-negative combination of products of loop variables, their divisions and sizes (else
    None)."""
    total = 0
    for term in sympy.Add.make_args(expr):
        coefficient, rest = term.as_coeff_Mul()
        if not coefficient.is_Integer or coefficient < 0:
            return None
        top = coefficient
        for factor in sympy.Mul.make_args(rest):
            largest = _largest_factor(factor, extents)
            if largest is None:
                return None
            top *= largest
        total += top
    return total


def block_count(size, width):
    """How many blocks of `width` cover a dim of `size` (the last one may be partial)."""
    return IDiv(size + width - 1, width)


def block_extent(size, width, block):
    """The extent of block `block` (a loop variable) of `width` along a dim of `size`: a
    constant where it can be one, which g++ unrolls (`width` where every block is full, `size`
    where one block holds it all), else the last block's remainder where that is shorter."""
    size = sympy.sympify(size)
    if size.is_Integer and size % width == 0:
        return width
    if size.is_Integer and size <= width:
        return size
    return sympy.Min(width, size - width * block)


def always_within(expr, size, extents):
    """Whether 0 <= `expr` < `size` at every point of the loops (`extents`: variable -> static
    extent), where `expr` is a non-negative combination of loop variables (an unpadded
    pool's window position: no bounds test needed)."""
    top = _largest(sympy.sympify(expr), extents)
    size = sympy.sympify(size)
    return top is not None and size.is_Integer and _below(top, size)


def _largest_factor(factor, extents):
    if factor == 1:
        return 1
    if factor in extents:
        return extents[factor] - 1
    # A divisor of 0 comes from a view of an empty dim: its loops run no iteration.
    if isinstance(factor, (IMod, IDiv)) and _divisor(factor.args[1]):
        divisor = factor.args[1]
        if isinstance(factor, IMod):
            return divisor - 1
        top = _largest(factor.args[0], extents)
        if top is None:
            return None
        top = sympy.sympify(top)
        return top // divisor if top.is_Integer and divisor.is_Integer else top / divisor
    if _is_size(factor):
        return factor
    return None


def _is_size(factor) -> bool:
    """Whether `factor` is a non-negative expression in sizes alone: its symbols are all
    positive, as torch's size symbols are, where loop variables are only non-negative."""
    symbols = factor.free_symbols
    return bool(symbols) and factor.is_nonnegative and all(s.is_positive for s in symbols)


def _nonnegative(expr):
    return all(
        term.as_coeff_Mul()[0] >= 0 and term.as_coeff_Mul()[1].is_nonnegative
        for term in sympy.Add.make_args(expr)
    )


def unflatten(flat, sizes):
    """Per-dim indices of a row-major position `flat` over `sizes`."""
    strides = contiguous_strides(sizes)
    return [
        IMod(IDiv(flat, stride), size) if i else IDiv(flat, stride)
        for i, (size, stride) in enumerate(zip(sizes, strides))
    ]


# Functions whose value is an integer whatever their arguments, and those that are integers
# only over integers. torch's Mod says is_integer of a float remainder too ((h * 1.0) % 3).
_TO_INTEGER = {"TruncToInt", "RoundToInt", "FloorToInt", "CeilToInt", "floor", "ceiling"}
_INTEGER_OVER_INTEGERS = {"Mod", "PythonMod", "FloorDiv", "Max", "Min", "Add", "Mul", "Abs"}


def integer_valued(expr) -> bool:
    """Whether size expression `expr` computes an integer, read from what it is made of."""
    if expr.is_Integer or (expr.is_Symbol and expr.is_integer):
        return True
    name = type(expr).__name__
    if name in _TO_INTEGER:
        return True
    if name in _INTEGER_OVER_INTEGERS:
        return all(integer_valued(a) for a in expr.args)
    if expr.is_Pow:
        return integer_valued(expr.base) and expr.exp.is_Integer and expr.exp >= 0
    return bool(expr.is_integer) and not expr.is_Float
