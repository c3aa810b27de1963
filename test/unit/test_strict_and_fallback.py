"""Eager fallback of unconverted ops, DICP_STRICT, DICP_FALLBACK_OPS, declared fallbacks, dtypes
and DICP_DEBUG."""

import logging

import pytest
import torch

from dicp.bridge.pipeline import utils
from dicp.bridge.pipeline.fallback import declared_reason, observe_fallbacks
from dicp.bridge.pipeline.conversion import UnsupportedOpError
from dicp.api import get_backend
from dicp.vendor.new_backendGraph import config
from dicp.vendor.new_backendGraph.conversion import CONVERSIONS

from .helpers import (  # noqa: F401  (fixtures)
    BACKEND,
    cause_of,
    check_fresh,
    cold_cache,
    compiled,
    warm_cache,
)

aten = torch.ops.aten
UNCONVERTED = aten.lgamma.default  # no converter, no decomposition (checked below)


@pytest.fixture
def dicp_log(caplog, monkeypatch):
    """Warnings of logger "dicp"; forgets which fallbacks were already logged once."""
    monkeypatch.setattr(utils, "_logged_once", set())
    caplog.set_level(logging.WARNING, logger="dicp")
    return caplog


def messages(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "dicp"]


def lgamma_fn(x):
    return torch.lgamma(x * 2 + 1).sum(1)


def positive(*shape):
    return torch.rand(*shape) + 0.5


def test_chosen_op_really_has_no_converter():
    assert UNCONVERTED not in CONVERSIONS
    assert UNCONVERTED not in config.decompositions()


def test_unconverted_op_falls_back_and_logs_it(warm_cache, dicp_log):
    x = positive(4, 8)
    torch.testing.assert_close(compiled(lgamma_fn)(x), lgamma_fn(x))
    logged = [m for m in messages(dicp_log) if "aten.lgamma" in m]
    assert logged, messages(dicp_log)
    assert BACKEND in logged[0] and "fallback" in logged[0]


def test_strict_mode_names_op_backend_and_table(warm_cache, monkeypatch):
    monkeypatch.setenv("DICP_STRICT", "1")
    with pytest.raises(Exception) as info:
        compiled(lgamma_fn)(positive(4, 8))
    error = cause_of(info.value, UnsupportedOpError)
    assert error is not None, repr(info.value)
    for needle in ("aten.lgamma", BACKEND, "conversion.py"):
        assert needle in str(error), str(error)


def test_strict_off_spelled_zero_still_falls_back(warm_cache, monkeypatch):
    monkeypatch.setenv("DICP_STRICT", "0")
    x = positive(3, 8)
    torch.testing.assert_close(compiled(lgamma_fn)(x), lgamma_fn(x))


def mul_fn(x, y):
    return (x * y + 1).relu().sum(0)


def test_forced_fallback_by_pattern_is_correct_and_logged(warm_cache, monkeypatch, dicp_log):
    monkeypatch.setenv("DICP_FALLBACK_OPS", "aten.mul.*")
    x, y = torch.randn(5, 6), torch.randn(5, 6)
    torch.testing.assert_close(compiled(mul_fn)(x, y), mul_fn(x, y))
    assert any("aten.mul.Tensor" in m and "DICP_FALLBACK_OPS" in m for m in messages(dicp_log)), (
        messages(dicp_log)
    )


def test_forced_fallback_is_allowed_in_strict_mode(warm_cache, monkeypatch):
    monkeypatch.setenv("DICP_FALLBACK_OPS", "aten.mul.*")
    monkeypatch.setenv("DICP_STRICT", "1")
    x, y = torch.randn(5, 6), torch.randn(5, 6)
    torch.testing.assert_close(compiled(mul_fn)(x, y), mul_fn(x, y))


def test_forced_fallback_pattern_matches_default_overloads(warm_cache, monkeypatch, dicp_log):
    monkeypatch.setenv("DICP_FALLBACK_OPS", "aten.mm.*")
    x, w = torch.randn(4, 8), torch.randn(8, 3)
    fn = torch.mm
    torch.testing.assert_close(compiled(fn)(x, w), fn(x, w))
    assert any("aten.mm" in m and "DICP_FALLBACK_OPS" in m for m in messages(dicp_log)), messages(
        dicp_log
    )


def test_keep_torch_default_pattern_removes_default_overload(monkeypatch):
    assert aten.gelu.default in config.decompositions()
    monkeypatch.setenv("DICP_KEEP_TORCH_DEFAULT", "aten.gelu.*")
    assert aten.gelu.default not in config.decompositions()


# ---- dtypes the kernels cannot hold -------------------------------------------------------


def complex_add(x, y):
    return x + y


def complex_inputs():
    return (torch.randn(4, 3, dtype=torch.complex64), torch.randn(4, 3, dtype=torch.complex64))


def test_unsupported_dtype_falls_back_with_message(warm_cache, dicp_log):
    x, y = complex_inputs()
    torch.testing.assert_close(compiled(complex_add)(x, y), complex_add(x, y))
    assert any("complex64" in m for m in messages(dicp_log)), messages(dicp_log)


def test_unsupported_dtype_in_strict_mode_raises_naming_dtype(warm_cache, monkeypatch):
    monkeypatch.setenv("DICP_STRICT", "1")
    with pytest.raises(Exception) as info:
        compiled(complex_add)(*complex_inputs())
    error = cause_of(info.value, UnsupportedOpError)
    assert error is not None, repr(info.value)
    assert "complex64" in str(error) and "aten.add" in str(error), str(error)
    assert "Backend.supported_dtypes" in str(error), str(error)  # the fix, not the converter


# ---- a fallback op with several outputs feeding a fused kernel -----------------------------

TUPLE_SCRIPT = """
import torch
x = torch.randn(6, 5)
kth = lambda x: torch.kthvalue(x, 2, 1)[0] * 3   # eager fallback op, tuple result
sort = lambda x: torch.sort(x, dim=1)[0] * 2     # library op, tuple result
for fn in (kth, sort):
    torch._dynamo.reset()
    torch.testing.assert_close(torch.compile(fn, backend="new_backendgraph")(x), fn(x))
print("ok")
"""


def test_tuple_output_of_fallback_feeds_fused_kernel(cold_cache):
    assert check_fresh(TUPLE_SCRIPT, cold_cache) == "ok"


# ---- debug dumps -------------------------------------------------------------------------


def test_debug_mode_dumps_graphs_wrapper_and_kernels(cold_cache, monkeypatch):
    monkeypatch.setenv("DICP_DEBUG", "1")
    x, y = torch.randn(5, 6), torch.randn(5, 6)
    torch.testing.assert_close(compiled(mul_fn)(x, y), mul_fn(x, y))
    graphs = [d for d in (cold_cache / "debug").iterdir() if d.is_dir()]
    assert len(graphs) == 1, graphs
    files = {p.name: p.read_text() for p in graphs[0].iterdir()}
    assert set(files) >= {"aten_graph.txt", "vendor_graph.txt", "wrapper.py", "kernels.cpp"}
    assert "aten.mul" in files["aten_graph.txt"]
    assert "Mul" in files["vendor_graph.txt"] and "aten.mul" not in files["vendor_graph.txt"]
    assert "def call(" in files["wrapper.py"]
    assert 'extern "C"' in files["kernels.cpp"]


def test_no_debug_dir_without_debug_mode(cold_cache):
    x, y = torch.randn(5, 6), torch.randn(5, 6)
    torch.testing.assert_close(compiled(mul_fn)(x, y), mul_fn(x, y))
    assert not (cold_cache / "debug").exists()


# ---- declared fallbacks (Backend.expected_fallbacks) and observing fallbacks ----------------


def real_parts(z):
    return torch.view_as_real(z) * 2


def test_declared_fallback_is_allowed_in_strict_mode_and_observed(warm_cache, monkeypatch):
    monkeypatch.setenv("DICP_STRICT", "1")
    z = torch.randn(4, 3, dtype=torch.complex64)
    with observe_fallbacks() as seen:
        torch.testing.assert_close(compiled(real_parts)(z), real_parts(z))
    assert [f.op for f in seen] == ["aten.view_as_real.default"], seen
    backend = get_backend(BACKEND)
    assert "complex" in declared_reason(backend, seen[0].op)
    assert declared_reason(backend, "aten.mul.Tensor") is None


def test_forced_fallbacks_are_observed(warm_cache, monkeypatch):
    monkeypatch.setenv("DICP_FALLBACK_OPS", "aten.mul.*")
    x, y = torch.randn(5, 6), torch.randn(5, 6)
    with observe_fallbacks() as seen:
        compiled(mul_fn)(x, y)
    assert {(f.backend, f.op, f.reason) for f in seen} == {
        (BACKEND, "aten.mul.Tensor", "forced by DICP_FALLBACK_OPS")
    }


def _spd(n):
    a = torch.randn(n, n)
    return a @ a.T + n * torch.eye(n)


# Ops that reach the wrapper as something other than an ATen overload (linalg's error checks
# run under the `with_effects` higher-order op) or return tuples: fallback must run them too.
LINALG_CASES = {
    "inv": (lambda a: torch.linalg.inv(a), lambda: (_spd(4),)),
    "cholesky": (lambda a: torch.linalg.cholesky(a), lambda: (_spd(5),)),
    "solve": (lambda a, b: torch.linalg.solve(a, b), lambda: (_spd(4), torch.randn(4, 3))),
    "lu_factor": (lambda a: torch.linalg.lu_factor(a), lambda: (_spd(4),)),
    "ldl_factor": (lambda a: torch.linalg.ldl_factor(a), lambda: (_spd(3),)),
    "tensorinv": (lambda a: torch.linalg.tensorinv(a, ind=1), lambda: (_spd(4),)),
    "tensorsolve": (
        lambda a, b: torch.linalg.tensorsolve(a, b),
        lambda: (_spd(6).reshape(6, 2, 3), torch.randn(6)),
    ),
}


@pytest.mark.parametrize("case", LINALG_CASES)
def test_linalg_ops_fall_back_and_match_eager(case, warm_cache):
    fn, make_inputs = LINALG_CASES[case]
    inputs = make_inputs()
    expected = fn(*inputs)
    actual = compiled(lambda *xs: fn(*(x * 1.0 for x in xs)))(*inputs)
    torch.testing.assert_close(actual, expected)


# ---- a converter that fails ---------------------------------------------------------------


def broken_converter(ctx, *args, **kwargs):
    raise ZeroDivisionError("a bug in the converter")


def sin_fn(x):
    return torch.sin(x) * 2


def test_failing_converter_falls_back_naming_op_and_error(warm_cache, dicp_log, monkeypatch):
    monkeypatch.setitem(CONVERSIONS, aten.sin.default, broken_converter)
    x = torch.randn(4, 5)
    torch.testing.assert_close(compiled(sin_fn)(x), sin_fn(x))
    logged = [m for m in messages(dicp_log) if "aten.sin.default" in m]
    assert logged and "ZeroDivisionError" in logged[0] and "a bug in the converter" in logged[0]
    assert "fix the converter" in logged[0], logged[0]


def test_failing_converter_in_strict_mode_raises_naming_op(warm_cache, monkeypatch):
    monkeypatch.setitem(CONVERSIONS, aten.sin.default, broken_converter)
    monkeypatch.setenv("DICP_STRICT", "1")
    with pytest.raises(Exception) as info:
        compiled(sin_fn)(torch.randn(4, 5))
    error = cause_of(info.value, UnsupportedOpError)
    assert error is not None, repr(info.value)
    assert "aten.sin.default" in str(error) and "ZeroDivisionError" in str(error), str(error)
    assert isinstance(error.__cause__, ZeroDivisionError)


def test_nested_fallback_observers_each_see_their_own_fallbacks():
    from dicp.bridge.pipeline.fallback import Fallback, observe_fallbacks, record_fallback

    first, second = Fallback("b", "aten.x", "r"), Fallback("b", "aten.y", "r")
    with observe_fallbacks() as outer:
        with observe_fallbacks() as inner:
            record_fallback(first)  # both lists now equal: the inner one must leave, by identity
        record_fallback(second)
    assert outer == [first, second] and inner == [first]
