"""Matrix products from the faster library (gemm.py): oneDNN's product is right for every
layout it takes, other layouts stay with ATen, and `auto` measures a shape once, keeping the
choice on disk (a damaged file is measured again, not trusted)."""

import json
import time

import pytest
import torch
import torch.nn.functional as F

from dicp.vendor.new_backendGraph import gemm

from .helpers import cold_cache, compiled  # noqa: F401  (fixture)


def linear_stack(x, w1, b1, w2):
    return F.linear(F.gelu(F.linear(x, w1, b1)), w2) @ w1.t()[:, :3]


def _values_and_grads(fn, inputs, weights):
    inputs = [t.detach().requires_grad_() for t in inputs]
    out = fn(*inputs)
    return [out.detach(), *torch.autograd.grad((out * weights).sum(), inputs)]


def assert_as_accurate_as_eager(got, eager, exact):
    """Products rounded in another order differ from eager's by more than a tolerance in a
    chain of three of them (values up to 200): compare errors against float64 instead."""
    for g, e, x in zip(got, eager, exact, strict=True):
        got_error, eager_error = (g.double() - x).abs().max(), (e.double() - x).abs().max()
        assert got_error <= 2 * eager_error + 1e-6 * x.abs().max(), (got_error, eager_error)


@pytest.mark.parametrize("library", ["onednn", "aten", "auto"])
@pytest.mark.parametrize("rows", [1, 7, 64])
def test_linear_layers_and_their_gradients_match_eager(cold_cache, monkeypatch, library, rows):
    monkeypatch.setenv("DICP_GEMM_LIBRARY", library)
    torch.manual_seed(rows)
    inputs = [torch.randn(rows, 65), torch.randn(96, 65), torch.randn(96), torch.randn(65, 96)]
    weights = torch.randn(rows, 3)  # every element its own gradient
    got = _values_and_grads(compiled(linear_stack), inputs, weights)
    eager = _values_and_grads(linear_stack, inputs, weights)
    exact = _values_and_grads(linear_stack, [t.double() for t in inputs], weights.double())
    assert_as_accurate_as_eager(got, eager, exact)


def _matrix(kind, rows, cols):
    """A rows x cols matrix laid out as `kind`."""
    if kind == "n":
        return torch.randn(rows, cols)
    if kind == "t":
        return torch.randn(cols, rows).t()
    if kind == "expanded":
        return torch.randn(rows, 1).expand(rows, cols)
    return torch.randn(rows, 2 * cols)[:, ::2]  # sliced: every other column


LAYOUTS = ["n", "t", "expanded", "sliced"]


@pytest.mark.parametrize("a_kind", LAYOUTS)
@pytest.mark.parametrize("b_kind", LAYOUTS)
@pytest.mark.parametrize("shape", [(1, 5, 3), (5, 1, 4), (6, 4, 1), (9, 7, 6)])
def test_every_layout_computes_the_product(monkeypatch, a_kind, b_kind, shape):
    monkeypatch.setenv("DICP_GEMM_LIBRARY", "onednn")
    m, k, n = shape
    a, b, bias = _matrix(a_kind, m, k), _matrix(b_kind, k, n), torch.randn(n)
    torch.testing.assert_close(gemm.mm(a, b), a @ b)
    torch.testing.assert_close(gemm.addmm(bias, a, b), torch.addmm(bias, a, b))
    dense = {"n", "t"}
    expected = "onednn" if {gemm._layout(a), gemm._layout(b)} <= dense else "aten"
    assert gemm._library(None, a, b) == expected
    if a_kind in dense and b_kind in dense:
        assert expected == "onednn", (gemm._layout(a), gemm._layout(b))


def test_a_bias_other_than_one_per_column_stays_with_aten(monkeypatch):
    monkeypatch.setenv("DICP_GEMM_LIBRARY", "onednn")
    a, b = torch.randn(4, 3), torch.randn(3, 5)
    for bias in (torch.randn(1), torch.randn(4, 5), torch.randn(1, 5), torch.randn(1).expand(5)):
        torch.testing.assert_close(gemm.addmm(bias, a, b), torch.addmm(bias, a, b))
    bias = torch.randn(5)
    torch.testing.assert_close(
        gemm.addmm(bias, a, b, beta=0.5, alpha=2), torch.addmm(bias, a, b, beta=0.5, alpha=2)
    )


def test_aten_library_gives_eager_bits(monkeypatch):
    monkeypatch.setenv("DICP_GEMM_LIBRARY", "aten")
    a, b = torch.randn(128, 256), torch.randn(256, 64)
    assert torch.equal(gemm.mm(a, b), torch.mm(a, b))


def _new_process(monkeypatch):
    """Forget the choices this process made: the next product reads them from disk."""
    monkeypatch.setattr(gemm, "_decided", {})
    monkeypatch.setattr(gemm, "_chosen", {})


def test_a_shape_is_measured_once_and_remembered_on_disk(cold_cache, monkeypatch):
    _new_process(monkeypatch)
    measured = []
    monkeypatch.setattr(gemm, "_measure", lambda *args: measured.append(1) or "onednn")
    a, b = torch.randn(96, 80), torch.randn(80, 64)
    path = gemm._choices_file()
    path.parent.mkdir(parents=True)
    path.write_text("{not json")  # damaged: measured again, then rewritten
    for _ in range(3):
        torch.testing.assert_close(gemm.mm(a, b), a @ b)
    assert measured == [1]
    key = gemm._shape_key(None, a, b)
    assert json.loads(path.read_text()) == {key: "onednn"}
    _new_process(monkeypatch)  # reads the file, measures nothing
    torch.testing.assert_close(gemm.mm(a, b), a @ b)
    assert measured == [1]


@pytest.mark.parametrize("rounds_won", [(True, True, True), (True, False, True), (False,) * 3])
def test_onednn_is_chosen_only_when_it_wins_every_round(monkeypatch, rounds_won):
    """One round measured while other processes ran could choose oneDNN where it is slower
    (and the choice is kept on disk): it must win every round."""
    outcomes = iter(rounds_won)
    monkeypatch.setattr(gemm, "_onednn_wins", lambda *args: next(outcomes))
    a, b = torch.randn(96, 80), torch.randn(80, 64)
    expected = "onednn" if all(rounds_won) else "aten"
    assert gemm._measure(None, a, b) == expected


def test_small_products_are_not_measured(monkeypatch):
    monkeypatch.setattr(gemm, "_measure", lambda *args: pytest.fail("measured a small product"))
    a, b = torch.randn(8, 8), torch.randn(8, 8)
    assert gemm._library(None, a, b) == "aten"


def test_the_native_entrys_choice_is_timed_on_real_tensors(cold_cache, monkeypatch):
    """The native entry asks while the compile's fake mode is on: timed there, a product was
    fake tensors' dispatch, ATen's always won (oneDNN's products took 0.5x MKL's on an AMD
    EPYC, two threads), and the choice was kept on disk for every later process."""
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    _new_process(monkeypatch)
    timed = []

    def wins(bias, a, b):
        timed.append([type(t) for t in (bias, a, b)])
        return True

    monkeypatch.setattr(gemm, "_onednn_wins", wins)
    with FakeTensorMode():
        library = gemm.library_for(((96, 80), (80, 1)), ((80, 64), (1, 80)), True)
    assert library == "onednn"
    assert timed and all(kind is torch.Tensor for kinds in timed for kind in kinds), timed
    assert not any(issubclass(kind, FakeTensor) for kinds in timed for kind in kinds)


def test_products_are_timed_after_the_toolchain_threads_builds(monkeypatch):
    """A cold start builds the precompiled header beside the compile; a product timed then
    shares a core with g++ (and the choice is kept on disk)."""
    from dicp.vendor.new_backendGraph import background

    order = []
    job = background.background(lambda: time.sleep(0.2) or order.append("build"))
    monkeypatch.setattr(gemm, "_onednn_wins", lambda *args: order.append("timed") or False)
    gemm._measure(None, torch.randn(96, 80), torch.randn(80, 64))
    assert job.done() and order[0] == "build" and order[1:] == ["timed"]  # lost its first round


@pytest.mark.parametrize("seconds", [1e-5, 0.005, 0.02, 0.1, 1.0])
def test_long_products_are_timed_fewer_times(seconds):
    """All runs of a 512x4096x4096 product took 6.5 s of a compile per shape: a round's runs
    stay near ROUND_SECONDS, and a round keeps a warm-up and three timed runs whatever the
    length."""
    warmup, timed = gemm._run_counts(seconds)
    assert 2 <= warmup <= gemm.WARMUP_RUNS and 3 <= timed <= gemm.TIMED_RUNS
    if 2 * seconds * (gemm.WARMUP_RUNS + gemm.TIMED_RUNS) <= gemm.ROUND_SECONDS:
        assert (warmup, timed) == (gemm.WARMUP_RUNS, gemm.TIMED_RUNS)
    else:
        assert 2 * seconds * (warmup + timed) <= max(gemm.ROUND_SECONDS, 2 * seconds * 5)


def test_a_round_runs_each_library_its_counted_times(monkeypatch):
    calls = {"aten": 0, "onednn": 0}
    monkeypatch.setattr(
        gemm, "aten_product", lambda *args: calls.__setitem__("aten", calls["aten"] + 1)
    )
    monkeypatch.setattr(
        gemm, "_onednn", lambda *args: calls.__setitem__("onednn", calls["onednn"] + 1)
    )
    monkeypatch.setattr(gemm, "_run_counts", lambda seconds: (2, 3))
    gemm._onednn_wins(None, torch.randn(4, 4), torch.randn(4, 4))
    assert calls == {"aten": 5, "onednn": 5}  # 2 warm-up runs (the first timed), 3 timed
