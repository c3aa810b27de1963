"""python -m dicp.tools.bisect: real scripts in real subprocesses, with a fault injected into one
op's generated code (DICP_INJECT_BUG_TESTING_ONLY) as the bug to find."""

import os
import subprocess
import sys
import textwrap

import pytest
from test.common.shared_builds import share_runtime_builds

from dicp.tools.bisect import Bisector

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
    env = {k: v for k, v in os.environ.items() if not k.startswith("DICP_")}
    env.update(DICP_CACHE_DIR=str(share_runtime_builds(tmp_path / "cache")), **knobs)
    return env


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


@pytest.mark.parametrize("culprits", [{"c"}, {"a", "h"}, {"b", "c", "g"}, set("abcdefgh")])
def test_minimize_finds_exactly_the_needed_ops(culprits):
    """The halving search against an oracle that passes once every culprit falls back."""
    bisector = Bisector(["unused"], "exit", None, [])
    bisector.run = lambda fallback: subprocess.CompletedProcess(
        [], 0 if culprits <= set(fallback) else 1
    )
    assert bisector.minimize(set("abcdefgh")) == culprits
