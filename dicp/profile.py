"""Compile profile: where compile time goes and what was compiled.

Stage timers (seconds of self time; a nested stage's time is not counted again in its parent):
import (dicp's and the backend's, up to its registration), dynamo and aot_autograd (their time
as the backend sees it: the compile's wall time minus dicp's own; dynamo's compiles of frames
without a graph count too), setup (backend lookup and
the decomposition table), conversion, shape_inference, codegen, build (the C++ compiler), load
(cache lookups, loading libraries and wrappers), run (each compiled graph's first call). Their
sum is a first call's wall time (bench/bench_compile.py --profile compares them).
Counters: graphs per kind, vendor nodes, kernels, cache hits/misses/builds, fallback ops by
name, compiles per function.

    dicp.stats()                      # totals of this process, a Stats
    with dicp.profile.collect() as s: # what one block compiled
        model(x)
    print(s.format())

`DICP_PROFILE=1` prints the table at exit. Each compiled graph's stages are logged at INFO on
the `dicp.profile` logger, so `TORCH_LOGS=dicp.profile` shows them (torch's logging accepts
any module's name; registering a named artifact needs its private API, which dicp avoids).
"""

import atexit
import contextlib
import copy
import logging
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from dicp import config

log = logging.getLogger(__name__)

_COUNTED = ("stages", "counters", "fallback_ops", "compiles", "recompiled")
STAGES = (
    "import",
    "dynamo",
    "aot_autograd",
    "setup",
    "conversion",
    "shape_inference",
    "codegen",
    "build",
    "load",
    "run",
)
GRAPH_STAGES = ("conversion", "shape_inference", "codegen", "build", "load")  # per graph


@dataclass
class Stats:
    stages: Counter = field(default_factory=Counter)  # stage -> seconds
    counters: Counter = field(default_factory=Counter)  # name -> count
    fallback_ops: Counter = field(default_factory=Counter)  # ATen op -> graphs it fell back in
    compiles: Counter = field(default_factory=Counter)  # function -> compiles
    # function -> compiles after its first since dynamo's last reset (a trace after
    # torch._dynamo.reset() starts afresh, as test suites and notebooks do)
    recompiled: Counter = field(default_factory=Counter)

    def __sub__(self, earlier):
        return Stats(*(_minus(getattr(self, f), getattr(earlier, f)) for f in _COUNTED))

    @property
    def recompiles(self) -> dict:
        return {name: n for name, n in self.recompiled.items() if n > 0}

    def format(self) -> str:
        """The profile as a text table."""
        total = sum(self.stages.values())
        lines = ["dicp compile profile", f"{'stage':<18}{'seconds':>10}{'share':>8}"]
        for name in [*STAGES, *sorted(set(self.stages) - set(STAGES))]:
            seconds = self.stages.get(name, 0.0)
            share = f"{100 * seconds / total:.1f}%" if total else "-"
            lines.append(f"{name:<18}{seconds:>10.3f}{share:>8}")
        lines.append(f"{'total':<18}{total:>10.3f}")
        lines += [f"{'counter':<34}value"]
        lines += [f"{name:<34}{value}" for name, value in sorted(self.counters.items())]
        lines += _section("fallback ops (graphs)", self.fallback_ops)
        lines += _section("compiles per function", self.compiles)
        return "\n".join(lines)


def _section(title, counter):
    if not counter:
        return [f"{title}: none"]
    return [f"{title}:"] + [f"  {name:<50} {n}" for name, n in counter.most_common()]


def _minus(after, before):
    return Counter({k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)})


_TOTAL = Stats()
_local = threading.local()


def stats() -> Stats:
    """A copy of this process's totals."""
    return copy.deepcopy(_TOTAL)


@contextlib.contextmanager
def collect():
    """`with collect() as s:` -- `s` holds what the block compiled once it ends."""
    before, result = stats(), Stats()
    try:
        yield result
    finally:
        delta = stats() - before
        for name in _COUNTED:
            getattr(result, name).update(getattr(delta, name))


@contextlib.contextmanager
def stage(name: str):
    """Time a stage; time spent in stages nested inside it counts only for them."""
    stack = _stack()
    start = time.perf_counter()
    stack.append(0.0)
    try:
        yield
    finally:
        elapsed = time.perf_counter() - start
        nested = stack.pop()
        _TOTAL.stages[name] += elapsed - nested
        if stack:
            stack[-1] += elapsed


def stage_totals() -> dict:
    return dict(_TOTAL.stages)


def log_graph(name: str, stages_before: dict, vendor_nodes: int) -> None:
    """One INFO line per compiled graph on `dicp.profile` (TORCH_LOGS=dicp.profile)."""
    if log.isEnabledFor(logging.INFO):
        spent = {s: _TOTAL.stages[s] - stages_before.get(s, 0.0) for s in GRAPH_STAGES}
        times = ", ".join(f"{s} {1000 * t:.1f} ms" for s, t in spent.items())
        log.info("%s: %s; %d vendor nodes", name, times, vendor_nodes)


_import_counted = False


def imported(started: float) -> None:
    """The import stage, once per process: from `started` (a perf_counter reading taken when
    dicp's import began) to now, when a backend registers."""
    global _import_counted
    if not _import_counted:
        _import_counted = True
        add_time("import", time.perf_counter() - started)


def add_time(name: str, seconds: float) -> None:
    _TOTAL.stages[name] += seconds


def count(name: str, n: int = 1) -> None:
    _TOTAL.counters[name] += n
    _ensure_report_at_exit()


def fallback(op: str) -> None:
    _TOTAL.fallback_ops[op] += 1


def compiled_function(name: str, again: bool) -> None:
    """Count one more compile of function `name`; `again`: it was compiled before since
    dynamo's last reset."""
    _TOTAL.compiles[name] += 1
    if again:
        _TOTAL.recompiled[name] += 1


def _stack():
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


_registered = False


def _ensure_report_at_exit():
    global _registered
    if not _registered:
        _registered = True
        atexit.register(_report_at_exit)


def _report_at_exit():
    try:
        enabled = config.profile
    except config.ConfigError as error:
        print(f"dicp: {error}", file=sys.stderr)
        return
    if enabled:
        print(stats().format(), file=sys.stderr)
