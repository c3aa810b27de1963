"""Build a backend's decomposition table from torch's public decomposition API.

The table is a new dict: torch's own tables are never edited.
"""

from functools import lru_cache

import torch

from dicp import config

from .conversion import overloads_of
from .decompositions_fixed import EAGER_DTYPE, FIXED
from .decompositions_foreach import foreach_decompositions
from .torch_compat import OpOverload, get_decompositions, post_autograd_decompositions
from .utils import is_random, matches_any, op_name

# Decompositions in torch's core table that are right only without autograd: they change
# what an op returns for its backward. `_scaled_dot_product_flash_attention_for_cpu` becomes
# the math path, whose second output is the attention matrix, while the op's backward (taken
# from the undecomposed op) reads it as the logsumexp: gradients come out wrong. Inductor
# excludes it too (torch/_inductor/decomposition.py). No backend gets these.
AUTOGRAD_UNSAFE = (torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,)


def build_decompositions(extra_ops=(), keep_ops=()):
    """torch's core ATen decompositions (without the inert entries of composite ops,
    torch_compat.post_autograd_decompositions), the `_foreach_*` ops'
    (decompositions_foreach.py) and `extra_ops`, minus `keep_ops`, the ops named (by pattern,
    e.g. aten.gelu.*) in DICP_KEEP_TORCH_DEFAULT and, with DICP_FALLBACK_RANDOM, the random
    ops (their decompositions draw other numbers than eager's kernels). Where torch's
    decomposition disagrees with eager, dicp's correction (decompositions_fixed.py) replaces
    it, and EAGER_DTYPE's rows correct ops whose meta kernels infer another dtype than eager."""
    keep_patterns = config.keep_torch_default
    return _build(tuple(extra_ops), tuple(keep_ops), keep_patterns, config.fallback_random)


@lru_cache(maxsize=8)  # once per setting
def _build(extra_ops, keep_ops, keep_patterns, fallback_random):
    table = dict(post_autograd_decompositions())
    table.update(foreach_decompositions())
    table.update(get_decompositions(list(extra_ops)))
    table.update({op: fn for op, fn in FIXED.items() if op in table})
    table.update(EAGER_DTYPE)
    for overload in overloads_of(list(keep_ops)) + list(AUTOGRAD_UNSAFE):
        table.pop(overload, None)
    return {
        op: fn
        for op, fn in table.items()
        if not (
            isinstance(op, OpOverload)
            and (matches_any(op_name(op), list(keep_patterns)) or fallback_random and is_random(op))
        )
    }
