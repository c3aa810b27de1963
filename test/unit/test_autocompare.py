"""DICP_AUTOCOMPARE and DICP_INJECT_BUG_TESTING_ONLY: a fault injected into one op's generated
code is found, named with its vendor op and source line, in forward, backward and inference
graphs, static and dynamic; clean graphs pass; the repro folder reproduces it."""

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from dicp.bridge.pipeline import utils
from dicp.bridge.debug.autocompare import AutocompareError
from dicp.bridge.cache.build import CompileError

from .helpers import cause_of, compiled, warm_cache  # noqa: F401

THIS_FILE = Path(__file__).resolve()


def line_of(marker: str) -> int:
    """The line of this file that carries `marker` in a comment."""
    lines = THIS_FILE.read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.endswith(f"# {marker}"))


def mlp(x, w):
    h = torch.tanh(x @ w)  # tanh-line
    return torch.softmax(h * 2 + 1, dim=-1)  # softmax-line


def sine(x):
    return torch.sin(x).sum()  # sin-line


def bump(x):
    x.add_(1)  # add-line
    return x * 2


def inputs(*shape, grad=False):
    torch.manual_seed(0)
    return torch.randn(*shape, requires_grad=grad)


def autocompare_error(fn, *args, dynamic=False, backward=False):
    with pytest.raises(Exception) as info:
        result = compiled(fn, dynamic=dynamic)(*args)
        if backward:
            result.backward()
    error = cause_of(info.value, AutocompareError)
    assert error is not None, repr(info.value)
    return error


@pytest.fixture(params=[False, True], ids=["static", "dynamic"])
def shapes(request):
    return request.param


@pytest.fixture
def raising(warm_cache, monkeypatch):
    monkeypatch.setenv("DICP_AUTOCOMPARE", "raise")
    return monkeypatch


def test_forward_fault_names_op_vendor_op_and_source_line(raising, shapes):
    raising.setenv("DICP_INJECT_BUG_TESTING_ONLY", "aten.tanh.default:accuracy")
    report = autocompare_error(mlp, inputs(4, 8), inputs(8, 6), dynamic=shapes).report
    culprit = report.culprit
    assert culprit.aten_op == "aten.tanh.default"
    assert culprit.vendor_ops == ["Tanh"]
    assert (Path(culprit.source.file).resolve(), culprit.source.line) == (
        THIS_FILE,
        line_of("tanh-line"),
    )
    assert culprit.output.startswith("float32[4, 6]")
    assert culprit.inputs[0].startswith("float32[4, 6]")
    difference = culprit.difference
    assert not difference.close and difference.max_diff >= 1.0
    assert (difference.rtol, difference.atol) == (1.3e-5, 1e-5)  # float32 row of the table
    text = str(report)
    for needle in (
        "aten.tanh.default",
        "Tanh",
        f"test_autocompare.py:{line_of('tanh-line')}",
        "max_diff",
        "MAE",
        "max relative error",
        "rtol 1.3e-05",
    ):
        assert needle in text, text
    assert report.kind in ("forward", "inference")


def test_a_fault_after_other_ops_is_still_the_first_divergence(raising):
    # softmax's inputs differ only through the injected add; softmax itself is fine
    raising.setenv("DICP_INJECT_BUG_TESTING_ONLY", "aten.add.Tensor:accuracy")
    culprit = autocompare_error(mlp, inputs(4, 8), inputs(8, 6)).report.culprit
    assert culprit.aten_op == "aten.add.Tensor"
    assert culprit.source.line == line_of("softmax-line")


def test_backward_fault_is_found_in_the_backward_graph(raising, shapes):
    raising.setenv("DICP_INJECT_BUG_TESTING_ONLY", "aten.cos.default:accuracy")  # d sin = cos
    report = autocompare_error(sine, inputs(5, 3, grad=True), dynamic=shapes, backward=True).report
    assert report.kind == "backward"
    assert report.culprit.aten_op == "aten.cos.default"
    assert report.culprit.source.line == line_of("sin-line")


def test_inference_graph(raising):
    raising.setenv("DICP_INJECT_BUG_TESTING_ONLY", "aten.add.Tensor:accuracy")
    with torch.no_grad():
        report = autocompare_error(bump, inputs(6)).report
    assert report.kind == "inference"
    assert report.culprit.aten_op == "aten.add.Tensor"
    assert report.culprit.source.line == line_of("add-line")


def test_inputs_the_graph_writes_are_compared_too(raising):
    # AOTAutograd can keep an input mutation in the graph as a copy_ epilogue; build one
    from torch.fx.experimental.proxy_tensor import make_fx

    from dicp.bridge.debug.autocompare import checked
    from dicp.bridge.pipeline.stages import GraphTransformer
    from dicp.api import get_backend

    def write_input(x):
        x.copy_(torch.tanh(x) * 3)
        return (x.sum(),)

    raising.setenv("DICP_INJECT_BUG_TESTING_ONLY", "aten.tanh.default:accuracy")
    gm = make_fx(
        torch.func.functionalize(write_input, remove="mutations_and_views"), tracing_mode="fake"
    )(inputs(5))
    transformer = GraphTransformer(gm, get_backend("new_backendgraph"), "inference")
    call = checked(transformer.build(), gm, transformer.ctx)
    x = inputs(5)
    with pytest.raises(AutocompareError) as info:
        call([x])
    assert any(label == "mutated input 0" for label, _ in info.value.report.outputs)
    assert info.value.report.culprit.aten_op == "aten.tanh.default"


def test_clean_graphs_pass_in_every_kind(raising, shapes):
    x, w = inputs(4, 8, grad=True), inputs(8, 6, grad=True)
    loss = compiled(mlp, dynamic=shapes)(x, w).sum()
    loss.backward()
    torch.testing.assert_close(loss, mlp(x.detach(), w.detach()).sum())
    with torch.no_grad():
        y = inputs(6)
        torch.testing.assert_close(compiled(bump, dynamic=shapes)(y.clone()), bump(y.clone()))


def test_log_mode_logs_once_and_returns_the_compiled_result(warm_cache, monkeypatch, caplog):
    monkeypatch.setenv("DICP_AUTOCOMPARE", "1")
    monkeypatch.setenv("DICP_INJECT_BUG_TESTING_ONLY", "aten.tanh.default:accuracy")
    monkeypatch.setattr(utils, "_logged_once", set())
    caplog.set_level(logging.WARNING, logger="dicp")
    x, w = inputs(4, 8), inputs(8, 6)
    fn = compiled(mlp)
    first, second = fn(x, w), fn(x, w)
    assert not torch.allclose(first, mlp(x, w))  # the fault is really in the result
    torch.testing.assert_close(first, second)
    reports = [r.getMessage() for r in caplog.records if "dicp autocompare" in r.getMessage()]
    assert len(reports) == 1 and "aten.tanh.default" in reports[0], reports


def test_compile_error_fault_shows_the_compiler_message(warm_cache, monkeypatch):
    monkeypatch.setenv("DICP_INJECT_BUG_TESTING_ONLY", "aten.tanh.*:compile_error")
    with pytest.raises(Exception) as info:
        compiled(mlp)(inputs(4, 8), inputs(8, 6))
    error = cause_of(info.value, CompileError)
    assert error is not None and "dicp_injected_compile_error_TESTING_ONLY" in str(error)


def test_runtime_error_fault_raises_naming_the_op(warm_cache, monkeypatch):
    monkeypatch.setenv("DICP_INJECT_BUG_TESTING_ONLY", "aten.tanh.*:runtime_error")
    with pytest.raises(RuntimeError, match="injected into aten.tanh.default"):
        compiled(mlp)(inputs(4, 8), inputs(8, 6))


def test_fault_spares_ops_on_eager_fallback(warm_cache, monkeypatch):
    monkeypatch.setenv("DICP_INJECT_BUG_TESTING_ONLY", "aten.tanh.*:accuracy")
    monkeypatch.setenv("DICP_FALLBACK_OPS", "aten.tanh.*")
    x, w = inputs(4, 8), inputs(8, 6)
    torch.testing.assert_close(compiled(mlp)(x, w), mlp(x, w))


def test_bad_fault_spec_is_a_clear_error(warm_cache, monkeypatch):
    monkeypatch.setenv("DICP_INJECT_BUG_TESTING_ONLY", "aten.tanh.default:wrong")
    with pytest.raises(Exception, match="accuracy|compile_error|runtime_error"):
        compiled(mlp)(inputs(4, 8), inputs(8, 6))


def test_repro_folder_reproduces_the_mismatch(warm_cache, monkeypatch, tmp_path):
    monkeypatch.setenv("DICP_AUTOCOMPARE", "1")
    monkeypatch.setenv("DICP_REPRO_DIR", str(tmp_path / "repros"))
    monkeypatch.setenv("DICP_INJECT_BUG_TESTING_ONLY", "aten.tanh.default:accuracy")
    compiled(mlp, dynamic=True)(inputs(4, 8), inputs(8, 6))
    folders = list((tmp_path / "repros").glob("*/run.py"))
    assert len(folders) == 1, folders
    run_py = folders[0]
    env = {k: v for k, v in os.environ.items() if k != "DICP_INJECT_BUG_TESTING_ONLY"}
    failing = subprocess.run(
        [sys.executable, str(run_py)], env=env, capture_output=True, text=True, timeout=300
    )
    assert failing.returncode == 1, failing.stderr[-3000:]
    assert "aten.tanh.default" in failing.stdout
    env["DICP_INJECT_BUG_TESTING_ONLY"] = ""  # the environment overrides the carried knob
    fixed = subprocess.run(
        [sys.executable, str(run_py)], env=env, capture_output=True, text=True, timeout=300
    )
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr[-3000:]
    assert "agrees with eager" in fixed.stdout
