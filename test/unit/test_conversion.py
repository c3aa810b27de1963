"""register_conversion and Operator.infer_result: the two contracts a vendor table relies on."""

import pytest
import torch
import torch.fx as fx
from torch._subclasses import FakeTensorMode

from dicp.bridge.pipeline.conversion import DuplicateConversionError, register_conversion
from dicp.bridge.pipeline.stages import infer_node
from dicp.bridge.pipeline.operator import InferenceError, Operator

aten = torch.ops.aten


def _convert(ctx, *args):
    return None


def test_packet_expands_to_every_overload():
    table = {}
    register_conversion(table, aten.add)(_convert)
    expected = {getattr(aten.add, name) for name in aten.add.overloads()}
    assert len(expected) > 1
    assert set(table) == expected
    assert aten.add.Tensor in table and aten.add.Scalar in table
    assert all(fn is _convert for fn in table.values())


def test_overload_and_list_register_exactly_those():
    table = {}
    register_conversion(table, [aten.mul.Tensor, aten.sub.Scalar])(_convert)
    assert set(table) == {aten.mul.Tensor, aten.sub.Scalar}


def test_register_returns_the_function_unchanged():
    assert register_conversion({}, aten.neg)(_convert) is _convert


def test_duplicate_registration_raises():
    table = {}
    register_conversion(table, aten.add.Tensor)(_convert)

    def other(ctx, *args):
        return None

    with pytest.raises(DuplicateConversionError, match="add.Tensor"):
        register_conversion(table, aten.add)(other)
    assert table[aten.add.Tensor] is _convert


def test_duplicate_same_function_also_raises():
    table = {}
    register_conversion(table, aten.neg.default)(_convert)
    with pytest.raises(DuplicateConversionError):
        register_conversion(table, aten.neg.default)(_convert)


class Broken(Operator):
    name = "BrokenMatAdd"

    def impl(self, a, b):
        return torch.add(a, b)  # shapes below do not broadcast


def _fakes(*shapes):
    mode = FakeTensorMode()
    with mode:
        return mode, [torch.empty(s) for s in shapes]


def test_infer_result_failure_names_the_vendor_op():
    mode, (a, b) = _fakes((3, 4), (5, 6))
    with mode, pytest.raises(InferenceError, match="BrokenMatAdd") as info:
        Broken().infer_result(a, b)
    assert info.value.__cause__ is not None  # the original error is kept, not swallowed


def test_infer_result_returns_fake_result():
    mode, (a, b) = _fakes((3, 1), (1, 4))
    with mode:
        out = Broken().infer_result(a, b)
    assert out.shape == (3, 4) and out.dtype == torch.float32


def test_infer_node_failure_names_the_aten_op():
    graph = fx.Graph()
    mode, (a, b) = _fakes((3, 4), (5, 6))
    x, y = graph.placeholder("x"), graph.placeholder("y")
    x.meta["val"], y.meta["val"] = a, b
    node = graph.call_function(aten.mm.default, (x, y))
    with pytest.raises(InferenceError, match="aten.mm"):
        infer_node(node, mode)
