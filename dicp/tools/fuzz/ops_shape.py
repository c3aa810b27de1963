"""Catalog: reductions, views and concatenation."""


def _dim_text(g, d, rank):
    """Dim `d` of a rank-`rank` value, written negative half of the time."""
    return str(d - rank if rank and g.rng.random() < 0.5 else d)


def _some_dims(g, rank):
    dims = sorted(g.rng.sample(range(rank), g.rng.randint(1, rank)))
    return [int(_dim_text(g, d, rank)) for d in dims]


# ---- reductions -----------------------------------------------------------------------------


def reduction(g):
    x = g.pick()
    rank = g.rank(x)
    keep = g.rng.random() < 0.4
    kind = g.rng.choice(
        (
            "sum",
            "sum",
            "mean",
            "amax",
            "amin",
            "prod",
            "argmax",
            "argmin",
            "max_dim",
            "min_dim",
            "var",
            "std",
            "any",
            "all",
            "logsumexp",
            "softmax",
            "log_softmax",
            "cumsum",
            "sum_dtype",
        )
    )
    if rank == 0:
        return f"torch.{kind if kind in ('sum', 'mean', 'amax', 'prod') else 'sum'}({x})"
    dims, dim = _some_dims(g, rank), _dim_text(g, g.rng.randrange(rank), rank)
    whole = g.rng.random() < 0.2
    if kind in ("sum", "mean", "amax", "amin", "logsumexp"):
        if whole and kind in ("sum", "mean"):
            return f"torch.{kind}({x})"
        return f"torch.{kind}({x}, dim={dims}, keepdim={keep})"
    if kind == "sum_dtype":
        dtype = g.rng.choice(("torch.float64", "torch.float32", "torch.int64"))
        return f"{x}.sum({dims}, dtype={dtype})"
    if kind == "prod" or kind in ("any", "all"):
        return f"torch.{kind}({x})" if whole else f"torch.{kind}({x}, {dim}, keepdim={keep})"
    if kind in ("argmax", "argmin"):
        return f"torch.{kind}({x})" if whole else f"torch.{kind}({x}, dim={dim}, keepdim={keep})"
    if kind in ("max_dim", "min_dim"):
        part = g.rng.choice((0, 1))
        return f"torch.{kind[:3]}({x}, {dim}, keepdim={keep})[{part}]"
    if kind in ("var", "std"):
        # torch.var with no dim is issue 9 item 4, fixed elsewhere; always give dims here
        correction = g.rng.choice((0, 1, 2))
        return f"torch.{kind}({x}, dim={dims}, correction={correction}, keepdim={keep})"
    if kind in ("softmax", "log_softmax"):
        return f"torch.{kind}({x}, {dim})"
    return f"torch.cumsum({x}, {dim})"


# ---- views ----------------------------------------------------------------------------------


def view(g):
    x = g.pick()
    rank = g.rank(x)
    makers = [_unsqueeze, _reshape_flat]
    if rank >= 1:
        makers += [_slice, _select, _squeeze, _expand, _narrow, _flip, _split]
    if rank >= 2:
        makers += [_permute, _transpose, _flatten, _movedim]
    if rank >= 1:
        makers += [_unflatten, _repeat]
    return g.rng.choice(makers)(g, x, rank)


def _permute(g, x, rank):
    order = list(range(rank))
    g.rng.shuffle(order)
    order = [int(_dim_text(g, d, rank)) for d in order]
    suffix = ".contiguous()" if g.rng.random() < 0.2 else ""
    return f"{x}.permute({', '.join(map(str, order))}){suffix}"


def _transpose(g, x, rank):
    a, b = g.rng.sample(range(rank), 2)
    if rank == 2 and g.rng.random() < 0.3:
        return f"{x}.t()"
    return f"{x}.transpose({_dim_text(g, a, rank)}, {_dim_text(g, b, rank)})"


def _movedim(g, x, rank):
    a, b = g.rng.sample(range(rank), 2)
    return f"torch.movedim({x}, {_dim_text(g, a, rank)}, {_dim_text(g, b, rank)})"


def _flatten(g, x, rank):
    start = g.rng.randrange(rank - 1)
    end = g.rng.randrange(start + 1, rank)
    return f"torch.flatten({x}, {_dim_text(g, start, rank)}, {_dim_text(g, end, rank)})"


def _reshape_flat(g, x, rank):
    method = g.rng.choice(("reshape", "view"))
    if rank >= 2 and g.rng.random() < 0.5:
        return f"{x}.{method}(-1, {x}.shape[-1])"
    return f"{x}.{method}(-1)"


def _unflatten(g, x, rank):
    """Split a dim in two, by a size dividing it at every configuration."""
    d = g.rng.randrange(rank)
    size = g.dims(x)[d]
    factors = [
        f
        for f in _candidate_factors(g)
        if all(s % f[c] == 0 for c, s in enumerate(size)) and f != size
    ]
    if not factors:
        return None
    factor = g.rng.choice(factors)
    text = g.size_expr(factor)
    if text is None:
        return None
    if g.rng.random() < 0.5:
        return f"{x}.unflatten({_dim_text(g, d, rank)}, ({text}, -1))"
    shape = [f"{x}.shape[{i}]" for i in range(rank)]
    shape[d : d + 1] = [text, "-1"]
    return f"{x}.reshape({', '.join(shape)})"


def _candidate_factors(g):
    ones = (1,) * g.configs
    return [ones] + list(g.sizes) + [(2,) * g.configs, (3,) * g.configs]


def _unsqueeze(g, x, rank):
    d = g.rng.randrange(rank + 1)
    return f"{x}.unsqueeze({d - rank - 1 if g.rng.random() < 0.5 else d})"


def _squeeze(g, x, rank):
    d = g.rng.randrange(rank)
    if g.rng.random() < 0.3:
        return f"{x}.squeeze()"
    return f"{x}.squeeze({_dim_text(g, d, rank)})"


def _expand(g, x, rank):
    """Size-1 dims widened to a size of the program, maybe with a new leading dim."""
    sizes = ["-1"] * rank
    for d, size in enumerate(g.dims(x)):
        if set(size) == {1} and g.rng.random() < 0.7:
            sizes[d] = g.size_expr(g.random_size(one=0)) or "-1"
    if g.rng.random() < 0.3 or sizes == ["-1"] * rank:
        sizes = [g.size_expr(g.random_size(one=0)) or "2"] + sizes
    return f"{x}.expand({', '.join(sizes)})"


def _slice(g, x, rank):
    d = g.rng.randrange(rank)
    m = g.min_size(x, d)
    start = g.rng.choice([0, 0, 1, -1, -2] if m > 2 else [0, 0, -1])
    stop = g.rng.choice(["", "", "-1"] if m > 2 else [""])
    step = g.rng.choice((1, 1, 2, 3))
    start_text = "" if start == 0 else str(start)
    if start < 0 and stop:
        stop = ""
    index = f"{start_text}:{stop}" + (f":{step}" if step != 1 else "")
    prefix = "..., " if d == rank - 1 and g.rng.random() < 0.5 else ":, " * d
    return f"{x}[{prefix}{index}]"


def _select(g, x, rank):
    d = g.rng.randrange(rank)
    m = g.min_size(x, d)
    i = g.rng.randrange(-m, m)
    if g.rng.random() < 0.5:
        return f"{x}.select({_dim_text(g, d, rank)}, {i})"
    return f"{x}[{':, ' * d}{i}]"


def _narrow(g, x, rank):
    d = g.rng.randrange(rank)
    m = g.min_size(x, d)
    start = g.rng.randrange(m)
    return f"{x}.narrow({_dim_text(g, d, rank)}, {start}, {g.rng.randint(1, m - start)})"


def _flip(g, x, rank):
    return f"torch.flip({x}, {_some_dims(g, rank)})"


def _split(g, x, rank):
    d = g.rng.randrange(rank)
    m = g.min_size(x, d)
    piece = g.rng.randint(1, max(1, m - 1))
    if g.rng.random() < 0.5:
        return f"{x}.split({piece}, {_dim_text(g, d, rank)})[0]"
    return f"{x}.chunk(2, {_dim_text(g, d, rank)})[-1]" if m > 1 else None


def _repeat(g, x, rank):
    counts = [g.rng.choice((1, 1, 2)) for _ in range(rank)]
    if g.rng.random() < 0.3:
        counts = [2] + counts
    return f"{x}.repeat({', '.join(map(str, counts))})"


# ---- concatenation --------------------------------------------------------------------------


def concat(g):
    a = g.pick(lambda n: g.rank(n) >= 1)
    if a is None:
        return None
    rank, dims = g.rank(a), g.dims(a)
    stack = g.rng.random() < 0.3
    d = g.rng.randrange(rank + 1 if stack else rank)
    parts = [a]
    for _ in range(g.rng.choice((1, 1, 2))):
        roll = g.rng.random()
        if roll < 0.2:
            parts.append(a)
            continue
        shape = list(dims)
        if not stack:
            shape[d] = g.random_size()
        same = [n for n in g.names() if n != a and g.dims(n) == tuple(shape)]
        if same and roll < 0.45:
            parts.append(g.rng.choice(same))
            continue
        dtype = g.dtype(a) if g.rng.random() < 0.6 else g.random_dtype()
        parts.append(g.new_input(tuple(shape), dtype))
    g.rng.shuffle(parts)
    dim = d - (rank + 1 if stack else rank) if g.rng.random() < 0.5 else d
    return f"torch.{'stack' if stack else 'cat'}([{', '.join(parts)}], {dim})"


CATALOG = {reduction: ("reduction", 7), view: ("view", 8), concat: ("concat", 2)}
