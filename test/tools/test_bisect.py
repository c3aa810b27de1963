"""python -m dicp.tools.bisect: real scripts in real subprocesses, with a fault injected into one
op's generated code (DICP_INJECT_BUG_TESTING_ONLY) as the bug to find."""

import subprocess
import sys
import textwrap

import pytest
from test.common.shared_builds import child_environment

from dicp.tools.bisect import Bisector, search

SCRIPT = """
    import torch
    torch.manual_seed(0)

    def block(x, w):
        h = torch.sigmoid(x @ w) * 2
        return torch.tanh(h) + h

    x, w = torch.randn(4, 8), torch.randn(8, 8)
    out = torch.compile(block, backend="new_backendgraph")(x, w)
    {check}
"""
SELF_CHECK = "assert torch.allclose(out, block(x, w), atol=1e-4), 'wrong result'"


def write_script(tmp_path, check=""):
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(SCRIPT.format(check=check)))
    return path


def environment(tmp_path, **knobs):
    return child_environment(tmp_path / "cache", **knobs)


def bisect(tmp_path, script, *options, **knobs):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "dicp.tools.bisect",
            "--repro-dir",
            str(tmp_path / "repros"),
            *options,
            str(script),
        ],
        cwd=tmp_path,
        env=environment(tmp_path, **knobs),
        capture_output=True,
        text=True,
        timeout=1200,
    )
    return result


def test_autocompare_oracle_finds_the_faulty_op_and_writes_a_repro(tmp_path):
    fault = "aten.tanh.default:accuracy"
    result = bisect(tmp_path, write_script(tmp_path), DICP_INJECT_BUG_TESTING_ONLY=fault)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert "culprit: aten.tanh.default (" in result.stdout, result.stdout
    (run_py,) = (tmp_path / "repros").glob("*/run.py")
    assert f"repro: python {run_py}  (exits 1" in result.stdout, result.stdout
    # the repro carries the fault and the fallback of every other op; it runs on its own
    env = environment(tmp_path)
    failing = subprocess.run(
        [sys.executable, str(run_py)], env=env, capture_output=True, text=True, timeout=300
    )
    assert failing.returncode == 1 and "aten.tanh.default" in failing.stdout, failing.stdout
    env["DICP_INJECT_BUG_TESTING_ONLY"] = ""
    fixed = subprocess.run(
        [sys.executable, str(run_py)], env=env, capture_output=True, text=True, timeout=300
    )
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr[-3000:]


def test_exit_status_oracle_finds_an_op_that_breaks_the_build(tmp_path):
    script = write_script(tmp_path, SELF_CHECK)
    result = bisect(
        tmp_path,
        script,
        "--oracle",
        "exit",
        DICP_INJECT_BUG_TESTING_ONLY="aten.sigmoid.*:compile_error",
    )
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert "culprit: aten.sigmoid.default (" in result.stdout, result.stdout
    assert "no repro" in result.stdout


def test_a_passing_script_has_nothing_to_bisect(tmp_path):
    result = bisect(tmp_path, write_script(tmp_path, SELF_CHECK))
    assert result.returncode == 0 and "nothing to bisect" in result.stdout, result.stdout


def fake_bisector(culprits):
    """A Bisector whose script passes once every op of `culprits` is on fallback."""
    bisector = Bisector(["unused"], "exit", None, [])
    bisector.run = lambda fallback: subprocess.CompletedProcess(
        [], 0 if culprits <= set(fallback) else 1
    )
    return bisector


@pytest.mark.parametrize("culprits", [{"c"}, {"a", "h"}, {"b", "c", "g"}, set("abcdefgh")])
def test_minimize_finds_exactly_the_needed_ops(culprits):
    """The halving search against an oracle that passes once every culprit falls back."""
    assert fake_bisector(culprits).minimize(set("abcdefgh")) == culprits


def runs_of_search(culprits, suspects):
    bisector = fake_bisector(culprits)
    assert search(bisector, set("abcdefgh"), frozenset(suspects)) == culprits
    return len(bisector.verdicts)  # each fallback set runs once


@pytest.mark.parametrize("culprits, runs", [({"c"}, 1), (set("ab"), 3)])
def test_search_starts_from_the_culprits_autocompare_named(culprits, runs):
    """All named on fallback, then each needed one kept (none for a single op)."""
    assert runs_of_search(culprits, suspects=culprits) == runs
    assert runs_of_search(culprits, suspects=()) > runs + 1


@pytest.mark.parametrize("culprits, wrong_guess", [({"c"}, {"f"}), ({"a", "h"}, {"a"})])
def test_search_after_a_wrong_guess_costs_at_most_one_run_more(culprits, wrong_guess):
    assert runs_of_search(culprits, wrong_guess) <= runs_of_search(culprits, ()) + 1


def test_search_says_when_no_fallback_helps():
    assert search(fake_bisector({"z"}), set("abcdefgh"), frozenset({"a"})) is None
