"""DICP_NEW_BACKENDGRAPH_TARGET=python: vendor ops run as their torch reference kernels."""

import pytest
import torch

from .helpers import builds, cause_of, compiled, warm_cache  # noqa: F401  (fixture)


def mixed(x, w):
    h = torch.relu(x @ w + 0.5)
    return h.sum(0), (h * torch.sigmoid(h)).amax(1), torch.softmax(h, -1)


@pytest.fixture
def python_target(warm_cache, monkeypatch):
    monkeypatch.setenv("DICP_NEW_BACKENDGRAPH_TARGET", "python")


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_python_target_matches_eager_without_cpp_build(python_target, dynamic):
    before = builds()
    fn = compiled(mixed, dynamic=dynamic)
    for rows in (4, 7):
        x, w = torch.randn(rows, 8), torch.randn(8, 5)
        for got, want in zip(fn(x, w), mixed(x, w)):
            torch.testing.assert_close(got, want)
    assert builds() - before == 0


def test_python_target_trains(python_target):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    x = torch.randn(3, 6)
    compiled(model)(x).square().mean().backward()
    expected = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(x).square().mean().backward()
    for got, want in zip(expected, [p.grad for p in model.parameters()]):
        torch.testing.assert_close(got, want)


def sorted_values(x):
    return torch.sort(x, dim=1)[0] * 2


def test_python_target_multi_output_vendor_op(python_target):
    x = torch.randn(3, 6)
    torch.testing.assert_close(compiled(sorted_values)(x), sorted_values(x))


def test_invalid_target_raises_value_error_naming_knob(warm_cache, monkeypatch):
    monkeypatch.setenv("DICP_NEW_BACKENDGRAPH_TARGET", "fortran")
    x, w = torch.randn(4, 8), torch.randn(8, 5)
    with pytest.raises(Exception) as info:
        compiled(mixed)(x, w)
    error = cause_of(info.value, ValueError)
    assert error is not None, repr(info.value)
    assert "DICP_NEW_BACKENDGRAPH_TARGET" in str(error) and "fortran" in str(error)
