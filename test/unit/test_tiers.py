"""The slow tier (test/common/tiers.py): every test it names exists, `-m slow` runs exactly
the tier, and the default run deselects it, so a renamed test cannot leave it unnoticed."""

import re
import subprocess
import sys
from ..common import tiers
from .helpers import REPO


def _collect(*args) -> tuple[list[str], str]:
    """(collected node ids, pytest's summary line) of a collect-only run in the repository."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *args, "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    ids = [line for line in lines if "::" in line]  # a test's name may say "collected" too
    return ids, next(s for s in reversed(lines) if "collected" in s and "::" not in s)


def test_the_slow_tier_names_only_collected_tests_and_runs_alone_under_m_slow():
    slow_ids, summary = _collect("test", "-m", "slow")
    assert all(tiers.is_slow(nodeid) for nodeid in slow_ids)
    for entry in tiers.SLOW:
        assert sum(nodeid.endswith(entry) for nodeid in slow_ids) == 1, entry
    for prefix in tiers.SLOW_DYNAMIC:
        assert any(prefix in nodeid for nodeid in slow_ids), prefix
    selected, total = map(int, re.search(r"(\d+)/(\d+) tests collected", summary).groups())
    assert selected == len(slow_ids) < total


COLD_WARM = "test/unit/test_cold_warm.py"  # two tests in the tier, one not; quick to collect


def test_the_default_run_deselects_the_tier_and_with_slow_keeps_it():
    default_ids, summary = _collect(COLD_WARM)
    everything, _ = _collect(COLD_WARM, "--with-slow")
    slow = [nodeid for nodeid in everything if tiers.is_slow(nodeid)]
    assert slow and f"({len(slow)} deselected)" in summary
    assert default_ids and sorted(default_ids + slow) == sorted(everything)


def test_a_slow_test_named_by_its_id_runs():
    named = f"{COLD_WARM}::test_a_warm_run_that_computes_otherwise_fails"
    assert tiers.is_slow(named)
    assert _collect(named)[0] == [named]
