"""The OpInfo run's summary: counts, the two pass rates, failures grouped by kind, and how the
results stand against the expected-failure table.

An op passes (with fallback) when every case it ran, over its dtypes and modes, passed; it runs
natively when it also fell back to eager on no op the backend does not declare
(`Backend.expected_fallbacks`: DICP_STRICT=1 semantics) and dynamo broke no graph on a backend
error. Skipped ops (SKIPS, no tested dtype, or no sample a mode could run) count in neither.
"""

from collections import defaultdict

from .cases import why_skipped
from .expectations import expected_failure


def table_verdict(outcome):
    """'ok', 'xfail' (listed and failing), 'FAIL' (failing, not listed) or 'XPASS'."""
    listed = expected_failure(outcome.op, outcome.dtype, outcome.mode) is not None
    if outcome.status == "fail":
        return "xfail" if listed else "FAIL"
    if outcome.status == "pass" and listed:
        return "XPASS"
    return "ok"


def latest(outcomes):
    """The last outcome of each (op, dtype, mode): a results file may hold reruns."""
    return list({o.key: o for o in outcomes}.values())


def _by_op(outcomes):
    ops = defaultdict(list)
    for o in outcomes:
        ops[o.op].append(o)
    return ops


def summarize(outcomes, names, seconds, backend="new_backendgraph"):
    """(text, ok): ok is False if any case disagrees with the expected-failure table."""
    outcomes = latest(outcomes)
    ops = _by_op(outcomes)
    skipped = [
        n
        for n in names
        if why_skipped(n) is not None or (n in ops and all(o.status == "skip" for o in ops[n]))
    ]
    tested = [n for n in names if n not in skipped and n in ops]
    not_run = len(names) - len(skipped) - len(tested)
    passing = [n for n in tested if all(o.status != "fail" for o in ops[n])]
    native = [n for n in passing if all(not o.fallbacks for o in ops[n])]
    failures = defaultdict(set)
    for o in outcomes:
        if o.status == "fail":
            failures[o.kind].add(o.op)
    verdicts = defaultdict(list)
    for o in outcomes:
        verdicts[table_verdict(o)].append(o)
    lines = ["", f"== OpInfo conformance ({backend}, DICP_BOUNDS_CHECK=1) =="]
    lines += _failure_lines(outcomes, failures)
    lines += _table_lines(verdicts)
    cases = defaultdict(int)
    for o in outcomes:
        cases[o.status] += 1
    kinds = ", ".join(
        f"{k} {sum(o.kind == k for o in outcomes if o.status == 'fail')}" for k in sorted(failures)
    )
    pct = (lambda n: f"{100 * n / len(tested):.1f}%") if tested else (lambda n: "-")
    task_seconds = sum({(o.op, o.mode): o.seconds for o in outcomes}.values())
    lines.append(
        f"opinfo summary: {len(names)} ops, {len(skipped)} skipped, {len(tested)} tested"
        f"{f', {not_run} not run yet' if not_run else ''}; "
        f"pass with fallback {len(passing)}/{len(tested)} ({pct(len(passing))}), native "
        f"{len(native)}/{len(tested)} ({pct(len(native))}); cases {cases['pass']} passed, "
        f"{cases['fail']} failed ({kinds or 'none'}), {cases['skip']} skipped; table: "
        f"{len(verdicts['xfail'])} expected failures, {len(verdicts['FAIL'])} unexpected, "
        f"{len(verdicts['XPASS'])} unexpected passes; {seconds / 60:.1f} min (worker time "
        f"{task_seconds / 60:.1f} min)"
    )
    return "\n".join(lines), not verdicts["FAIL"] and not verdicts["XPASS"]


def _failure_lines(outcomes, failures):
    lines = []
    for kind in sorted(failures):
        lines.append(f"{kind} ({len(failures[kind])} ops):")
        for op in sorted(failures[kind]):
            cases = [o for o in outcomes if o.op == op and o.kind == kind]
            where = ", ".join(f"{o.dtype}/{o.mode}" for o in cases)
            lines.append(f"  {op} [{where}]: {cases[0].detail[:200]}")
    return lines


def _table_lines(verdicts):
    lines = []
    if verdicts["XPASS"]:
        lines.append("passing, but listed in EXPECTED_FAILURES (remove the entries):")
        lines += [f"  {o.op} {o.dtype} {o.mode}" for o in verdicts["XPASS"]]
    if verdicts["FAIL"]:
        lines.append(f"failing and not listed in EXPECTED_FAILURES: {len(verdicts['FAIL'])} cases")
    return lines
