"""Catalog: indexing ops with data-dependent indices (gather, scatter, index_add, index_put,
index_select, embedding, advanced indexing), with repeated and negative indices.

Index tensors are inputs whose values are valid at every size configuration: drawn from
[0, m) or [-m, m) where m is the smallest size of the indexed dim. Ops that accumulate
(scatter_add, index_add, index_put with accumulate) get indices that repeat; ops where a
repeated index would make eager's own result unspecified (scatter, index_put without
accumulate) get unique ones (kind "perm")."""

import torch

from .ops_pointwise import broadcast_dims


def _dim_arg(g, d, rank):
    return d - rank if g.rng.random() < 0.4 else d


def _index_range(g, m, signed):
    """[low, high) of index values for a dim of at least m elements; sometimes a narrow
    range, so that indices surely repeat."""
    high = m if g.rng.random() < 0.7 else min(m, 2)
    return (-high if signed else 0), high


def _index_dtype(g):
    return torch.int64 if g.rng.random() < 0.8 else torch.int32


def _target(g, rank=1):
    return g.pick(lambda n: g.rank(n) >= rank)


def gather(g):
    x = _target(g)
    if x is None:
        return None
    rank, dims = g.rank(x), g.dims(x)
    d = g.rng.randrange(rank)
    ones = (1,) * g.configs
    shape = [size if g.rng.random() < 0.7 else ones for size in dims]
    shape[d] = g.random_size()
    # take_along_dim: negative indices, broadcasting; static shapes only, since torch's
    # implementation specializes sizes under dynamo (a recompile with any backend)
    if g.configs == 1 and g.rng.random() < 0.3:
        index = g.index_input(shape, *_index_range(g, g.min_size(x, d), signed=True))
        return f"torch.take_along_dim({x}, {index}, dim={_dim_arg(g, d, rank)})"
    index = g.index_input(shape, *_index_range(g, g.min_size(x, d), signed=False))
    return f"torch.gather({x}, {_dim_arg(g, d, rank)}, {index})"


def scatter(g):
    """scatter (unique indices per line) and scatter_add / scatter_reduce (repeated)."""
    x = _target(g)
    if x is None:
        return None
    rank, dims = g.rank(x), g.dims(x)
    d = g.rng.randrange(rank)
    m = g.min_size(x, d)
    kind = g.rng.choice(
        ("scatter", "scatter_value", "scatter_add", "scatter_add", "scatter_reduce")
    )
    ones = (1,) * g.configs
    shape = [size if g.rng.random() < 0.7 else ones for size in dims]
    dim = _dim_arg(g, d, rank)
    if kind.startswith("scatter_") and kind != "scatter_value":
        shape[d] = g.random_size()
        index = g.index_input(shape, *_index_range(g, m, signed=False))
    else:
        shape[d] = (g.rng.randint(1, m),) * g.configs
        index = g.new_input(shape, torch.int64, "perm", (d, dims[d]))
    if kind == "scatter_value":
        return f"{x}.scatter({dim}, {index}, {g.rng.choice((1.5, -2.0, 0.0, 3))})"
    src = g.new_input(tuple(shape), g.dtype(x))
    if kind == "scatter":
        return f"torch.scatter({x}, {dim}, {index}, {src})"
    if kind == "scatter_add":
        return f"{x}.scatter_add({dim}, {index}, {src})"
    reduce = g.rng.choice(("sum", "prod", "mean", "amax", "amin"))
    include = g.rng.choice((True, False))
    return f"torch.scatter_reduce({x}, {dim}, {index}, {src}, {reduce!r}, include_self={include})"


def index_add(g):
    x = _target(g)
    if x is None:
        return None
    rank, dims = g.rank(x), g.dims(x)
    d = g.rng.randrange(rank)
    length = g.random_size()
    index = g.new_input(
        (length,), _index_dtype(g), "int", _index_range(g, g.min_size(x, d), signed=False)
    )
    shape = list(dims)
    shape[d] = length
    src = g.new_input(tuple(shape), g.dtype(x))
    alpha = f", alpha={g.rng.choice((2, -1))}" if g.rng.random() < 0.3 else ""
    return f"{x}.index_add({_dim_arg(g, d, rank)}, {index}, {src}{alpha})"


def index_select(g):
    x = _target(g)
    if x is None:
        return None
    rank = g.rank(x)
    d = g.rng.randrange(rank)
    # a 0-d index is issue 9 item 5, fixed elsewhere: always 1-d here
    index = g.new_input(
        (g.random_size(),), _index_dtype(g), "int", _index_range(g, g.min_size(x, d), signed=False)
    )
    return f"torch.index_select({x}, {_dim_arg(g, d, rank)}, {index})"


def embedding(g):
    weight = g.pick(lambda n: g.rank(n) == 2 and g.dtype(n).is_floating_point)
    if weight is None or g.rng.random() < 0.3:
        weight = g.new_input(
            (g.random_size(one=0), g.random_size()),
            g.random_dtype((torch.float32, torch.float16, torch.float64)),
        )
    rows = min(g.dims(weight)[0])
    index = g.new_input(
        g.random_dims(g.rng.choice((1, 1, 2))),
        _index_dtype(g),
        "int",
        _index_range(g, rows, signed=False),
    )
    return f"F.embedding({index}, {weight})"


def advanced_index(g):
    """x[i], x[:, i], x[i, j] (broadcast), x[i, :, j] (not adjacent), with negative indices."""
    x = _target(g)
    if x is None:
        return None
    rank = g.rank(x)
    count = g.rng.randint(1, min(rank, 2))
    positions = sorted(g.rng.sample(range(rank), count))
    index_dims = g.random_dims(g.rng.choice((1, 1, 2)))
    parts = [":"] * (positions[-1] + 1)
    for p in positions:
        dims = index_dims if p == positions[0] else broadcast_dims(g, index_dims)
        parts[p] = g.new_input(
            dims, _index_dtype(g), "int", _index_range(g, g.min_size(x, p), signed=True)
        )
    return f"{x}[{', '.join(parts)}]"


def index_put(g):
    """index_put with accumulate (repeated, negative indices), or without it on unique
    indices of the first dim."""
    x = _target(g)
    if x is None:
        return None
    dims = g.dims(x)
    if g.rng.random() < 0.3:
        n = g.rng.randint(1, g.min_size(x, 0))
        index = g.new_input(((n,) * g.configs,), torch.int64, "perm", (0, dims[0]))
        values = g.new_input(_values_dims(g, ((n,) * g.configs,) + dims[1:]), g.dtype(x))
        return f"torch.index_put({x}, ({index},), {values})"
    count = g.rng.randint(1, min(len(dims), 2))
    index_dims = g.random_dims(g.rng.choice((1, 1, 2)))
    indices = [
        g.index_input(
            index_dims if d == 0 else broadcast_dims(g, index_dims),
            *_index_range(g, g.min_size(x, d), signed=True),
        )
        for d in range(count)
    ]
    indexed = index_dims + dims[count:]
    values = g.new_input(_values_dims(g, indexed), g.dtype(x))
    return f"torch.index_put({x}, ({', '.join(indices)},), {values}, accumulate=True)"


def _values_dims(g, indexed):
    """Dims of values for index_put: the indexed shape, a suffix of it, or 0-d."""
    roll = g.rng.random()
    if roll < 0.15:
        return ()
    if roll < 0.35 and indexed:
        return tuple(indexed[g.rng.randrange(len(indexed)) :])
    return tuple(indexed)


def masked_fill(g):
    x = g.pick()
    mask = g.new_input(broadcast_dims(g, g.dims(x)), torch.bool)
    value = (
        g.rng.choice(("0.0", "-1.5", "2", "float('-inf')"))
        if g.dtype(x).is_floating_point
        else g.rng.choice(("0", "-1", "3"))
    )
    return f"{x}.masked_fill({mask}, {value})"


CATALOG = {
    gather: ("indexing", 3),
    scatter: ("indexing", 3),
    index_add: ("indexing", 2),
    index_select: ("indexing", 2),
    embedding: ("indexing", 1),
    advanced_index: ("indexing", 3),
    index_put: ("indexing", 2),
    masked_fill: ("indexing", 1),
}
