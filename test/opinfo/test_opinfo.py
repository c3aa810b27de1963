"""The fast subset of the OpInfo conformance suite (fast.py), as pytest tests: one per
(op, mode), each compiling the op's samples with the backend and comparing with eager in
every dtype the mode tests. The full run is `python -m test.opinfo.run` (run.py).

A test fails on a case that fails and is not in EXPECTED_FAILURES, and on one that is listed
but passes (strict: the table may only shrink)."""

import pytest

from .cases import opinfo, tasks_for
from .check import OpCheck
from .fast import FAST_OPS
from .samples import FAST_SAMPLE_LIMITS
from .summary import table_verdict

FAST_TASKS = [task for name in FAST_OPS for task in tasks_for(name)]


@pytest.fixture(autouse=True)
def bounds_checked(monkeypatch):
    monkeypatch.setenv("DICP_BOUNDS_CHECK", "1")


@pytest.mark.parametrize("name, mode", FAST_TASKS, ids=[f"{n}-{m}" for n, m in FAST_TASKS])
def test_opinfo(name, mode, backend, dynamic, request):
    if dynamic is not None and dynamic != (mode == "dynamic"):
        pytest.skip(f"--dynamic {dynamic}")
    seed_base = request.config.getoption("--seed-base")
    outcomes = OpCheck(opinfo(name), mode, seed_base, backend, FAST_SAMPLE_LIMITS).run()
    problems = [_problem(o) for o in outcomes if table_verdict(o) in ("FAIL", "XPASS")]
    assert not problems, f"{name} ({mode}):\n" + "\n".join(problems)
    assert any(o.status != "skip" for o in outcomes), (
        f"{name} ({mode}): no sample was compared (every one was dropped): "
        f"{[o.detail for o in outcomes]}"
    )


def _problem(outcome):
    if outcome.status == "pass":
        return (
            f"  {outcome.dtype}: passes, but EXPECTED_FAILURES lists it: remove the entry "
            f"from test/opinfo/expectations.py"
        )
    return f"  {outcome.dtype}: {outcome.kind}: {outcome.detail}\n    at {outcome.sample}"
