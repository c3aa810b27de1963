"""Running a case (one or more programs traced as one function: one graph, one build) with a
dicp backend and eager, at every size configuration, forward and backward, and judging it.
"""

import contextlib
import re
import warnings
from dataclasses import dataclass, field

import torch

from dicp.bridge.pipeline.torch_compat import recompile_error_type, recompiles_raise
from dicp.tools.on_device import backend_device, on_device

from .check import float64_inputs, float64_reference_runs, judge, rounded_run
from .program import batch_function
from .ties import tie_affected

BACKEND = "new_backendgraph"


@dataclass(frozen=True)
class Case:
    """Programs compiled together. All have the same number of size configurations; with
    `dynamic`, the compiled function is called at each and must build nothing after the
    first."""

    programs: tuple
    dynamic: bool = False
    backward: bool = True
    backend: str = BACKEND
    device: str | None = None  # where the inputs go; None: the backend's device

    @property
    def configs(self):
        return self.programs[0].configs


@dataclass(frozen=True)
class Failure:
    kind: str  # value, exact, shape, dtype, missing; grad <same>; error, bounds, recompile
    detail: str
    program: str = ""  # the program it shows in, "" when the whole case fails
    where: str = ""

    def signature(self):
        """What a shrunk case must still show to count as the same failure."""
        if self.kind in ("error", "bounds", "recompile"):
            return self.kind, root_exception(self.detail)
        return (self.kind,)

    def __str__(self):
        where = f" in {self.program}" if self.program else ""
        where += f" ({self.where})" if self.where else ""
        return f"{self.kind}{where}: {self.detail}"


def root_exception(text):
    """The innermost exception type named in an error's text (dynamo wraps backend errors:
    "BackendCompilerFailed: backend='x' raised:\nZeroDivisionError: ...")."""
    names = re.findall(r"^(\w+(?:Error|Exception|Failed|Unsupported))\b", text, re.MULTILINE)
    return names[-1] if names else ""


class InvalidProgram(Exception):
    """Eager itself rejects the program (the generator should have caught it)."""


def run_case(case: Case) -> list:
    """The case's failures (empty when every output and gradient matches eager)."""
    torch.compiler.reset()
    fn = batch_function(case.programs)
    compiled = torch.compile(fn, backend=case.backend, dynamic=case.dynamic, fullgraph=True)
    compiled = on_device(compiled, case.device or backend_device(case.backend))
    for config in range(case.configs):
        runs = [ProgramRun(p, config, case.backward) for p in case.programs]
        # after the first size, a recompile raises: one build must serve every size
        with recompiles_raise() if config else contextlib.nullcontext():
            try:
                actual = compiled(*[t for r in runs for t in r.compiled_inputs])
                failures = _judge_all(runs, actual, case.backward)
            except Exception as error:
                return [error_failure(error, config)]
        if failures:
            return failures
    return []


def error_failure(error, config):
    kind = "bounds" if _caused_by(error, "BoundsError") else "error"
    if _caused_by(error, recompile_error_type().__name__):
        kind = "recompile"
    text = f"{type(error).__name__}: {error}".strip()
    return Failure(kind, text[:2000], where=f"config {config}")


def _caused_by(error, name):
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if type(error).__name__ == name:
            return True
        error = error.__cause__ or error.__context__
    return False


def _judge_all(runs, actual, backward):
    failures, start = [], 0
    for run in runs:
        count = len(run.expected)
        failures += run.judge_outputs(actual[start : start + count])
        start += count
    if failures or not backward:
        return failures
    grads = _compiled_grads(runs, actual)
    for run, run_grads in zip(runs, grads):
        failures += run.judge_grads(run_grads)
    return failures


def _compiled_grads(runs, actual):
    """Gradients of the compiled outputs, one backward call for the whole case (one graph)."""
    outputs, weights, inputs, start = [], [], [], 0
    for run in runs:
        for i, out in enumerate(actual[start : start + len(run.expected)]):
            if run.differentiable[i] and out.requires_grad:
                outputs.append(out)
                weights.append(run.weights[i])
        inputs += run.grad_inputs(run.compiled_inputs)
        start += len(run.expected)
    grads = _grad(outputs, inputs, weights)
    split, start = [], 0
    for run in runs:
        count = len(run.grad_inputs(run.compiled_inputs))
        split.append(grads[start : start + count])
        start += count
    return split


def _grad(outputs, inputs, weights):
    if not outputs or not inputs:
        return [None] * len(inputs)
    return list(torch.autograd.grad(outputs, inputs, weights, allow_unused=True))


@dataclass
class ProgramRun:
    """One program at one size configuration: its eager result, gradients and (on demand)
    the float64 reference."""

    program: object
    config: int
    backward: bool
    compiled_inputs: list = field(init=False)

    def __post_init__(self):
        self.fn = self.program.function()
        self.inputs = self.program.build_inputs(self.config)
        self.compiled_inputs = self.program.build_inputs(self.config)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                env = self.program.run(self.inputs)
        except Exception as error:
            raise InvalidProgram(f"{self.program.name}: eager fails: {error}") from error
        self.expected = [env[name] for name in self.program.outputs]
        self.output_dtypes, self.grad_dtype = self.program.tolerance_dtypes(env)
        self.differentiable = [o.requires_grad for o in self.expected]
        self.weights = [self._weight(i, o) for i, o in enumerate(self.expected)]
        self._reference = self._rounded = self._ties = None

    def _weight(self, i, out):
        g = torch.Generator().manual_seed(self.program.seed * 31 + i * 7 + self.config)
        return (
            torch.randn(out.shape, generator=g, dtype=torch.float64).to(out.dtype)
            if out.is_floating_point()
            else None
        )

    @staticmethod
    def grad_inputs(inputs):
        return [t for t in inputs if t.requires_grad]

    def eager_grads(self):
        outs = [o for o, d in zip(self.expected, self.differentiable) if d]
        weights = [w for w, d in zip(self.weights, self.differentiable) if d]
        return _grad(outs, self.grad_inputs(self.inputs), weights)

    def reference(self):
        """(outputs, gradients) of the program run in float64, computed once."""
        if self._reference is None:
            self._reference = (
                [None] * len(self.expected),
                [None] * len(self.grad_inputs(self.inputs)),
            )
            for context in float64_reference_runs():
                try:
                    with context():
                        self._reference = self._float64_run()
                    break
                except RuntimeError:  # e.g. scatter into a bfloat16 cast from a float64 value
                    continue
        return self._reference

    def _float64_run(self):
        inputs = float64_inputs(self.inputs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outs = list(self.fn(*inputs))
        pairs = [
            (o, w.to(torch.float64))
            for o, w, d in zip(outs, self.weights, self.differentiable)
            if d and o.requires_grad
        ]
        grads = _grad(
            [o for o, _ in pairs], self.grad_inputs(inputs), [w.to(o.dtype) for o, w in pairs]
        )
        return outs, grads

    def rounded(self):
        """The outputs with reductions rounded once (check.rounded_run), computed once."""
        if self._rounded is None:
            self._rounded = rounded_run(self.fn, self.inputs) or [None] * len(self.expected)
        return self._rounded

    def ties(self):
        """Per gradient: the elements not defined, at an order op's near tie (computed once)."""
        if self._ties is None:
            self._ties = tie_affected(self.fn, self.inputs)
        return self._ties

    def judge_outputs(self, actual):
        failures = []
        for i, (a, e) in enumerate(zip(actual, self.expected, strict=True)):
            mismatch = judge(
                a,
                e,
                lambda i=i: self.reference()[0][i],
                self.output_dtypes[i],
                rounded=lambda i=i: self.rounded()[i],
            )
            if mismatch:
                failures.append(self._failure(mismatch, f"output {i}"))
        return failures

    def judge_grads(self, actual_grads):
        failures = []
        names = [n for n, t in zip(self.program.input_names, self.inputs) if t.requires_grad]
        expected = self.eager_grads()
        for i, (name, a, e) in enumerate(zip(names, actual_grads, expected, strict=True)):
            mismatch = judge(
                a,
                e,
                lambda i=i: self.reference()[1][i],
                self.grad_dtype,
                ties=lambda i=i: self.ties()[i],
            )
            if mismatch:
                failures.append(self._failure(mismatch, f"gradient of {name}", "grad "))
        return failures

    def _failure(self, mismatch, what, prefix=""):
        return Failure(
            prefix + mismatch.kind,
            mismatch.detail,
            self.program.name,
            f"{what}, config {self.config}",
        )
