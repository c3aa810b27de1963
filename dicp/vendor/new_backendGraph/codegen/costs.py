"""What each loop IR op costs: the one table scheduling weighs ops by.

Vendor pointwise ops take their cost from their row (pointwise.py); the ops of the loop level
(conversions, selects, the updates of reductions, index checks) are listed here. Three costs:
`CHEAP` (about a load or an ALU instruction), `DIVIDE` (a division), `CALL` (a function of the
runtime header or the C library: exp, erf, pow, floordiv). Decisions read it as follows:

- a row cache (row_cache.py) keeps values that `call`: worth a store and a load to compute once,
  where a division is not;
- a value computed on few elements that a much larger loop reads (batch norm's per-channel
  rsqrt(var + eps)) gets a kernel of its own when it divides or calls (cpp_codegen.py): once
  per channel rather than once per pixel;
- integer arithmetic that `divides` is no loop-index arithmetic (kernel.py).
"""

from ..pointwise import CALL, CHEAP, DIVIDE, POINTWISE

LOOP_OP_COSTS = {
    "Cast": CHEAP,
    "StaticCast": CHEAP,
    "FloatToInt": CHEAP,
    "ToBool": CHEAP,
    "RoundTo": CHEAP,
    "StoreRound": CHEAP,
    "All": CHEAP,
    "Iota": CHEAP,
    "Tril": CHEAP,
    "Triu": CHEAP,
    "Better": CHEAP,
    "IsNanCompare": CHEAP,
    "ArgBetter": CHEAP,
    "PoolBetter": CHEAP,
    "Pick": CHEAP,
    "WrapIndex": CHEAP,
    "CheckedIndex": CHEAP,
    "InjectedCompileError": CHEAP,
    "ErfCentral": CALL,  # erf's central polynomial (value_range.py)
    "IPow": CALL,  # Pow of integers
    "IMod": DIVIDE,  # Fmod of integers: C++'s %
}
OP_COSTS = {**{row.name: row.cost for row in POINTWISE}, **LOOP_OP_COSTS}
DIVIDING_OPS = frozenset({row.name for row in POINTWISE if row.divides} | {"IMod"})


def calls(op_names) -> bool:
    """Whether any of the ops calls a function."""
    return any(OP_COSTS[name] == CALL for name in op_names)


def divides_or_calls(op_names) -> bool:
    """Whether any of the ops divides or calls a function."""
    return any(OP_COSTS[name] != CHEAP for name in op_names)
