"""Shrinking a failing case to a minimal one that fails the same way.

Greedy: try simplifications biggest first (fewer programs, static shapes, no backward, fewer
outputs, fewer ops, simpler inputs, smaller dims); keep the first that eager still accepts
(generate.validate) and that still fails with the same signature; repeat until none helps or
the budget is spent. Every try is a real compile and run.
"""

import re
import time
from dataclasses import replace

import torch

from .generate import validate
from .runner import Case, run_case


def shrink(case, failure, test=run_case, accept=None, max_tries=80, max_seconds=300):
    """(smallest case found, its failure, tries made). `accept(case, failure)` may veto a
    smaller case that fails the same way (the driver vetoes those torch itself fails)."""
    state = _State(case, failure, test, max_tries, time.monotonic() + max_seconds)
    state.accept = accept or (lambda case, failure: True)
    progress = True
    while progress and not state.spent():
        progress = False
        for candidates in (
            _fewer_programs,
            _simpler_mode,
            _fewer_outputs,
            _fewer_ops,
            _simpler_inputs,
            _fewer_dims,
            _smaller_dims,
        ):
            if state.first_failing(candidates(state.case)):
                progress = True
                break
    return state.case, state.failure, state.tries


class _State:
    def __init__(self, case, failure, test, max_tries, deadline):
        self.case, self.failure, self.test = case, failure, test
        self.signature = failure.signature()
        self.max_tries, self.deadline, self.tries = max_tries, deadline, 0
        self.seen = set()

    def spent(self):
        return self.tries >= self.max_tries or time.monotonic() > self.deadline

    def first_failing(self, candidates):
        for candidate in candidates:
            if self.spent():
                return False
            key = _key(candidate)
            if key in self.seen or not all(validate(p) for p in candidate.programs):
                continue
            self.seen.add(key)
            self.tries += 1
            same = [f for f in self.test(candidate) if f.signature() == self.signature]
            if same and self.accept(candidate, same[0]):
                self.case, self.failure = candidate, same[0]
                return True
        return False


def _key(case):
    return (
        case.dynamic,
        case.backward,
        tuple((p.source(), p.inputs, p.configs) for p in case.programs),
    )


def _with_programs(case, programs):
    return replace(case, programs=tuple(programs))


def _fewer_programs(case):
    programs = list(case.programs)
    if len(programs) == 1:
        return
    for p in programs:  # one alone first: the usual outcome
        yield _with_programs(case, [p])
    half = len(programs) // 2
    yield _with_programs(case, programs[:half])
    yield _with_programs(case, programs[half:])
    for i in range(len(programs)):
        yield _with_programs(case, programs[:i] + programs[i + 1 :])


def _simpler_mode(case):
    if case.dynamic:
        yield replace(
            case, dynamic=False, programs=tuple(_keep_configs(p, 1) for p in case.programs)
        )
        if case.configs > 2:
            yield _with_programs(case, [_keep_configs(p, 2) for p in case.programs])
    if case.backward:
        yield replace(case, backward=False)


def _keep_configs(program, count):
    inputs = tuple(
        replace(
            i,
            dims=tuple(d[:count] for d in i.dims),
            args=(i.args[0], i.args[1][:count]) if i.kind == "perm" else i.args,
        )
        for i in program.inputs
    )
    return replace(program, inputs=inputs, configs=count)


def _each_program(case, simplify):
    """Cases with one program replaced by each of its simplifications."""
    for index, program in enumerate(case.programs):
        for simpler in simplify(program):
            programs = list(case.programs)
            programs[index] = simpler.live()
            yield _with_programs(case, programs)


def _fewer_outputs(case):
    def simplify(program):
        if len(program.outputs) > 1:
            for out in program.outputs:
                yield replace(program, outputs=(out,))

    return _each_program(case, simplify)


def _fewer_ops(case):
    """Each op bypassed: its readers read one of its operands instead."""

    def simplify(program):
        for index in reversed(range(len(program.ops))):
            op = program.ops[index]
            for operand in op.uses:
                yield _bypass(program, index, operand)

    return _each_program(case, simplify)


def _bypass(program, index, operand):
    name = program.ops[index].out
    pattern = re.compile(rf"\b{re.escape(name)}\b")
    ops = list(program.ops[:index])
    for op in program.ops[index + 1 :]:
        uses = tuple(dict.fromkeys(operand if u == name else u for u in op.uses))
        ops.append(replace(op, expr=pattern.sub(operand, op.expr), uses=uses))
    outputs = tuple(dict.fromkeys(operand if o == name else o for o in program.outputs))
    return replace(program, ops=tuple(ops), outputs=outputs)


SIMPLER_DTYPE = {
    torch.float16: torch.float32,
    torch.bfloat16: torch.float32,
    torch.float64: torch.float32,
    torch.int32: torch.int64,
}


def _simpler_inputs(case):
    def simplify(program):
        for index, i in enumerate(program.inputs):
            changes = []
            if i.layout:
                changes.append({"layout": ()})
            if i.grad:
                changes.append({"grad": False})
            if i.kind == "special":
                changes.append({"kind": "float"})
            if i.dtype in SIMPLER_DTYPE:
                changes.append({"dtype": SIMPLER_DTYPE[i.dtype]})
            for change in changes:
                inputs = list(program.inputs)
                inputs[index] = replace(i, **change)
                yield replace(program, inputs=tuple(inputs))

    return _each_program(case, simplify)


def _fewer_dims(case):
    """Each input without one of its dims (a layout naming dims is dropped with it); eager
    rejects the many programs whose ops need that dim, which validation filters out."""

    def simplify(program):
        for index, i in enumerate(program.inputs):
            if i.kind == "perm":
                continue
            for d in range(len(i.dims)):
                inputs = list(program.inputs)
                inputs[index] = replace(i, dims=i.dims[:d] + i.dims[d + 1 :], layout=())
                yield replace(program, inputs=tuple(inputs))

    return _each_program(case, simplify)


def _smaller_dims(case):
    """Each size (a per-configuration tuple) made smaller wherever it occurs."""

    def simplify(program):
        sizes = sorted(
            {d for i in program.inputs for d in i.dims if set(d) != {1}}, key=lambda d: -sum(d)
        )
        for size in sizes:
            for smaller in _smaller(size):
                yield _resize(program, size, smaller)

    return _each_program(case, simplify)


def _smaller(size):
    yield (1,) * len(size)
    if len(size) == 1:
        yield from ((s,) for s in range(2, size[0]))
    else:
        yield tuple(max(2, s - 1) for s in size)
        yield tuple(max(2, s // 2) for s in size)


def _resize(program, size, smaller):
    def dims(i):
        return tuple(smaller if d == size else d for d in i.dims)

    def args(i):
        if i.kind == "perm" and i.args[1] == size:
            return (i.args[0], smaller)
        return i.args

    inputs = tuple(replace(i, dims=dims(i), args=args(i)) for i in program.inputs)
    return replace(program, inputs=inputs)


def describe(case):
    """One line: programs, ops, inputs, mode."""
    ops = sum(len(p.ops) for p in case.programs)
    inputs = sum(len(p.inputs) for p in case.programs)
    mode = "dynamic" if case.dynamic else "static"
    return (
        f"{len(case.programs)} program(s), {ops} op(s), {inputs} input(s), {mode}"
        f"{', backward' if case.backward else ''}"
    )


__all__ = ["Case", "describe", "shrink"]
