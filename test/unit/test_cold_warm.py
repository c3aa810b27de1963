"""The cold-against-warm test mode (`pytest --cold-warm`, test/common/cold_warm.py) passes a
test whose warm run computes what the cold one did, and fails one whose warm run differs."""

import json
import os
import subprocess
import sys

from dicp.bridge.debug.result_record import compare

from .helpers import REPO

SUBJECT = "test/unit/cold_warm_subject.py"


def cold_warm(warm_env=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    if warm_env:
        env["COLD_WARM_WARM_ENV"] = json.dumps(warm_env)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            SUBJECT,
            "--cold-warm",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_a_warm_run_equal_to_the_cold_one_passes():
    result = cold_warm()
    assert result.returncode == 0, result.stdout[-3000:]


def test_a_warm_run_that_computes_otherwise_fails():
    result = cold_warm({"DICP_INJECT_BUG_TESTING_ONLY": "aten.mul.Tensor:accuracy"})
    assert result.returncode == 1, result.stdout[-3000:]
    assert "the warm run computed something else than the cold run: call 0" in result.stdout


def test_compare_names_the_first_difference():
    call = {"kind": "forward", "outputs": ["a", "b"], "inputs": ["c"]}
    assert compare([call], [dict(call)]) is None
    assert (
        compare([call], [dict(call, outputs=["a", "x"])])
        == "call 0 (forward graph): output 1: b against x"
    )
    assert (
        compare([call], [dict(call, inputs=["z"])])
        == "call 0 (forward graph): input 0: c against z"
    )
    assert compare([call, call], [call]) == "2 compiled-graph calls against 1"
