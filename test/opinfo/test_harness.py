"""The OpInfo check itself can fail: a fault injected into one op's generated code
(DICP_INJECT_BUG_TESTING_ONLY) is reported with its kind and sample, and the expected-failure
table is strict."""

import pytest

from . import expectations
from .cases import opinfo
from .check import OpCheck
from .outcome import Outcome
from .samples import FAST_SAMPLE_LIMITS
from .summary import table_verdict


def run(name, mode, dtypes=None):
    return OpCheck(opinfo(name), mode, limits=FAST_SAMPLE_LIMITS).run(dtypes)


@pytest.fixture
def inject(monkeypatch):
    return lambda spec: monkeypatch.setenv("DICP_INJECT_BUG_TESTING_ONLY", spec)


def test_wrong_value_is_reported_with_its_sample(inject):
    import torch

    inject("aten.abs.default:accuracy")
    (outcome,) = run("abs", "static", [torch.float32])
    assert (outcome.status, outcome.kind) == ("fail", "value")
    assert outcome.sample.startswith("sample ")


def test_wrong_gradient_is_reported_as_grad(inject):
    inject("aten.mul.Tensor:accuracy")  # sigmoid's backward multiplies; its forward does not
    (outcome,) = run("sigmoid", "grad")
    assert (outcome.status, outcome.kind) == ("fail", "grad"), outcome


@pytest.mark.parametrize(
    "fault, kind", [("compile_error", "compile error"), ("runtime_error", "runtime error")]
)
def test_errors_name_their_kind_and_sample(inject, fault, kind):
    import torch

    inject(f"aten.abs.default:{fault}")
    (outcome,) = run("abs", "static", [torch.float32])
    assert (outcome.status, outcome.kind) == ("fail", kind), outcome
    assert outcome.sample.startswith("sample ")


def test_listed_case_that_passes_is_an_unexpected_pass(monkeypatch):
    monkeypatch.setitem(expectations.EXPECTED_FAILURES, ("abs", "*", "static"), "a reason")
    assert table_verdict(Outcome("abs", "float32", "static", "pass")) == "XPASS"
    assert table_verdict(Outcome("abs", "float32", "static", "fail", "value")) == "xfail"
    assert table_verdict(Outcome("abs", "float32", "grad", "fail", "value")) == "FAIL"
