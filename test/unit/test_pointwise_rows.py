"""Each pointwise op is one row (pointwise.py): its vocabulary entry, conversion, lowering,
renderings and cost. The tables built from the rows, and the loop level's own ops, agree key
for key: a row missing a renderer's function, or an op without a cost, fails here."""

import pytest

from dicp.vendor.new_backendGraph import conversion, opset
from dicp.vendor.new_backendGraph.codegen import cpp_render, costs, lowering, py_runtime
from dicp.vendor.new_backendGraph.pointwise import POINTWISE, ROWS

NAMES = [row.name for row in POINTWISE]


@pytest.mark.parametrize("name", NAMES)
def test_a_row_is_an_op_of_the_vocabulary_with_its_lowering(name):
    row = ROWS[name]
    assert opset.OPS[name].family == row.family
    assert opset.OPS[name].impl is row.impl
    assert name in lowering.LOWERINGS, f"{name}: no lowering (compute={row.compute!r})"


@pytest.mark.parametrize("name", NAMES)
def test_a_rows_aten_ops_convert_to_it(name):
    for aten_op in ROWS[name].aten:
        overloads = (
            [getattr(aten_op, o) for o in aten_op.overloads()]
            if hasattr(aten_op, "overloads")
            else [aten_op]
        )
        for overload in overloads:
            assert conversion.CONVERSIONS[overload].__name__ == f"to_{name}"


def test_every_loop_ir_op_has_a_cost_and_both_renderings():
    """C++ (cpp_render.OPS), Python (py_runtime's function of the name) and a cost."""
    assert set(cpp_render.OPS) == set(costs.OP_COSTS)
    missing = [name for name in cpp_render.OPS if not callable(getattr(py_runtime, name, None))]
    assert not missing, f"py_runtime has no function for {missing}"


def test_one_row_per_name():
    assert len(NAMES) == len(set(NAMES)) == len(ROWS)
