"""DIPU's knobs on eager device ops, under the names and syntax of dicp's compiler knobs."""

import logging
import re

import pytest
import torch

from dicp.emu import EagerAutocompareError, debug, eager, observe_ops

from .conftest import run_python


@pytest.fixture
def operands():
    x = torch.arange(1.0, 13.0).reshape(3, 4)
    return x, x.to("emu"), (x * 0.5).to("emu")


def test_forced_fallback_moves_a_native_op_to_the_cpu(operands, monkeypatch, caplog):
    _, a, b = operands
    with observe_ops() as native:
        on_device = a * b
    monkeypatch.setenv("DICP_FALLBACK_OPS", "aten.mul.*,aten.gelu.default")
    monkeypatch.setattr(eager, "_logged", set())
    with observe_ops() as forced, caplog.at_level(logging.WARNING, logger="dicp.emu"):
        on_host = a * b
    assert native["aten.mul.Tensor", "native"] == 1 and not native["aten.mul.Tensor", "fallback"]
    assert forced["aten.mul.Tensor", "fallback"] == 1 and not forced["aten.mul.Tensor", "native"]
    assert torch.equal(on_device.cpu(), on_host.cpu()) and on_host.device.type == "emu"
    assert any(
        "aten.mul.Tensor runs on the CPU (forced by DICP_FALLBACK_OPS)" in r.getMessage()
        and r.levelno == logging.WARNING
        for r in caplog.records
    )


def test_keep_torch_default_drops_the_device_kernel_of_an_op():
    """`full` is native; kept at torch's default it is torch's decomposition, empty + fill_.
    The knob is read at the import, so the kept run is a process of its own."""
    with observe_ops() as seen:
        x = torch.full((2, 3), 7.0, device="emu")
    assert sorted(op for op, _ in seen) == ["aten.full.default"] and x.cpu().sum() == 42.0
    kept = run_python(
        """
        import torch, dicp.emu
        with dicp.emu.observe_ops() as seen:
            x = torch.full((2, 3), 7.0, device="emu")
        print(sorted(op for op, path in seen), x.cpu().sum().item())
    """,
        DICP_KEEP_TORCH_DEFAULT="aten.full.default",
    )
    assert kept.returncode == 0, kept.stderr[-2000:]
    assert "['aten.fill_.Scalar'] 42.0" in kept.stdout


def test_an_injected_fault_goes_unnoticed_without_autocompare(operands, monkeypatch):
    x, a, b = operands
    monkeypatch.setenv("DICP_INJECT_BUG_TESTING_ONLY", "aten.mul.Tensor:accuracy")
    got = (a * b).cpu()
    assert got[0, 0] == x[0, 0] * x[0, 0] * 0.5 + 1  # wrong, and nothing said so
    assert torch.equal(got.flatten()[1:], (x * x * 0.5).flatten()[1:])


def test_autocompare_names_a_wrong_native_op(operands, monkeypatch):
    _, a, b = operands
    monkeypatch.setenv("DICP_INJECT_BUG_TESTING_ONLY", "aten.mul.Tensor:accuracy")
    monkeypatch.setenv("DICP_AUTOCOMPARE", "raise")
    with pytest.raises(EagerAutocompareError) as error:
        a * b
    report = str(error.value)
    assert "emu op aten.mul.Tensor differs from the CPU" in report
    assert "first disagreeing element [0, 0]: emu 1.5, CPU 0.5" in report


def test_autocompare_logs_the_first_mismatch_of_an_op(operands, monkeypatch, caplog):
    _, a, b = operands
    monkeypatch.setattr(debug, "_reported", set())
    monkeypatch.setenv("DICP_INJECT_BUG_TESTING_ONLY", "aten.add.Tensor:accuracy")
    monkeypatch.setenv("DICP_AUTOCOMPARE", "1")
    with caplog.at_level(logging.WARNING, logger="dicp.emu"):
        a + b
        a + b
    reports = [r.getMessage() for r in caplog.records if "autocompare" in r.getMessage()]
    assert len(reports) == 1 and "aten.add.Tensor" in reports[0]


def test_autocompare_passes_right_ops(operands, monkeypatch):
    x, a, b = operands
    monkeypatch.setenv("DICP_AUTOCOMPARE", "raise")
    results = [(a * b).sum(1), torch.relu(a - 6), torch.mm(a, b.t()), torch.exp(b)]
    expected = [(x * x * 0.5).sum(1), torch.relu(x - 6), x @ (x * 0.5).t(), torch.exp(x * 0.5)]
    for got, want in zip(results, expected):
        assert torch.allclose(got.cpu(), want)


def test_an_injected_runtime_error_names_the_op(operands, monkeypatch):
    _, a, b = operands
    monkeypatch.setenv("DICP_INJECT_BUG_TESTING_ONLY", "aten.mul.*:runtime_error")
    with pytest.raises(RuntimeError, match="runtime error injected into aten.mul.Tensor"):
        a * b


def dump_of(monkeypatch, tmp_path, level):
    path = tmp_path / f"dump{level}.txt"
    monkeypatch.setenv("DICP_DUMP_OP_ARGS", str(level))
    monkeypatch.setenv("DICP_DUMP_OP_ARGS_FILE", str(path))
    x = torch.arange(6.0, device="emu").reshape(2, 3)
    torch.atan(x * 2)
    monkeypatch.delenv("DICP_DUMP_OP_ARGS")
    return path.read_text()


def test_dump_level_1_names_each_op_its_path_and_device(monkeypatch, tmp_path):
    text = dump_of(monkeypatch, tmp_path, 1)
    assert "dicp emu op-args: aten.mul.Tensor [native] emu:0" in text
    assert "dicp emu op-args: aten.atan.default [fallback] emu:0" in text
    assert "float32" not in text


def test_dump_level_2_adds_shapes_dtypes_and_devices(monkeypatch, tmp_path):
    text = dump_of(monkeypatch, tmp_path, 2)
    assert re.search(
        r"aten\.mul\.Tensor \[native\] emu:0\n  in: float32\[2, 3\] strides "
        r"\[3, 1\] emu:0, int64\[\] strides \[\] cpu\n  out: float32\[2, 3\] "
        r"strides \[3, 1\] emu:0",
        text,
    )  # x * 2: the 2 is a host scalar tensor
    assert "min" not in text


def test_dump_level_3_adds_value_summaries(monkeypatch, tmp_path):
    text = dump_of(monkeypatch, tmp_path, 3)
    assert "in0: float32[2, 3] emu:0 min 0 max 5 mean 2.5 nan 0 inf 0" in text
    assert "out0: float32[2, 3] emu:0 min 0 max 10 mean 5 nan 0 inf 0" in text


def test_knob_syntax_errors_name_the_variable(operands, monkeypatch):
    _, a, b = operands
    monkeypatch.setenv("DICP_INJECT_BUG_TESTING_ONLY", "aten.mul.Tensor:wrong")
    with pytest.raises(Exception, match="DICP_INJECT_BUG_TESTING_ONLY"):
        a * b
