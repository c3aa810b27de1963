"""One OpInfo op, one mode, its dtypes: compile with the backend, compare with eager.

Modes:
- `static`: forward, every tested dtype the OpInfo declares for the CPU.
- `grad`: float32, forward and the gradient of every differentiable input.
- `dynamic`: float32 with `dynamic=True`, at the samples' sizes and again with every dim above
  1 grown by one.

Compile cost dominates (dynamo, AOTAutograd and a g++ build per graph), so all samples of a
mode, across its dtypes, are traced as one function returning every sample's output: one
graph, one build. Only when that fails is the work split: per dtype, and, for an error, by
halving the samples until one sample fails alone. A mismatch names its sample directly.

Errors that aot_eager raises too come from torch, not the backend: such samples are dropped
(counted in `torch_failures`) and the rest run again.
"""

import dataclasses
import hashlib
import traceback

import torch
import torch._dynamo

from dicp import profile
from dicp.bridge.pipeline.fallback import declared_reason, observe_fallbacks
from dicp.api import get_backend
from dicp.tools.on_device import backend_device, on_device

from . import samples as sample_lib
from .compare import Mismatch, check_outputs, check_tensor, leaves
from .dtypes import case_dtypes
from .outcome import Outcome

BACKEND = "new_backendgraph"
MODES = ("static", "grad", "dynamic", "float64")
NO_GRAPH = "dynamo compiled no graph: it runs these samples eagerly, whatever the backend"


def seed_for(*key, base=0):
    """The inputs' seed: a hash of the case's identity (op, mode, dtype) and the seed base, as
    the harness seeds each pytest test from its id."""
    text = "/".join([str(base), "opinfo", *map(str, key)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")


class Failure(Exception):
    """An attempt raised: `kind` is `compile error`, `runtime error` or `out-of-bounds`."""

    def __init__(self, kind, error):
        super().__init__(f"{kind}: {type(error).__name__}: {_first_line(error)}")
        self.kind, self.error = kind, error


@dataclasses.dataclass
class Attempt:
    verdicts: list  # per sample: None (pass) or Mismatch
    fallbacks: set  # ATen ops run as eager fallback (not declared)
    graphs: int


class OpCheck:
    """Checks one OpInfo in one mode; `run()` returns an Outcome per tested dtype."""

    def __init__(self, opinfo, mode, seed_base=0, backend=BACKEND, limits=sample_lib.SAMPLE_LIMITS):
        self.opinfo, self.mode, self.seed_base, self.backend = opinfo, mode, seed_base, backend
        self.limits = limits
        # a device backend (emugraph) runs the samples on its device, compared with eager on
        # the host; looked up now so that its runtime loads before eager's first backward
        self.device = backend_device(backend)
        self.name = case_name(opinfo)
        self.dropped = {}  # dtype -> samples whose eager (or aot_eager) call fails
        self.graph_breaks = set()  # backend exceptions dynamo turned into graph breaks

    # ---- samples --------------------------------------------------------------------------

    def samples(self, dtype):
        torch.manual_seed(seed_for(self.name, self.mode, dtype, base=self.seed_base))
        made = sample_lib.generate(self.opinfo, dtype, self.mode == "grad", self.limits)
        kept = [s for s in made if self._eager_ok(s)]
        self.dropped[dtype] = len(made) - len(kept)
        return kept

    def _eager_ok(self, sample):
        try:
            expected = self.eager(sample)
        except Exception:
            return False
        sample.expected = expected
        return True

    def eager(self, sample, tensors=None):
        """Eager outputs of `sample` (and, in grad mode, its input gradients)."""
        tensors = sample.copies() if tensors is None else tensors
        out = sample.call(self.opinfo, tensors)
        if self.mode != "grad":
            return out
        sample.cotangents = _cotangents(sample, out)
        return out, _grads(sample, tensors, out, sample.cotangents)

    def reference(self, sample):
        """The float64 run of `sample` (None if the op has no float64 version)."""
        try:
            tensors = sample_lib.float64_copies(sample)
            out = sample.call(self.opinfo, tensors)
            if self.mode != "grad":
                return out
            cotangents = [c.double() for c in sample.cotangents]
            return out, _grads(sample, tensors, out, cotangents)
        except Exception:
            return None

    # ---- running ----------------------------------------------------------------------------

    def run(self, dtypes=None):
        dtypes = case_dtypes(self.opinfo, self.mode) if dtypes is None else dtypes
        by_dtype = {dtype: self.samples(dtype) for dtype in dtypes}
        outcomes = {d: self._empty(d) for d, s in by_dtype.items() if not s}
        live = {d: s for d, s in by_dtype.items() if s}
        if len(live) > 1:
            try:
                attempt = self.attempt([s for ss in live.values() for s in ss])
                outcomes.update(self._judge(live, attempt))
                live = {}
            except Failure:
                pass  # split per dtype below
        for dtype, samples in live.items():
            outcomes[dtype] = self.run_one_dtype(dtype, samples)
        return [outcomes[d] for d in dtypes]

    def run_one_dtype(self, dtype, samples):
        while samples:
            try:
                attempt = self.attempt(samples)
                return self._judge({dtype: samples}, attempt)[dtype]
            except Failure as failure:
                kept = self._without_failing(samples, failure)
                if kept is None:
                    return self._failed(dtype, samples, failure)
                self.dropped[dtype] += len(samples) - len(kept)
                samples = kept
        return self._outcome(
            dtype,
            "skip",
            "",
            "every sample fails with aot_eager too, or breaks the graph (run eagerly)",
            tested=0,
        )

    def _without_failing(self, samples, failure):
        """`samples` less those that fail for torch itself (aot_eager raises too) or make
        dynamo break the graph; None if there is none."""
        if failure.kind != "graph break":
            return self._without_torch_failures(samples)
        kept = []
        for sample in samples:  # traced only (no build): where the break comes from is cheap
            try:
                self.attempt([sample], backend=_trace_only(self.backend))
                kept.append(sample)
            except Failure as broke:
                if broke.kind != "graph break":
                    kept.append(sample)
                elif not self._breaks_without_decompositions(sample):
                    self.graph_breaks.add(str(broke.error))  # the backend's doing: not native
        if len(kept) < len(samples):
            return kept
        # the break comes from the backend's own passes, after tracing: halve to find it
        culprit = self._isolate(samples)
        if culprit is None or culprit[1].kind != "graph break":
            return None
        self.graph_breaks.add(str(culprit[1].error))
        return [s for s in samples if s is not culprit[0]]

    def _breaks_without_decompositions(self, sample):
        """Whether AOTAutograd breaks the graph on `sample` with no decompositions (as
        aot_eager traces): then the break is torch's, for every backend."""
        try:
            self.attempt([sample], backend=_trace_only(None))
            return False
        except Failure as broke:
            return broke.kind == "graph break"

    def attempt(self, samples, backend=None):
        """Compile all `samples` as one function and compare each with eager."""
        torch._dynamo.reset()
        compiler = _Observed(backend or self.backend)
        device = self.device if backend is None else backend_device(backend)
        fn = on_device(
            torch.compile(
                sample_lib.batched_call(self.opinfo.op, samples, device),
                backend=compiler,
                dynamic=self.mode == "dynamic",
            ),
            device,
        )
        with observe_fallbacks() as fallbacks, profile.collect() as stats:
            verdicts = self._compare_calls(fn, samples)
        if compiler.swallowed:
            # dynamo caught a backend exception and ran the code eagerly: nothing was checked
            raise Failure("graph break", GraphBreak(compiler.swallowed[0]))
        return Attempt(verdicts, self._undeclared(fallbacks), _graphs(stats))

    def _compare_calls(self, fn, samples):
        verdicts = self._call_and_compare(fn, samples)
        if self.mode == "dynamic":
            again = self._call_and_compare(
                fn, [self._grown(s) for s in samples], "at the second size"
            )
            verdicts = [v or w for v, w in zip(verdicts, again)]
        return verdicts

    def _call_and_compare(self, fn, samples, where=""):
        inputs = [s.copies() for s in samples]
        flat = [t for ts in inputs for t in ts]
        outputs = _guarded(lambda: fn(*flat))
        if self.mode == "grad":
            outputs = _guarded(lambda: self._with_grads(samples, inputs, outputs))
        return [self._verdict(s, out, where) for s, out in zip(samples, outputs)]

    def _with_grads(self, samples, inputs, outputs):
        diffs, cots, leaves_ = [], [], []
        for sample, ins, out in zip(samples, inputs, outputs):
            diffs += _differentiable(sample, out)
            cots += sample.cotangents
            leaves_ += _grad_leaves(ins)
        grads = _autograd(diffs, leaves_, cots)
        paired, start = [], 0
        for ins, out in zip(inputs, outputs):
            n = len(_grad_leaves(ins))
            paired.append((out, grads[start : start + n]))
            start += n
        return paired

    def _verdict(self, sample, actual, where):
        reference = _memo(lambda: self.reference(sample))
        try:
            if self.mode == "grad":
                check_outputs(actual[0], sample.expected[0], lambda: _part(reference(), 0))
                _check_grads(actual[1], sample.expected[1], lambda: _part(reference(), 1))
            else:
                check_outputs(actual, sample.expected, reference)
        except Mismatch as mismatch:
            if where:
                mismatch.detail = f"{mismatch.detail} ({where})"
            return mismatch
        return None

    def _grown(self, sample):
        """The sample with its tensors grown (samples.grown) if eager accepts them, else as
        it is."""
        grown = sample.with_tensors(sample.copies(sample_lib.grown))
        return grown if self._eager_ok(grown) else sample

    # ---- failures ---------------------------------------------------------------------------

    def _without_torch_failures(self, samples):
        """`samples` less those that fail with aot_eager too; None if none does."""
        try:
            self.attempt(samples, backend="aot_eager")
            return None
        except Failure:
            pass
        kept = []
        for sample in samples:
            try:
                self.attempt([sample], backend="aot_eager")
                kept.append(sample)
            except Failure:
                continue
        return kept if len(kept) < len(samples) else None

    def _failed(self, dtype, samples, failure):
        culprit = self._isolate(samples) or (None, failure)
        sample, failure = culprit
        where = _sample_text(sample) if sample else "only when all samples run together"
        return self._outcome(
            dtype, "fail", failure.kind, str(failure), sample=where, tested=len(samples)
        )

    def _isolate(self, samples):
        """(sample, Failure) for one sample that fails on its own, halving the list."""
        if len(samples) == 1:
            try:
                self.attempt(samples)
            except Failure as failure:
                return samples[0], failure
            return None
        middle = len(samples) // 2
        for half in (samples[:middle], samples[middle:]):
            try:
                self.attempt(half)
            except Failure:
                return self._isolate(half)
        return None

    def _judge(self, live, attempt):
        if attempt.graphs == 0:  # e.g. ops returning Python numbers, or data-dependent ones
            return {dtype: self._outcome(dtype, "skip", "", NO_GRAPH, tested=0) for dtype in live}
        outcomes, verdicts = {}, iter(attempt.verdicts)
        for dtype, samples in live.items():
            mine = [(s, next(verdicts)) for s in samples]
            bad = [(s, v) for s, v in mine if v is not None]
            if bad:
                sample, mismatch = bad[0]
                kind = "grad" if mismatch.kind.startswith("grad") else mismatch.kind
                detail = f"{len(bad)}/{len(samples)} samples; {mismatch.detail}"
                outcomes[dtype] = self._outcome(
                    dtype,
                    "fail",
                    kind,
                    detail,
                    sample=_sample_text(sample),
                    tested=len(samples),
                    attempt=attempt,
                )
            else:
                outcomes[dtype] = self._outcome(
                    dtype, "pass", "", "", tested=len(samples), attempt=attempt
                )
        return outcomes

    def _empty(self, dtype):
        return self._outcome(dtype, "skip", "", "no sample input that eager accepts", tested=0)

    def _outcome(self, dtype, status, kind, detail, sample="", tested=0, attempt=None):
        return Outcome(
            op=self.name,
            dtype=_dtype_name(dtype),
            mode=self.mode,
            status=status,
            kind=kind,
            detail=detail,
            sample=sample,
            samples=tested,
            dropped=self.dropped.get(dtype, 0),
            fallbacks=sorted(attempt.fallbacks if attempt else set())
            + sorted(f"graph break: {b}" for b in self.graph_breaks),
            graphs=attempt.graphs if attempt else 0,
        )

    def _undeclared(self, fallbacks):
        try:
            backend = get_backend(self.backend)
        except KeyError:  # inductor, aot_eager: no declared fallbacks to tell apart
            return set()
        return {f.op for f in fallbacks if declared_reason(backend, f.op) is None}


# ---- helpers ------------------------------------------------------------------------------------


def case_name(opinfo):
    return opinfo.name + (f".{opinfo.variant_test_name}" if opinfo.variant_test_name else "")


def _dtype_name(dtype):
    return str(dtype).removeprefix("torch.")


def _sample_text(sample):
    return f"sample {sample.index} ({sample.description})"


def _first_line(error):
    text = str(error).strip().splitlines()
    return text[0][:400] if text else ""


def _memo(fn):
    cache = []

    def get():
        if not cache:
            cache.append(fn())
        return cache[0]

    return get


def _part(value, i):
    return None if value is None else value[i]


def _guarded(call):
    """Run `call`, turning an exception into a Failure of the right kind."""
    try:
        return call()
    except Exception as error:
        raise Failure(_error_kind(error), _root(error)) from error


def _root(error):
    inner = getattr(error, "inner_exception", None)
    return inner if inner is not None else error


_COMPILE_FRAMES = {"compile_graph", "compile_fx"}  # the entry's, around every stage


def _error_kind(error):
    from dicp.vendor.new_backendGraph.bounds import BoundsError

    chain = [error]
    while chain[-1].__cause__ is not None and len(chain) < 10:
        chain.append(chain[-1].__cause__)
    if any(isinstance(e, BoundsError) for e in chain):
        return "out-of-bounds"
    if isinstance(error, torch._dynamo.exc.BackendCompilerFailed):
        return "compile error"
    frames = {f.name for e in chain for f in traceback.extract_tb(e.__traceback__)}
    return "compile error" if frames & _COMPILE_FRAMES else "runtime error"


class GraphBreak(Exception):
    """Dynamo caught an exception of the backend and ran that code eagerly instead."""


class _Observed:
    """The backend `name`, noting the exceptions dynamo turns into a graph break (its
    `exceptions_allowed_to_be_fallback`: data-dependent output shapes and the like) instead
    of raising them."""

    def __init__(self, backend):
        self.backend = (
            torch._dynamo.lookup_backend(backend) if isinstance(backend, str) else backend
        )
        self.swallowed = []

    def __call__(self, gm, example_inputs):
        try:
            return self.backend(gm, example_inputs)
        except torch._dynamo.exc.exceptions_allowed_to_be_fallback as error:
            self.swallowed.append(f"{type(error).__name__}: {_first_line(error)}")
            raise


def _trace_only(name):
    """AOTAutograd with the backend's decompositions (none if `name` is None) and no code
    generation: what the backend traces, at a fraction of the cost (no build), to find which
    samples break the graph."""
    from torch._dynamo.backends.common import aot_autograd

    table = get_backend(name).decompositions if name else {}
    table = table() if callable(table) else table
    keep = lambda gm, _: gm
    return aot_autograd(fw_compiler=keep, bw_compiler=keep, decompositions=table)


def _graphs(stats):
    """Graphs dynamo handed the backend: compiled, or whole from the AOT cache (a second run
    of the suite on the same sources finds every graph there, in the default cache folder)."""
    return sum(
        v for k, v in stats.counters.items() if k.startswith("graphs (") or k == "AOT cache hits"
    )


# ---- gradients ----------------------------------------------------------------------------------


def _differentiable(sample, out):
    process = sample.output_process_fn_grad or (lambda x: x)
    return [
        t
        for t in leaves(process(out))
        if isinstance(t, torch.Tensor) and t.requires_grad and t.is_floating_point()
    ]


def _cotangents(sample, out):
    generator = torch.Generator().manual_seed(sample.index)
    return [
        torch.randn(t.shape, generator=generator).to(t.dtype) for t in _differentiable(sample, out)
    ]


def _grad_leaves(tensors):
    seen, result = set(), []
    for t in tensors:
        if t.requires_grad and id(t) not in seen:
            seen.add(id(t))
            result.append(t)
    return result


def _grads(sample, tensors, out, cotangents):
    return _autograd(_differentiable(sample, out), _grad_leaves(tensors), cotangents)


def _autograd(outputs, inputs, cotangents):
    if not outputs or not inputs:
        return [torch.zeros_like(t) for t in inputs]
    return list(
        torch.autograd.grad(outputs, inputs, cotangents, allow_unused=True, materialize_grads=True)
    )


def _check_grads(actual, expected, reference):
    if len(actual) != len(expected):
        raise Mismatch("grad structure", f"{len(actual)} gradients where eager has {len(expected)}")
    for i, (a, e) in enumerate(zip(actual, expected)):
        try:
            check_tensor(a, e, lambda i=i: _part(reference(), i), f"gradient of input {i}")
        except Mismatch as mismatch:
            raise Mismatch(f"grad {mismatch.kind}", mismatch.detail) from None
