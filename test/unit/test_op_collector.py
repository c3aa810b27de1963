"""dicp.tools.op_collector: which ATen ops a function produces, which would fall back, no C++ built.

Every test points DICP_CACHE_DIR at an empty tmp dir and checks afterwards that nothing was built.
"""

import os
import re
import subprocess
import sys

import pytest
import torch

from dicp.bridge.cache.build import cache_stats
from dicp.tools.op_collector import OpReport, collect_ops, main
from dicp.api import get_backend

aten = torch.ops.aten
BACKEND = "new_backendgraph"
SUMMARY = re.compile(
    r"^(\d+) ops, (\d+) nodes, (\d+) nodes \((\d+\.\d)%\) would fall back to "
    r"eager$",
    re.MULTILINE,
)


@pytest.fixture(autouse=True)
def empty_cache_dir(tmp_path, monkeypatch):
    """An empty build cache that must stay without libraries; the build counter must not move."""
    cache = tmp_path / "dicp-cache"
    cache.mkdir()
    monkeypatch.setenv("DICP_CACHE_DIR", str(cache))
    builds = cache_stats()["builds"]
    yield cache
    assert cache_stats()["builds"] == builds
    assert not list(cache.rglob("*.so"))


def small_model():
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16))


def lgamma_times_two(x):
    return torch.lgamma(x) * 2


def relu_plus_one(x):
    return torch.relu(x) + 1


def flatten_sum_scaled(x):
    return x.reshape(-1, x.shape[-1] // 2).sum(0) * x.numel()


def record(report: OpReport, op: str, graph: str):
    records = report.find(op, graph)
    assert len(records) == 1, f"{op} in {graph}: {records}\n{report.format()}"
    return records[0]


def test_training_model_records_forward_and_backward_ops():
    report = collect_ops(small_model(), (torch.randn(4, 8),), BACKEND)
    assert {r.graph for r in report.ops} == {"forward", "backward"}
    assert record(report, "aten.addmm.default", "forward").converted
    assert record(report, "aten.addmm.default", "forward").count == 1
    backward_mm = record(report, "aten.mm.default", "backward")  # the weight's grad only:
    assert backward_mm.converted and backward_mm.count == 1  # the input needs none
    assert report.fallback_share == 0.0


@pytest.mark.parametrize(
    "training, kinds",
    [
        (None, {"forward", "backward"}),  # the parameters require grad
        (False, {"inference"}),
    ],
)
def test_training_default_follows_requires_grad(training, kinds):
    report = collect_ops(small_model(), (torch.randn(4, 8),), BACKEND, training=training)
    assert {r.graph for r in report.ops} == kinds


def test_frozen_model_records_inference_by_default():
    model = small_model().requires_grad_(False)
    report = collect_ops(model, (torch.randn(4, 8),), BACKEND)
    assert {r.graph for r in report.ops} == {"inference"}


def test_unconverted_op_falls_back():
    backend = get_backend(BACKEND)
    # Precondition: lgamma reaches the graph (no decomposition) and has no converter.
    assert aten.lgamma.default not in backend.conversions
    table = backend.decompositions
    assert aten.lgamma.default not in (table() if callable(table) else table)
    report = collect_ops(lgamma_times_two, (torch.rand(3, 5) + 0.5,), BACKEND)
    assert not record(report, "aten.lgamma.default", "inference").converted
    assert record(report, "aten.mul.Tensor", "inference").converted
    assert (report.node_count, report.fallback_count) == (2, 1)
    assert report.fallback_share == pytest.approx(50.0)
    assert [r.op for r in report.fallback_ops] == ["aten.lgamma.default"]


def test_converted_ops_only_have_no_fallback():
    report = collect_ops(relu_plus_one, (torch.randn(3, 5),), BACKEND)
    assert report.node_count == 2
    assert report.fallback_count == 0 and report.fallback_share == 0.0


def test_forced_fallback_counts_as_not_converted(monkeypatch):
    monkeypatch.setenv("DICP_FALLBACK_OPS", "aten.relu*")
    report = collect_ops(relu_plus_one, (torch.randn(3, 5),), BACKEND)
    assert not record(report, "aten.relu.default", "inference").converted
    assert report.fallback_share == pytest.approx(50.0)


def test_size_arithmetic_is_not_counted():
    # With dynamic shapes and training, this forward graph calls aten.sym_size.int.
    x = torch.randn(4, 6, requires_grad=True)
    report = collect_ops(flatten_sum_scaled, (x,), BACKEND, dynamic=True)
    assert report.find("aten.sym_size.int") == []
    assert record(report, "aten.sum.dim_IntList", "forward").converted


def test_format_has_a_row_per_record_and_the_summary():
    report = collect_ops(lgamma_times_two, (torch.rand(3, 5) + 0.5,), BACKEND)
    text = report.format()
    assert re.search(
        r"^aten\.lgamma\.default +\| inference \| +1 \| no +\| no converter$", text, re.MULTILINE
    )
    assert re.search(r"^aten\.mul\.Tensor +\| inference \| +1 \| yes$", text, re.MULTILINE)
    assert SUMMARY.search(text).groups() == ("2", "2", "1", "50.0")


def test_repeated_collections_keep_recording():
    # Builtins share one dynamo frame cache; past its recompile limit nothing would be captured.
    for _ in range(12):
        report = collect_ops(torch.nn.functional.gelu, (torch.randn(2, 3),), BACKEND)
        assert report.node_count > 0


def test_training_without_differentiable_output_is_an_error():
    with pytest.raises(ValueError, match="requires_grad"):
        collect_ops(relu_plus_one, (torch.randn(3),), BACKEND, training=True)


def test_cli_without_shape_needs_a_factory(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["torch:lgamma"])
    assert exit_info.value.code == 2
    assert "no --shape" in capsys.readouterr().err


def run_cli(cache, *args):
    env = dict(os.environ, DICP_CACHE_DIR=str(cache))
    proc = subprocess.run(
        [sys.executable, "-m", "dicp.tools.op_collector", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_cli_demo_prints_table_and_summary(empty_cache_dir):
    out = run_cli(empty_cache_dir, "--demo")
    assert re.search(r"^aten\.addmm\.default +\| forward +\| +2 \| yes$", out, re.MULTILINE)
    assert re.search(r"^aten\.mm\.default +\| backward +\| +\d+ \| yes$", out, re.MULTILINE)
    assert SUMMARY.search(out.splitlines()[-1])
    assert not list(empty_cache_dir.rglob("*"))


def test_cli_shape_mode_reports_fallback(empty_cache_dir):
    out = run_cli(empty_cache_dir, "torch:lgamma", "--shape", "4,8", "--training")
    no_converter = r" +\| +1 \| no +\| no converter$"
    assert re.search(r"^aten\.lgamma\.default +\| forward" + no_converter, out, re.MULTILINE)
    assert re.search(r"^aten\.digamma\.default +\| backward" + no_converter, out, re.MULTILINE)
    assert SUMMARY.search(out).group(3) == "2"


def complex_mul(x):
    return x * 2


def test_fallback_for_a_dtype_is_reported_with_its_reason():
    """aten.mul has a converter, but not for complex64: the converters are asked with the real
    dtypes, so the report says it falls back, and why."""
    report = collect_ops(complex_mul, (torch.randn(3, 4, dtype=torch.complex64),), BACKEND)
    (record,) = report.find("aten.mul.Tensor")
    assert not record.converted
    assert "complex64" in record.reason, record.reason
