"""Loop-invariant arithmetic moved out of a phase's inner loop.

A fused row kernel emits its consumer's expression whole inside the loop over the row, so
what depends on the row alone is computed for every element: log_softmax's log of the row's
sum, softmax's reciprocal of it, a norm's 1 / sqrt(variance + eps). g++ hoists some of it, not
all: the runtime's log (bit manipulation, a polynomial) stayed in the loop, and log_softmax over
128 x 1024 took 189 us, 74 us with the log computed once per row.

Only floating-point arithmetic moves (a `Let` of an `Op` of float type), and only when every
operand is fixed over the loop: a constant, a value defined before the loop and not assigned in
it, an index over none of the loop's variables, or a value moved already. Loads stay (the loop
may store to what they read), and so does integer arithmetic, which may divide: run before a
loop of no iterations, a division by a size of 0 would trap. Float arithmetic does not trap
(kernels build with -fno-trapping-math), and moving it changes no value.
"""

from .loop_ir import Assign, Declare, Index, Let, Op, Var, walk

FLOAT_TYPES = ("float", "double")


def hoist_invariants(pre, body, loop_vars, computed, around=()):
    """(pre, body) with body's loop-invariant float arithmetic appended to pre. `loop_vars`:
    the loop's variables; `computed`: the symbols of data-dependent indices (defined in the
    loop, so never invariant); `around`: statements run in the loop around body (a chunk's
    open and close), whose assignments change values too."""
    varying = set(loop_vars) | set(computed)
    inside = [*body, *around]
    changed = {
        s.target.name for s in walk(inside) if isinstance(s, Assign) and isinstance(s.target, Var)
    }
    changed |= {s.var.name for s in walk(inside) if isinstance(s, (Declare, Let))}
    hoisted, kept, moved = [], [], set()

    def fixed(atom):
        if isinstance(atom, Var):
            return atom.name in moved or atom.name not in changed
        if isinstance(atom, Index):
            return not (getattr(atom.expr, "free_symbols", set()) & varying)
        return True  # a Const

    for statement in body:
        if (
            isinstance(statement, Let)
            and isinstance(statement.value, Op)
            and statement.value.type in FLOAT_TYPES
            and all(map(fixed, statement.value.args))
        ):
            hoisted.append(statement)
            moved.add(statement.var.name)
        else:
            kept.append(statement)
    if not hoisted:
        return pre, body
    return [*pre, *hoisted], kept
