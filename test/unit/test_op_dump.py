"""DICP_DUMP_OP_ARGS=1|2|3: op names, then shapes/dtypes/strides, then value summaries, checked
against the same ops run eagerly."""

import logging
import re

import pytest
import torch

from .helpers import compiled, warm_cache  # noqa: F401


def net(x, w):
    h = torch.tanh(x @ w)  # tanh-line
    return torch.log(h) + 1 / (h - h)


def inputs():
    torch.manual_seed(0)
    return torch.randn(4, 8), torch.randn(8, 6)


@pytest.fixture
def dump_file(warm_cache, monkeypatch, tmp_path):
    path = tmp_path / "ops.txt"
    monkeypatch.setenv("DICP_DUMP_OP_ARGS_FILE", str(path))
    return path


def dump_lines(path):
    return path.read_text().splitlines()


def op_line(lines, op):
    return next(i for i, line in enumerate(lines) if re.match(rf"\s+#\d+ {re.escape(op)} ", line))


def test_level_1_names_each_op_with_its_vendor_ops_before_the_graph_runs(dump_file, monkeypatch):
    monkeypatch.setenv("DICP_DUMP_OP_ARGS", "1")
    monkeypatch.setenv("DICP_INJECT_BUG_TESTING_ONLY", "aten.log.default:runtime_error")
    with pytest.raises(RuntimeError, match="injected"):
        compiled(net)(*inputs())
    lines = dump_lines(dump_file)  # written although the graph raised
    assert lines[0].startswith("dicp op-args: graph new_backendgraph_inference_")
    assert lines[0].endswith("call 0")
    ops = [line.split()[1] for line in lines[1:]]
    assert [line.split()[0] for line in lines[1:]] == [f"#{i}" for i in range(len(ops))]
    order = [
        ops.index(op)
        for op in (
            "aten.mm.default",
            "aten.tanh.default",
            "aten.log.default",
            "aten.sub.Tensor",
            "aten.reciprocal.default",
        )
    ]
    assert order == sorted(order), lines
    tanh = lines[1 + ops.index("aten.tanh.default")]
    assert "[Tanh]" in tanh and "test_op_dump.py:" in tanh


def test_level_2_gives_shapes_dtypes_and_strides(dump_file, monkeypatch):
    monkeypatch.setenv("DICP_DUMP_OP_ARGS", "2")
    x, w = inputs()
    compiled(net)(x, w)
    lines = dump_lines(dump_file)
    mm = lines[op_line(lines, "aten.mm.default") + 1]
    assert mm.strip() == (
        "in: float32[4, 8] strides [8, 1], float32[8, 6] strides [6, 1] -> "
        "out: float32[4, 6] strides [6, 1]"
    )


def summary(line):
    numbers = dict(re.findall(r"(min|max|mean|nan|inf) (\S+)", line))
    return {k: float(v) for k, v in numbers.items()}


def test_level_3_summarizes_values_like_eager(dump_file, monkeypatch):
    monkeypatch.setenv("DICP_DUMP_OP_ARGS", "3")
    x, w = inputs()
    compiled(net)(x, w)
    lines = dump_lines(dump_file)
    h = torch.tanh(x @ w)
    tanh_out = summary(lines[op_line(lines, "aten.tanh.default") + 3])
    finite_log = torch.log(h)[h > 0]
    log_out = summary(lines[op_line(lines, "aten.log.default") + 3])
    expected = {
        "aten.tanh.default": (tanh_out, h, 0),
        "aten.log.default": (log_out, finite_log, int((h < 0).sum())),
    }
    for op, (got, values, nans) in expected.items():
        assert got["min"] == pytest.approx(values.min().item(), rel=1e-5), op
        assert got["max"] == pytest.approx(values.max().item(), rel=1e-5), op
        assert got["mean"] == pytest.approx(values.mean().item(), rel=1e-4, abs=1e-6), op
        assert got["nan"] == nans and got["inf"] == 0, (op, got)
    reciprocal = summary(lines[op_line(lines, "aten.reciprocal.default") + 3])
    assert reciprocal["inf"] == 24 and reciprocal["nan"] == 0  # 1 / (h - h)


def test_dump_goes_to_the_log_without_a_file(warm_cache, monkeypatch, caplog):
    monkeypatch.setenv("DICP_DUMP_OP_ARGS", "1")
    caplog.set_level(logging.INFO, logger="dicp.op_args")
    compiled(net)(*inputs())
    messages = [r.getMessage() for r in caplog.records if r.name == "dicp.op_args"]
    assert messages[0].startswith("dicp op-args: graph") and "aten.tanh.default" in messages[2]
