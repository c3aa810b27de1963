"""The round-trip cast rewrite: Convert(Convert(x, wide), narrow) with narrow == x.dtype is x."""

import pytest
import torch
import torch.fx as fx
from torch._subclasses import FakeTensorMode

from dicp.bridge.pipeline.conversion import rewrite_patterns
from dicp.vendor.new_backendGraph.opset import ops
from dicp.vendor.new_backendGraph.pattern_replacement import REWRITES

from .helpers import cold_cache, compiled  # noqa: F401  (fixture)


def cast_chain(source, wide, narrow):
    """x -> Convert(wide) -> Convert(narrow) -> Exp, with fake-tensor metadata like the pass."""
    graph = fx.Graph()
    x = graph.placeholder("x")
    mode = FakeTensorMode()
    with mode:
        x.meta["val"] = torch.empty(4, 3, dtype=source)
        inner = graph.call_function(ops.Convert, (x, wide))
        inner.meta["val"] = ops.Convert.infer_result(x.meta["val"], wide)
        outer = graph.call_function(ops.Convert, (inner, narrow))
        outer.meta["val"] = ops.Convert.infer_result(inner.meta["val"], narrow)
        result = graph.call_function(ops.Exp, (outer,))
    graph.output(result)
    return fx.GraphModule({}, graph)


def converts(gm):
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target is ops.Convert]


def test_hand_built_chain_has_two_converts():
    assert len(converts(cast_chain(torch.float16, torch.float32, torch.float16))) == 2


@pytest.mark.parametrize(
    "source, wide", [(torch.float16, torch.float32), (torch.bfloat16, torch.float64)]
)
def test_widening_round_trip_is_removed(source, wide):
    gm = rewrite_patterns(cast_chain(source, wide, source), REWRITES)
    assert converts(gm) == []
    (exp,) = [n for n in gm.graph.nodes if n.op == "call_function"]
    assert exp.args[0].op == "placeholder"
    x = torch.randn(4, 3).to(source)
    torch.testing.assert_close(gm(x), torch.exp(x))


@pytest.mark.parametrize(
    "source, wide, narrow",
    [
        (torch.float32, torch.float16, torch.float32),  # inner cast narrows: loses precision
        (torch.float16, torch.float32, torch.bfloat16),  # different final dtype
        (torch.float32, torch.bfloat16, torch.float32),
    ],
)
def test_lossy_or_type_changing_round_trip_is_kept(source, wide, narrow):
    gm = rewrite_patterns(cast_chain(source, wide, narrow), REWRITES)
    assert [n.args[1] for n in converts(gm)] == [wide, narrow]
    x = torch.randn(4, 3).to(source) * 1.001
    torch.testing.assert_close(gm(x), torch.exp(x.to(wide).to(narrow)), rtol=0, atol=0)


def round_trip(x):
    return x.float().half() * 2


def test_conversion_pipeline_drops_round_trip(cold_cache, monkeypatch):
    monkeypatch.setenv("DICP_DEBUG", "1")
    x = torch.randn(4, 3).half()
    torch.testing.assert_close(compiled(round_trip)(x), round_trip(x), rtol=0, atol=0)
    (dump,) = (cold_cache / "debug").glob("*/vendor_graph.txt")
    assert "Convert" not in dump.read_text(), dump.read_text()
