"""The test harness itself, run as users run it: pytest in a subprocess.

- An op test passes only when its op runs natively: forcing fallback (DICP_FALLBACK_OPS='*') or
  deleting its converter makes test_add fail, even with DICP_STRICT=0 in the environment.
- DICP's op folders run unchanged: a folder whose conftest.py does `from ..common.conftest
  import pytest_addoption, backend, dynamic` runs on its own and next to ours.
- Inputs are seeded per test: a test draws the same numbers whatever else runs, --seed-base
  changes them, and a failure report names the seed.
- The run scripts fail when pytest collects no test (exit code 5).
- new_backendgraph's op lists name every op test file (it runs them all natively): a new test
  missing from them would never run under `run_test_ops.sh new_backendgraph`.
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from ..common.shared_builds import share_runtime_builds
from .helpers import KNOBS, REPO

OP_TEST = "op/test_add.py"
STATIC_FLOAT32 = ["-k", "static and float32"]


def pytest_run(args, cwd, cache_dir, **env):
    """`python -m pytest ARGS` in a fresh interpreter, with every DICP knob at its default."""
    full_env = {k: v for k, v in os.environ.items() if k not in KNOBS}
    full_env.update(DICP_CACHE_DIR=str(cache_dir), **env)
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args]
    result = subprocess.run(
        command, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=600
    )
    return result.returncode, result.stdout + result.stderr


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return share_runtime_builds(tmp_path_factory.mktemp("dicp-cache"))


# ---- native op tests ---------------------------------------------------------------------


def run_op_test(cache_dir, *extra, **env):
    return pytest_run([OP_TEST, *STATIC_FLOAT32, *extra], REPO / "test", cache_dir, **env)


def test_op_tests_pass_when_their_ops_run_natively_or_as_declared(cache_dir):
    # view_as_real runs as eager fallback, which new_backendgraph declares (complex input)
    status, output = run_op_test(cache_dir, "op/test_view_as_real.py")
    assert status == 0 and "4 passed" in output, output[-3000:]


def test_forced_fallback_fails_the_op_test(cache_dir):
    status, output = run_op_test(cache_dir, DICP_FALLBACK_OPS="*", DICP_STRICT="0")
    assert status == 1 and "2 failed" in output, output[-3000:]
    assert "ran aten.add.Scalar (forced by DICP_FALLBACK_OPS), aten.add.Tensor" in output, output[
        -3000:
    ]
    assert "does not declare it in Backend.expected_fallbacks" in output, output[-3000:]


DROP_CONVERTER = """
import torch
from dicp.vendor.new_backendGraph.conversion import CONVERSIONS


def pytest_configure(config):
    # as if aten.add's row were deleted from the conversion table
    del CONVERSIONS[torch.ops.aten.add.Tensor]
"""


def test_deleted_converter_fails_the_op_test(cache_dir, tmp_path):
    (tmp_path / "drop_add_converter.py").write_text(DROP_CONVERTER)
    status, output = run_op_test(
        cache_dir, "-p", "drop_add_converter", DICP_STRICT="0", PYTHONPATH=str(tmp_path)
    )
    assert status == 1 and "2 failed" in output, output[-3000:]
    assert "aten.add.Tensor is not supported (no converter)" in output, output[-3000:]


# ---- a DICP op folder, on its own and next to ours -----------------------------------------

DICP_CONFTEST = "from ..common.conftest import pytest_addoption, backend, dynamic  # noqa\n"

DICP_OP_TEST = """
import pytest
from ..common.utils import (torch, dynamo, parse_args, compile_model, get_device, Size,
                            update_dynamo_config)


class OpModule(torch.nn.Module):
    def forward(self, a, b):
        return torch.ops.aten.mul.Tensor(a, b)


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestMul():
    @pytest.mark.parametrize("dtype", [torch.float32])
    @pytest.mark.parametrize("sizes", [Size((5,), (5, 3)), Size((3, 5), (5, 3))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_mul(self, sizes, dtype, compiled_model, backend, dynamic):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        input1 = torch.randn(size, dtype=dtype)
        input2 = torch.randn(size, dtype=dtype)
        output = model(input1, input2)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1.to(device), input2.to(device))
        assert torch.allclose(output, dicp_output.cpu(), equal_nan=True)
"""

SEED_TEST = """
import json
import os
import random

import pytest
import torch


@pytest.mark.parametrize("case", ["a", "b"])
def test_draw(case, seed):
    with open(os.environ["DRAWS"], "a") as out:
        out.write(json.dumps([case, seed, torch.rand(3).tolist(), random.random()]) + "\\n")
"""


@pytest.fixture
def test_tree(tmp_path):
    """tmp/test: our harness (conftest.py, common/, op/ with one op test) beside a DICP op
    folder (dicp_op/) and a folder of seed probes (seeds/)."""
    source, tree = REPO / "test", tmp_path / "test"
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(source / "common", tree / "common", ignore=ignore)
    for name in ("__init__.py", "conftest.py"):
        shutil.copy(source / name, tree / name)
    (tree / "op").mkdir()
    for name in ("__init__.py", "conftest.py", "test_abs.py"):
        shutil.copy(source / "op" / name, tree / "op" / name)
    write_package(tree / "dicp_op", {"conftest.py": DICP_CONFTEST, "test_mul.py": DICP_OP_TEST})
    write_package(tree / "seeds", {"test_draws.py": SEED_TEST})
    return tree


def write_package(folder, files):
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    for name, text in files.items():
        (folder / name).write_text(textwrap.dedent(text))


def test_dicp_op_folder_runs_on_its_own(test_tree, cache_dir):
    # --confcutdir keeps pytest from loading test/conftest.py: only the DICP conftest registers
    status, output = pytest_run(
        ["test/dicp_op", "--confcutdir", "test/dicp_op", "--dynamic", "all"],
        test_tree.parent,
        cache_dir,
    )
    assert status == 0 and "4 passed" in output, output[-3000:]


def test_dicp_op_folder_runs_next_to_ours(test_tree, cache_dir):
    # test/conftest.py and dicp_op/conftest.py both define pytest_addoption: no duplicate option
    status, output = pytest_run(
        [
            "test/dicp_op",
            "test/op",
            "--rootdir",
            ".",
            "-k",
            "static and float32 or mul",
            "--dynamic",
            "all",
        ],
        test_tree.parent,
        cache_dir,
    )
    assert status == 0 and "6 passed" in output, output[-3000:]


def test_dicp_op_folder_is_held_to_native_ops(test_tree, cache_dir):
    status, output = pytest_run(
        ["test/dicp_op", "--confcutdir", "test/dicp_op"],
        test_tree.parent,
        cache_dir,
        DICP_FALLBACK_OPS="aten.mul.*",
    )
    assert status == 1 and "4 failed" in output, output[-3000:]
    assert "ran aten.mul.Tensor (forced by DICP_FALLBACK_OPS)" in output, output[-3000:]


# ---- seeds ---------------------------------------------------------------------------------


def draws(test_tree, cache_dir, tmp_path, *args, expect_status=0):
    out = tmp_path / f"draws-{len(list(tmp_path.glob('draws-*')))}.jsonl"
    status, output = pytest_run(
        ["--rootdir", ".", *args], test_tree.parent, cache_dir, DRAWS=str(out)
    )
    assert status == expect_status, output[-3000:]
    draws = {
        case: (seed, values, number)
        for case, seed, values, number in map(json.loads, out.read_text().splitlines())
    }
    return draws, output


def test_inputs_are_seeded_per_test(test_tree, cache_dir, tmp_path):
    both, _ = draws(test_tree, cache_dir, tmp_path, "test/seeds/test_draws.py")
    assert both["a"] != both["b"]
    # the same test draws the same numbers alone as after another test
    alone, _ = draws(test_tree, cache_dir, tmp_path, "test/seeds/test_draws.py", "-k", "b")
    assert alone["b"] == both["b"]
    # another base draws other numbers, and a failure report names its seed
    (test_tree / "seeds" / "test_fails.py").write_text("def test_fails():\n    assert False\n")
    rebased, output = draws(
        test_tree, cache_dir, tmp_path, "test/seeds", "--seed-base", "7", expect_status=1
    )
    assert all(rebased[case] != both[case] for case in both), "--seed-base changed nothing"
    assert "inputs drawn with seed" in output and "--seed-base 7" in output, output[-3000:]


# ---- run scripts ---------------------------------------------------------------------------


@pytest.mark.parametrize("suite", ["run_test_ops.sh", "run_test_models.sh"])
def test_run_script_fails_when_no_test_is_collected(suite, test_tree, cache_dir):
    (test_tree / "model").mkdir()
    env = {k: v for k, v in os.environ.items() if k not in KNOBS}
    env.update(DICP_CACHE_DIR=str(cache_dir), PYTHON=sys.executable, TEST_DIR=str(test_tree))
    script = REPO / "test" / "scripts" / suite
    # a backend without ini files: the script runs the whole op/ or model/ folder
    result = subprocess.run(
        ["bash", str(script), "aot_eager", "false", "-k", "no_test_has_this_name"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 5, result.stdout + result.stderr
    assert "no tests collected" in result.stderr


def test_ci_runs_the_readme_test_command():
    readme = (REPO / "README.md").read_text()
    quick_start = readme.split("## Quick start", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    commands = quick_start.strip().splitlines()
    assert len(commands) == 2, commands
    ci = (REPO / ".ci" / "run").read_text()
    ci_lines = [
        line
        for line in ci.splitlines()
        if line and not line.startswith(("#", "set ", "cd ", "status="))
    ]
    # CI runs the README's test command first, as written; its failure fails CI
    assert ci_lines[0] in (commands[1], f"{commands[1]} || status=$?"), (ci_lines, commands[1])
    assert ci_lines[0] == commands[1] or ci_lines[-1] == "exit $status", ci_lines


def test_flakiness_script_reads_counts_and_failures_per_mode():
    sys.path.insert(0, str(REPO / "test" / "scripts"))
    try:
        from find_flaky import summarize
    finally:
        sys.path.pop(0)
    lines = [
        "== new_backendgraph ops, dynamic=false (static.ini) ==",
        "FAILED op/test_a.py::TestA::test_a[static-sizes0-float32] - AssertionError: x",
        "1 failed, 583 passed in 259.01s (0:04:19)",
        "== new_backendgraph ops, dynamic=true (dynamic.ini) ==",
        "ERROR op/test_b.py::TestB::test_b[dynamic-sizes1-float16]",
        "===== 1 error, 583 passed, 2 warnings in 300.5s =====",
    ]
    counts, failures = summarize(lines)
    assert counts == {
        "static": "1 failed, 583 passed",
        "dynamic": "1 error, 583 passed, 2 warnings",
    }
    assert failures == [
        ("static", "op/test_a.py::TestA::test_a[static-sizes0-float32]"),
        ("dynamic", "op/test_b.py::TestB::test_b[dynamic-sizes1-float16]"),
    ]


@pytest.mark.parametrize("mode", ["static", "dynamic"])
def test_new_backendgraph_op_lists_name_every_op_test(mode):
    files = {f"op/{path.name}" for path in (REPO / "test" / "op").glob("test_*.py")}
    ini = REPO / "test" / "scripts" / "new_backendgraph" / "ops" / f"{mode}.ini"
    listed = {
        line.strip() for line in ini.read_text().splitlines() if line.strip().startswith("op/test_")
    }
    assert files - listed == set(), f"{ini.name} misses op tests"
    assert listed - files == set(), f"{ini.name} names op tests that do not exist"
