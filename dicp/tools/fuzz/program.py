"""A fuzz program: inputs, a straight line of ops as Python expressions, outputs.

A program is data (so it can be shrunk) that renders to Python source (so it can be traced
by dynamo and printed as a repro). Each op assigns one value: `v3 = torch.gather(v1, -1, i2)`.
"""

import itertools
import textwrap
from dataclasses import dataclass, field, replace

import torch
import torch.nn.functional as F

NAMESPACE = {"torch": torch, "F": F}


@dataclass(frozen=True)
class Op:
    out: str  # the value it assigns
    expr: str  # Python expression over input and value names
    uses: tuple  # the names `expr` reads
    family: str  # pointwise, reduction, view, indexing, concat, promotion


@dataclass(frozen=True)
class Program:
    """`configs` size configurations: 1 for static shapes; 2-3 for dynamic ones, each input's
    dims giving its size at every configuration (one compiled function serves them all)."""

    name: str
    inputs: tuple
    ops: tuple
    outputs: tuple
    configs: int = 1
    seed: int = 0
    notes: tuple = field(default=(), compare=False)

    @property
    def input_names(self):
        return [i.name for i in self.inputs]

    def source(self, name=None) -> str:
        body = [f"{op.out} = {op.expr}" for op in self.ops]
        body.append(f"return ({''.join(o + ', ' for o in self.outputs)})")
        return (
            f"def {name or self.name}({', '.join(self.input_names)}):\n"
            + textwrap.indent("\n".join(body), "    ")
            + "\n"
        )

    def build_inputs(self, config):
        return [i.build(config) for i in self.inputs]

    def function(self):
        namespace = dict(NAMESPACE)
        exec(compile(self.source(), f"<fuzz {self.name}>", "exec"), namespace)
        return namespace[self.name]

    def live(self):
        """The program without ops and inputs that no output depends on."""
        needed, ops = set(self.outputs), []
        for op in reversed(self.ops):
            if op.out in needed:
                ops.append(op)
                needed |= set(op.uses)
        inputs = tuple(i for i in self.inputs if i.name in needed)
        return replace(self, ops=tuple(reversed(ops)), inputs=inputs)

    def run(self, inputs):
        """Eager, op by op: every value by name (the outputs are `self.outputs`)."""
        env = dict(zip(self.input_names, inputs))
        for op in self.ops:
            env[op.out] = evaluate(op.expr, env)
        return env

    def loosest_float(self, env):
        """Per value, the least precise float dtype among it and the values it is computed
        from: the dtype whose tolerance its result gets (a float64 result of float32 work is
        only as exact as float32)."""
        loosest = {
            name: _float_or_none(v.dtype) for name, v in env.items() if name in self.input_names
        }
        for op in self.ops:
            dtypes = [loosest.get(u) for u in op.uses] + [_float_or_none(env[op.out].dtype)]
            loosest[op.out] = max((d for d in dtypes if d is not None), key=_EPS.get, default=None)
        return loosest

    def tolerance_dtypes(self, env):
        """(per output, for gradients): the float dtype whose tolerance a result gets."""
        loosest = self.loosest_float(env)
        every = max((d for d in loosest.values() if d is not None), key=_EPS.get, default=None)
        return [loosest.get(name) for name in self.outputs], every

    def op_count(self):
        return len(self.ops)

    def families(self):
        return sorted({op.family for op in self.ops})


_EPS = {
    d: torch.finfo(d).eps for d in (torch.float64, torch.float32, torch.float16, torch.bfloat16)
}


def _float_or_none(dtype):
    return dtype if dtype in _EPS else None


def evaluate(expr, env):
    """Value of an op's expression in `env` (names -> tensors)."""
    return eval(expr, NAMESPACE, env)


def batch_source(programs, name="batch"):
    """One function running `programs` side by side: one traced graph, one build. It takes
    every program's inputs in order and returns every program's outputs in order."""
    parts, start, calls = [], 0, []
    for p in programs:
        parts.append(p.source())
        stop = start + len(p.inputs)
        calls.append(f"*{p.name}(*args[{start}:{stop}])")
        start = stop
    parts.append(f"def {name}(*args):\n    return ({', '.join(calls)},)\n")
    return "\n\n".join(parts)


_traced = itertools.count()


def batch_function(programs, name="batch"):
    """The batch as a function, from a source file of its own (dicp counts compiles per
    function and source line, and must not see one function recompiled many times)."""
    namespace = dict(NAMESPACE)
    exec(compile(batch_source(programs, name), f"<fuzz {name} {next(_traced)}>", "exec"), namespace)
    return namespace[name]
