"""Build a backend's decomposition table from torch's public decomposition API.

The table is a new dict: torch's own tables are never edited.
"""
from functools import lru_cache

from dicp import config

from .conversion import overloads_of
from .decompositions_fixed import FIXED
from .torch_compat import OpOverload, core_aten_decompositions, get_decompositions
from .utils import matches_any, op_name


def build_decompositions(extra_ops=(), keep_ops=()):
    """torch's core ATen decompositions plus `extra_ops`, minus `keep_ops` and the ops
    named (by pattern, e.g. aten.gelu.*) in DICP_KEEP_TORCH_DEFAULT. Where torch's
    decomposition disagrees with eager, dicp's correction (decompositions_fixed.py) replaces
    it."""
    keep_patterns = config.keep_torch_default
    return _build(tuple(extra_ops), tuple(keep_ops), keep_patterns)


@lru_cache(maxsize=8)  # materializing torch's table costs ~0.3 s; do it once per setting
def _build(extra_ops, keep_ops, keep_patterns):
    table = dict(core_aten_decompositions().items())
    table.update(get_decompositions(list(extra_ops)))
    table.update({op: fn for op, fn in FIXED.items() if op in table})
    for overload in overloads_of(list(keep_ops)):
        table.pop(overload, None)
    return {op: fn for op, fn in table.items()
            if not (isinstance(op, OpOverload)
                    and matches_any(op_name(op), list(keep_patterns)))}
