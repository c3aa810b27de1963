"""test/scripts/upstream_ops.py, the runner of DICP's own op tests, and the harness options it
relies on, run as users run them: in a subprocess, on a scratch folder laid out as DICP's.

- `--allow-fallback` lets an op test pass with eager fallback (measuring a backend's coverage),
  and every fallback a test took is in its junit report, declared or not.
- The runner checks the scratch copy against its manifest, runs each shape mode, runs every
  failure again with a reference backend and tells the failures every backend shares from the
  backend's own; only the latter fail the run.
"""

import hashlib
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree

import pytest

from ..common.shared_builds import share_runtime_builds
from .helpers import KNOBS, REPO
from .test_op_harness import DICP_CONFTEST, DICP_OP_TEST, pytest_run, test_tree  # noqa: F401

# Fails for every backend on the CPU, as DICP's test_inplace_copy.py: the eager call updates its
# input in place, and `.to("cpu")` of a CPU tensor is that same tensor.
sys.path.insert(0, str(REPO / "test" / "scripts"))
try:
    import upstream_ops
finally:
    sys.path.pop(0)

ALIASED_INPUT_TEST = """
import torch
from ..common.utils import compile_model, dynamo, get_device, parse_args


class OpModule(torch.nn.Module):
    def forward(self, a):
        a.add_(1.0)
        return a * 2.0


model = OpModule()
args = parse_args()


def test_aliased_input():
    input1 = torch.ones(3)
    dicp_input1 = input1.to(get_device())
    output = model(input1)
    dynamo.reset()
    dicp_output = compile_model(model, args.backend, args.dynamic)[0].model(dicp_input1)
    assert torch.equal(output, dicp_output)
"""


def junit_fallbacks(junit):
    return sorted(
        p.get("value")
        for p in ElementTree.parse(junit).iter("property")
        if p.get("name") == "eager_fallback"
    )


def test_allow_fallback_passes_op_tests_and_reports_each_fallback(test_tree, tmp_path):
    shutil.copy(REPO / "test" / "op" / "test_view_as_real.py", test_tree / "op")
    junit = tmp_path / "report.xml"
    status, output = pytest_run(
        [
            "test/dicp_op",
            "test/op/test_view_as_real.py",
            "--rootdir",
            ".",
            "-k",
            "mul or float32",
            "--dynamic",
            "false",
            "--allow-fallback",
            "-o",
            "junit_family=xunit1",
            f"--junitxml={junit}",
        ],
        test_tree.parent,
        share_runtime_builds(tmp_path / "cache"),
        DICP_FALLBACK_OPS="aten.mul.*",
        DICP_STRICT="1",
    )
    assert status == 0 and "4 passed" in output, output[-3000:]
    # view_as_real's fallback is one new_backendgraph declares (complex input)
    assert junit_fallbacks(junit) == (
        ["aten.mul.Tensor (forced by DICP_FALLBACK_OPS)"] * 2
        + ["aten.view_as_real.default (no converter; declared)"] * 2
    ), junit_fallbacks(junit)


@pytest.fixture
def upstream_root(tmp_path):
    """A scratch root as the runner expects it: src/op/ with DICP's conftest and two tests,
    and the manifest of those files."""
    files = {
        "op/conftest.py": DICP_CONFTEST,
        "op/test_mul.py": DICP_OP_TEST,
        "op/test_aliased_input.py": ALIASED_INPUT_TEST,
    }
    rows = []
    for path, text in files.items():
        file = tmp_path / "src" / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(text)
        digest = hashlib.sha256(file.read_bytes()).hexdigest()
        rows.append(f"{path}\tlocal\t{len(text)}\t{digest}")
    (tmp_path / "manifest.tsv").write_text("# test files\n" + "\n".join(rows) + "\n")
    return tmp_path


def run_upstream(root, *args, **env):
    full_env = {k: v for k, v in os.environ.items() if k not in KNOBS}
    full_env.update(DICP_CACHE_DIR=str(share_runtime_builds(root / "cache")), **env)
    command = [
        sys.executable,
        str(REPO / "test" / "scripts" / "upstream_ops.py"),
        "--root",
        str(root),
        "--manifest",
        str(root / "manifest.tsv"),
        *args,
    ]
    result = subprocess.run(command, env=full_env, capture_output=True, text=True, timeout=600)
    return result.returncode, result.stdout + result.stderr


def test_runner_tells_failures_every_backend_shares_from_its_own(upstream_root):
    status, output = run_upstream(
        upstream_root,
        "--dynamic",
        "false",
        "--reference",
        "aot_eager",
        DICP_FALLBACK_OPS="aten.mul.*",
    )
    # test_mul falls back on mul (forced): new_backendgraph's own failure, aot_eager passes it
    assert (
        "upstream ops new_backendgraph dynamic=false: 3 tests, 0 passed (0 with eager "
        "fallback), 3 failed, 0 skipped; 1 also fail with aot_eager, 2 do not"
    ) in output, output[-3000:]
    assert status == 1, output[-3000:]
    assert (
        "| test_aliased_input.py | 1 | 0 | 1 | 0 | 1x assert False [also aot_eager] |" in output
    ), output[-3000:]
    report = (upstream_root / "results" / "new_backendgraph-report.md").read_text()
    assert "ran aten.mul.Tensor (forced by DICP_FALLBACK_OPS) as eager fallback" in report


def test_only_failures_the_reference_does_not_share_fail_the_run():
    shared = dict(outcome="failed", shared=True)
    assert not upstream_ops.own_failures({"false": [dict(outcome="passed"), shared]})
    assert upstream_ops.own_failures({"true": [shared, dict(outcome="error", shared=False)]})
    assert upstream_ops.own_failures({"true": [dict(outcome="failed")]})  # no reference run


def test_runner_refuses_sources_that_differ_from_the_manifest(upstream_root):
    (upstream_root / "src" / "op" / "test_mul.py").write_text("# edited\n")
    status, output = run_upstream(upstream_root, "--dynamic", "false")
    assert status != 0 and "test_mul.py differs from the manifest" in output, output[-3000:]
