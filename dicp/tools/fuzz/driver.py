"""The fuzz loop: generate programs, compile them in batches, isolate and shrink failures,
print repros, count.

Compiling dominates (a g++ build is about a second), so programs run in batches: one traced
function per batch, one graph and one build for all of them. A batch that fails is split:
failures named by program are rerun alone; a failure of the whole batch (a compile or run
error, an out-of-bounds access, a rebuild at another size) is bisected.
"""

import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from dicp import config
from dicp.tools.on_device import backend_device

from .generate import FAMILIES, consistent_sizes, generate, size_pool
from .repro import render
from .runner import BACKEND, Case, InvalidProgram, run_case
from .shrink import describe, shrink

SANITY_BACKEND = "aot_eager"  # torch's own compile path: if it fails too, dicp is not at fault


@dataclass
class Options:
    seed: int = 0
    programs: int = 100
    shapes: str = "static"  # static, dynamic or both
    backward: bool = True
    batch: int = 16
    max_ops: int = 8
    families: tuple = FAMILIES
    shrink: bool = True
    max_shrinks: int = 10  # failures shrunk per run; later ones are printed unshrunk
    shrink_tries: int = 80
    bounds_check: bool = True
    backend: str = BACKEND
    repro_dir: str = ""
    print: object = print


@dataclass
class Finding:
    failure: object
    case: Case
    tries: int = 0
    seconds: float = 0.0
    repro: str = ""


@dataclass
class Report:
    programs: Counter = field(default_factory=Counter)  # mode -> programs generated
    compared: Counter = field(default_factory=Counter)  # mode -> programs compared
    rejected: int = 0  # programs eager itself rejects
    torch_failures: int = 0  # failures aot_eager shares
    findings: list = field(default_factory=list)
    seconds: float = 0.0

    def kinds(self):
        return Counter(f.failure.kind for f in self.findings)

    def summary(self):
        kinds = self.kinds()
        errors = {k: n for k, n in kinds.items() if k in ("error", "bounds", "recompile")}
        mismatches = {k: n for k, n in kinds.items() if k not in errors}
        total = sum(self.programs.values())
        rate = 60 * total / self.seconds if self.seconds else 0.0
        modes = ", ".join(f"{n} {mode}" for mode, n in sorted(self.programs.items()))
        return (
            f"dicp fuzz: {total} programs ({modes}), {sum(self.compared.values())} compared"
            f", {self.rejected} rejected by eager; mismatches: {_counts(mismatches)}; "
            f"errors: {_counts(errors)}; torch-side failures: {self.torch_failures}; "
            f"{self.seconds:.0f} s, {rate:.0f} programs/min"
        )


def _counts(counter):
    total = sum(counter.values())
    if not total:
        return "0"
    return f"{total} (" + ", ".join(f"{k} {n}" for k, n in sorted(counter.items())) + ")"


def program_seed(seed, index):
    return seed * 1_000_003 + index


def fuzz(options: Options) -> Report:
    """Run the fuzzer; returns the report (findings with their shrunk repros)."""
    report, start = Report(), time.monotonic()
    # loads the backend, and a device backend's runtime, before the first backward: autograd's
    # engine sizes its per-device queues once, from the devices registered by then
    backend_device(options.backend)
    modes = {"static": [False], "dynamic": [True], "both": [False, True]}[options.shapes]
    with config.patch(bounds_check=options.bounds_check):
        for dynamic in modes:
            _fuzz_mode(options, dynamic, report)
    report.seconds = time.monotonic() - start
    options.print(report.summary())
    return report


def _fuzz_mode(options, dynamic, report):
    mode = "dynamic" if dynamic else "static"
    for start in range(0, options.programs, options.batch):
        indices = range(start, min(start + options.batch, options.programs))
        sizes = size_pool(random.Random(program_seed(options.seed, start)), 3) if dynamic else None
        programs = []
        for index in indices:
            report.programs[mode] += 1
            program = generate(
                program_seed(options.seed, index),
                configs=3 if dynamic else 1,
                max_ops=options.max_ops,
                backward=options.backward,
                families=options.families,
                name=f"p{index}",
                sizes=sizes,
            )
            if program is None:
                report.rejected += 1
            else:
                programs.append(program)
        for batch in _pack(programs, dynamic):
            _run_batch(
                options,
                Case(tuple(batch), dynamic, options.backward, options.backend),
                report,
                mode,
            )


def _pack(programs, dynamic):
    """Batches whose inputs together keep the same size and stride equalities at every size
    configuration (see generate.consistent_sizes): a program that would break them in one
    batch goes to another."""
    if not dynamic:
        return [programs] if programs else []
    batches = []
    for program in programs:
        for batch in batches:
            if consistent_sizes(
                [
                    [t for p in batch + [program] for t in p.build_inputs(c)]
                    for c in range(program.configs)
                ]
            ):
                batch.append(program)
                break
        else:
            batches.append([program])
    return batches


def _run_batch(options, case, report, mode):
    try:
        failures = run_case(case)
    except InvalidProgram:
        report.rejected += len(case.programs)
        return
    if not failures:
        report.compared[mode] += len(case.programs)
        return
    named = {f.program: f for f in reversed(failures) if f.program}
    if named:
        for name, failure in named.items():
            program = next(p for p in case.programs if p.name == name)
            _finding(options, _alone_or_batch(case, program, failure), report, mode)
        rest = tuple(p for p in case.programs if p.name not in named)
        if rest:
            _run_batch(options, Case(rest, case.dynamic, case.backward, case.backend), report, mode)
        return
    _bisect(options, case, failures[0], report, mode)


def _alone_or_batch(case, program, failure):
    """(case, failure) to report: the program alone if it fails alone, else the batch."""
    alone = Case((program,), case.dynamic, case.backward, case.backend)
    same = [f for f in run_case(alone) if f.signature() == failure.signature()]
    return (alone, same[0]) if same else (case, failure)


def _bisect(options, case, failure, report, mode):
    """A failure of the whole batch: find the programs that show it."""
    if len(case.programs) == 1:
        _finding(options, (case, failure), report, mode)
        return
    half = len(case.programs) // 2
    halves = [
        Case(part, case.dynamic, case.backward, case.backend)
        for part in (case.programs[:half], case.programs[half:])
    ]
    outcomes = [(h, run_case(h)) for h in halves]
    if not any(f for _, f in outcomes):  # only the whole batch fails: report it whole
        _finding(options, (case, failure), report, mode)
        return
    for half_case, failures in outcomes:
        if failures:
            _run_batch(options, half_case, report, mode)
        else:
            report.compared[mode] += len(half_case.programs)


def _finding(options, case_failure, report, mode):
    case, failure = case_failure
    report.compared[mode] += len(case.programs) if failure.kind not in ("error", "bounds") else 0
    if _torch_fails_too(case, failure):
        report.torch_failures += 1
        options.print(
            f"torch-side failure (aot_eager fails too), not counted: {failure}\n"
            + "".join(p.source() for p in case.programs)
        )
        return
    finding = Finding(failure, case)
    options.print(f"=== {mode} finding {len(report.findings) + 1}: {failure}")
    if options.shrink and len(report.findings) < options.max_shrinks:
        start = time.monotonic()
        finding.case, finding.failure, finding.tries = shrink(
            case,
            failure,
            accept=lambda c, f: not _torch_fails_too(c, f),
            max_tries=options.shrink_tries,
        )
        finding.seconds = time.monotonic() - start
        options.print(
            f"shrunk in {finding.tries} tries ({finding.seconds:.0f} s) to "
            f"{describe(finding.case)}: {finding.failure}"
        )
    finding.repro = render(finding.case, finding.failure)
    report.findings.append(finding)
    _emit_repro(options, finding, len(report.findings))


def _torch_fails_too(case, failure):
    """Whether torch's own compile path (aot_eager: dynamo and AOTAutograd, no dicp) shows
    the failure too: a decomposition whose result differs from eager's kernel (prod's
    backward at inf), or an op that specializes sizes under dynamo. On the backend's device:
    the inputs' device copies (a view's storage as a 1-d base, say) are part of what both see."""
    device = backend_device(case.backend)
    sanity = Case(case.programs, case.dynamic, case.backward, SANITY_BACKEND, device)
    return any(f.signature() == failure.signature() for f in run_case(sanity))


def _emit_repro(options, finding, number):
    if options.repro_dir:
        path = Path(options.repro_dir) / f"repro_{number}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(finding.repro)
        options.print(f"repro written to {path}")
    options.print("----- repro -----\n" + finding.repro + "----- end of repro -----")
