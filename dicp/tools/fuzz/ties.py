"""Where a gradient is not defined: an order op (sort, topk, a max over a dim, ...) at a tie.

Sorting is not differentiable where two of its inputs are equal: which one the gradient of
the first sorted position flows to depends on how the tie was broken, and any choice is a
valid subgradient. A fused kernel and eager round an intermediate differently by an ulp, so
values that tie in one need not in the other, and a gradient routed differently through the
near tie is as right as eager's (seed 7070, program 568: msort of a bfloat16 layer_norm,
whose 205-row columns hold values one bfloat16 ulp apart).

`tie_affected` finds, for each input that takes a gradient, the elements whose gradient flows
through an order op's input at a near tie (two values along the op's dim at most TIE_ULPS
apart): the judge leaves those elements out and judges the rest as usual. Only gradients
are left out this way, and only where the judgement failed with them in.
"""

import warnings

import torch
from torch.overrides import TorchFunctionMode

TIE_ULPS = 2

# op -> (position of its dim argument, default dim); None: over the whole tensor
_ORDER_OPS = {}
for _name, _dim in (
    ("sort", (1, -1)),
    ("topk", (2, -1)),
    ("kthvalue", (2, -1)),
    ("cummax", (1, None)),
    ("cummin", (1, None)),
    ("median", (1, None)),
    ("nanmedian", (1, None)),
    ("mode", (1, -1)),
    ("max", (1, None)),
    ("min", (1, None)),
    ("amax", (1, None)),
    ("amin", (1, None)),
):
    _ORDER_OPS[getattr(torch, _name)] = _ORDER_OPS[getattr(torch.Tensor, _name)] = _dim
_ORDER_OPS[torch.msort] = _ORDER_OPS[torch.Tensor.msort] = (None, 0)


class _OrderInputs(TorchFunctionMode):
    """Records the (input, dim) of every order op that takes a gradient."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _ORDER_OPS and args and _takes_gradient(args[0]):
            dim = _dim_of(func, args, kwargs)
            if dim is not _ELEMENTWISE:
                self.seen.append((args[0], dim))
        return func(*args, **kwargs)


_ELEMENTWISE = object()  # max(a, b): two tensors compared element by element


def _takes_gradient(value):
    return isinstance(value, torch.Tensor) and value.requires_grad and value.is_floating_point()


def _dim_of(func, args, kwargs):
    position, default = _ORDER_OPS[func]
    dim = kwargs.get(
        "dim", args[position] if position is not None and len(args) > position else default
    )
    if isinstance(dim, torch.Tensor):
        return _ELEMENTWISE
    if isinstance(dim, (tuple, list)):  # amax over several dims: judged over the whole tensor
        return None if len(dim) != 1 else dim[0]
    return dim


def tie_affected(fn, inputs):
    """For each of `inputs` that takes a gradient: a bool mask of the elements whose gradient
    flows through an order op's input at a near tie, or None where none does."""
    leaves = [t.detach().clone().requires_grad_(t.requires_grad) for t in inputs]
    grad_leaves = [t for t in leaves if t.requires_grad]
    recorder = _OrderInputs()
    try:
        with torch.enable_grad(), warnings.catch_warnings(), recorder:
            warnings.simplefilter("ignore")
            fn(*leaves)
    except RuntimeError:  # what eager ran, it runs again; anything else leaves nothing out
        return [None] * len(grad_leaves)
    tied = [(x, near_ties(x.detach(), dim)) for x, dim in recorder.seen]
    tied = [(x, mask) for x, mask in tied if mask.any()]
    if not tied or not grad_leaves:
        return [None] * len(grad_leaves)
    # random positive weights, so that the routes from two tied elements do not cancel
    g = torch.Generator().manual_seed(0)
    weights = [
        (mask * (1 + torch.rand(mask.shape, generator=g, dtype=torch.float64))).to(x.dtype)
        for x, mask in tied
    ]
    grads = torch.autograd.grad([x for x, _ in tied], grad_leaves, weights, allow_unused=True)
    return [None if grad is None else grad != 0 for grad in grads]


def near_ties(x, dim=None):
    """A bool mask of the elements of `x` within TIE_ULPS of a neighbour along `dim` (of
    another element anywhere in `x` when `dim` is None)."""
    if x.dim() == 0:
        return torch.zeros_like(x, dtype=torch.bool)
    flat = dim is None
    values, order = (x.reshape(-1) if flat else x).to(torch.float64).sort(dim=0 if flat else dim)
    dim = 0 if flat else dim
    pairs = values.size(dim) - 1
    low, high = values.narrow(dim, 0, pairs), values.narrow(dim, 1, pairs)
    scale = torch.maximum(low.abs(), high.abs())
    tie = (high - low) <= TIE_ULPS * torch.finfo(x.dtype).eps * scale
    sorted_mask = torch.zeros_like(values, dtype=torch.bool)
    sorted_mask.narrow(dim, 0, pairs).logical_or_(tie)
    sorted_mask.narrow(dim, 1, pairs).logical_or_(tie)
    mask = torch.zeros_like(sorted_mask).scatter(dim, order, sorted_mask)
    return mask.reshape(x.shape)
