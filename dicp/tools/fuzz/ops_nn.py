"""Catalog: the ops layers are made of. Matrix products (broadcast, transposed, with a bias),
normalizations, sorting and selection, scans, and padding.

Proposals may be loose: eager evaluates each at every size configuration and drops the ones
it rejects (a size that does not divide, a pad wider than its dim), as for the other
catalogs."""

import torch


def _float_value(g, rank=1):
    return g.pick(lambda n: g.rank(n) >= rank and g.dtype(n).is_floating_point)


def _dim(g, rank):
    d = g.rng.randrange(rank)
    return d - rank if g.rng.random() < 0.4 else d


# ---- matrix products ------------------------------------------------------------------------


def product(g):
    x = _float_value(g)
    if x is None:
        return None
    dims, dtype, n = g.dims(x), g.dtype(x), g.random_size(one=0.15)
    k = dims[-1]
    form = g.rng.choice(("matmul", "matmul", "linear", "left", "self", "addmm", "bmm"))
    if form == "matmul":  # x @ W, W maybe with batch dims that broadcast against x's
        batch = [size if g.rng.random() < 0.5 else (1,) * g.configs for size in dims[:-2]]
        return f"torch.matmul({x}, {g.new_input((*batch, k, n), dtype)})"
    if form == "linear":
        weight = g.new_input((n, k), dtype)
        bias = g.new_input((n,), dtype) if g.rng.random() < 0.7 else "None"
        return f"torch.nn.functional.linear({x}, {weight}, {bias})"
    if len(dims) < 2:
        return None
    m = dims[-2]
    if form == "left":  # W @ x: x is the right operand, read by columns
        return f"{g.new_input((n, m), dtype)} @ {x}"
    if form == "self":  # attention's scores: x @ x^T
        return f"{x} @ {x}.transpose(-1, -2)"
    if form == "addmm" and len(dims) == 2:
        bias = g.new_input(g.rng.choice(((n,), (m, n), ((1,) * g.configs, n))), dtype)
        beta, alpha = g.rng.choice(((1, 1), (1, 1), (0.5, 2.0), (0, 1)))
        return f"torch.addmm({bias}, {x}, {g.new_input((k, n), dtype)}, beta={beta}, alpha={alpha})"
    if form == "bmm" and len(dims) == 3:
        return f"torch.bmm({x}, {g.new_input((dims[0], k, n), dtype)})"
    return None


# ---- normalizations -------------------------------------------------------------------------


def normalization(g):
    x = _float_value(g)
    if x is None:
        return None
    rank, dims, dtype = g.rank(x), g.dims(x), g.dtype(x)
    kind = g.rng.choice(
        ("layer_norm", "layer_norm", "rms_norm", "normalize", "batch_norm", "group_norm")
    )
    eps = g.rng.choice((1e-5, 1e-6, 0.1))
    if kind in ("layer_norm", "rms_norm"):
        count = g.rng.randint(1, min(rank, 2))
        shape = dims[rank - count :]
        weight = g.new_input(shape, dtype) if g.rng.random() < 0.7 else "None"
        normalized = f"{x}.shape[{rank - count}:]"
        if kind == "rms_norm":
            return f"torch.nn.functional.rms_norm({x}, {normalized}, {weight}, eps={eps})"
        bias = g.new_input(shape, dtype) if g.rng.random() < 0.7 else "None"
        return f"torch.nn.functional.layer_norm({x}, {normalized}, {weight}, {bias}, eps={eps})"
    if kind == "normalize":
        return (
            f"torch.nn.functional.normalize({x}, p={g.rng.choice((1, 2, 2))}, dim={_dim(g, rank)})"
        )
    if rank < 2:
        return None
    channels = dims[1]
    weight = g.new_input((channels,), dtype) if g.rng.random() < 0.7 else "None"
    bias = g.new_input((channels,), dtype) if g.rng.random() < 0.7 else "None"
    if kind == "batch_norm":  # training statistics of this batch, no running ones
        return (
            f"torch.nn.functional.batch_norm({x}, None, None, {weight}, {bias}, "
            f"training=True, eps={eps})"
        )
    groups = g.rng.choice((1, 2, 3))
    return f"torch.nn.functional.group_norm({x}, {groups}, {weight}, {bias}, eps={eps})"


# ---- sorting, selection, scans --------------------------------------------------------------


def order(g):
    x = g.pick(lambda n: g.rank(n) >= 1 and g.dtype(n) != torch.bool)
    if x is None:
        return None
    rank = g.rank(x)
    d = _dim(g, rank)
    m = g.min_size(x, d if d >= 0 else d + rank)
    kind = g.rng.choice(
        (
            "sort",
            "sort",
            "topk",
            "kthvalue",
            "cumprod",
            "cummax",
            "cummin",
            "logcumsumexp",
            "argsort",
            "msort",
        )
    )
    descending = g.rng.random() < 0.5
    if kind == "sort":  # stable: the indices of equal values are eager's too
        part = g.rng.choice((0, 0, 1))
        return f"torch.sort({x}, dim={d}, descending={descending}, stable=True)[{part}]"
    if kind == "argsort":
        return f"torch.argsort({x}, dim={d}, descending={descending}, stable=True)"
    if kind == "msort":
        return f"torch.msort({x})"
    if kind == "topk":  # values only: which of two equal values comes first is unspecified
        return f"torch.topk({x}, {g.rng.randint(1, m)}, dim={d}, largest={descending})[0]"
    if kind == "kthvalue":
        return f"torch.kthvalue({x}, {g.rng.randint(1, m)}, dim={d})[0]"
    if kind in ("cummax", "cummin"):
        return f"torch.{kind}({x}, {d})[0]"
    return f"torch.{kind}({x}, {d})"


# ---- padding --------------------------------------------------------------------------------


def pad(g):
    x = g.pick(lambda n: g.rank(n) >= 1)
    if x is None:
        return None
    rank = g.rank(x)
    mode = g.rng.choice(("constant", "constant", "reflect", "replicate", "circular"))
    padded = min(rank, g.rng.randint(1, 3)) if mode == "constant" else g.rng.randint(1, 2)
    if mode != "constant" and (not g.dtype(x).is_floating_point or rank < padded + 1):
        return None
    widths = [
        g.rng.choice((0, 1, 2, -1) if mode == "constant" else (0, 1, 2)) for _ in range(2 * padded)
    ]
    value = f", value={g.rng.choice((0.0, -1.5, 2))}" if mode == "constant" else ""
    return f"torch.nn.functional.pad({x}, {widths}, mode='{mode}'{value})"


CATALOG = {
    product: ("product", 4),
    normalization: ("normalization", 3),
    order: ("order", 3),
    pad: ("pad", 2),
}
