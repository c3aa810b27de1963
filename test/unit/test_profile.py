"""The compile profile: stage timers, counters, compiles per function, the shape-recompile
warning, DICP_PROFILE's table at exit and the TORCH_LOGS=dicp.profile lines."""

import itertools
import logging

import torch

import dicp
from dicp import profile
from dicp.bridge.pipeline import dynamo_context
from dicp.bridge.pipeline import utils

from .helpers import check_fresh, cold_cache, compiled, run_fresh, warm_cache  # noqa: F401


def block(x):
    return torch.softmax(torch.tanh(x) * 2, dim=-1).sum()


def test_stage_times_are_self_times(monkeypatch):
    clock = itertools.count()  # every perf_counter() call advances one "second"
    monkeypatch.setattr(profile.time, "perf_counter", lambda: float(next(clock)))
    with profile.collect() as stats:
        with profile.stage("outer"):  # t=0
            with profile.stage("inner"):  # t=1 .. t=2
                pass
        # outer ends at t=3: 3 s in total, 1 of them inside "inner"
    assert stats.stages == {"outer": 2.0, "inner": 1.0}


def test_dynamos_compile_of_a_frame_without_a_graph_counts(cold_cache):
    """A frame dynamo compiles without a graph (no tensor op: dicp is never called) is part of
    the first call's wall time."""

    def no_graph(x):
        return x

    torch._dynamo.reset()
    dynamo_context.install()
    with profile.collect() as stats:
        torch.compile(no_graph, backend="new_backendgraph")(torch.ones(3))
    assert stats.stages["dynamo"] > 0, stats.stages
    assert not stats.counters.get("kernels")


def test_a_cold_training_compile_is_fully_accounted(cold_cache):
    x = torch.randn(4, 8, requires_grad=True)
    torch._dynamo.reset()  # drops dynamo's compile hooks; a backend registers them again
    dynamo_context.install()
    with profile.collect() as stats:
        torch.compile(block, backend="new_backendgraph")(x).backward()
    for stage in ("dynamo", "aot_autograd", "conversion", "codegen", "build", "load"):
        assert stats.stages[stage] > 0, (stage, stats.stages)
    assert stats.counters["graphs (forward)"] == 1 and stats.counters["graphs (backward)"] == 1
    assert stats.counters["kernels"] >= 2 and stats.counters["vendor nodes"] >= 5
    assert stats.counters["cache misses"] >= 1
    assert stats.counters["cache builds"] == stats.counters["cache misses"]
    name = next(iter(stats.compiles))
    assert name.startswith("block (") and "test_profile.py" in name


def test_warm_compile_hits_the_cache(warm_cache):
    x = torch.randn(4, 8)
    compiled(block)(x)
    with profile.collect() as stats:
        compiled(block)(x)
    assert stats.counters["cache hits (memory)"] >= 1
    assert "cache builds" not in stats.counters and "build" not in stats.stages


def test_fallback_ops_are_counted_by_name(warm_cache, monkeypatch):
    monkeypatch.setenv("DICP_FALLBACK_OPS", "aten.tanh.*")
    with profile.collect() as stats:
        compiled(block)(torch.randn(4, 8))
    assert stats.fallback_ops == {"aten.tanh.default": 1}


def test_shape_recompiles_are_counted_and_warned_about_once(warm_cache, monkeypatch, caplog):
    monkeypatch.setenv("DICP_RECOMPILE_WARN_LIMIT", "2")
    monkeypatch.setattr(utils, "_logged_once", set())
    caplog.set_level(logging.WARNING, logger="dicp")
    fn = compiled(block, dynamic=False)
    with profile.collect() as stats:
        for n in range(2, 7):
            fn(torch.randn(3, n))
    ((name, compiles),) = stats.compiles.items()
    assert compiles == 5 and stats.recompiles == {name: 4}
    warnings = [r.getMessage() for r in caplog.records if "recompiled" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert name in warnings[0] and "dynamic=True" in warnings[0] and "mark_dynamic" in warnings[0]


def test_dynamic_compiles_do_not_warn(warm_cache, monkeypatch, caplog):
    monkeypatch.setenv("DICP_RECOMPILE_WARN_LIMIT", "1")
    monkeypatch.setattr(utils, "_logged_once", set())
    caplog.set_level(logging.WARNING, logger="dicp")
    fn = compiled(block, dynamic=True)
    for n in range(2, 6):
        fn(torch.randn(3, n))
    assert not [r for r in caplog.records if "recompiled" in r.getMessage()]


def test_dynamic_compiles_after_resets_do_not_warn(warm_cache, monkeypatch, caplog):
    """Each trace after torch._dynamo.reset() names its size symbols afresh; that is no
    change of static shape, and the warning told users already on dynamic=True to use it."""
    monkeypatch.setenv("DICP_RECOMPILE_WARN_LIMIT", "1")
    monkeypatch.setattr(utils, "_logged_once", set())
    caplog.set_level(logging.WARNING, logger="dicp")
    for n in range(2, 6):
        compiled(block, dynamic=True)(torch.randn(n + 1, n))  # compiled() resets dynamo
    assert not [r for r in caplog.records if "recompiled" in r.getMessage()]


def test_a_reset_starts_the_recompile_counts_afresh(warm_cache, monkeypatch, caplog):
    """A loop that resets dynamo and compiles one function at several static sizes compiles
    it once per reset: no recompile is counted or warned about."""
    monkeypatch.setenv("DICP_RECOMPILE_WARN_LIMIT", "1")
    monkeypatch.setattr(utils, "_logged_once", set())
    caplog.set_level(logging.WARNING, logger="dicp")
    with profile.collect() as stats:
        for n in range(2, 7):
            compiled(block, dynamic=False)(torch.randn(3, n))  # compiled() resets dynamo
    assert sum(stats.compiles.values()) == 5 and stats.recompiles == {}
    assert not [r for r in caplog.records if "recompiled" in r.getMessage()]


def test_stats_is_a_snapshot():
    snapshot = dicp.stats()
    snapshot.counters["graphs (forward)"] += 1000
    assert dicp.stats().counters["graphs (forward)"] < snapshot.counters["graphs (forward)"]


SCRIPT = """
    import torch
    f = torch.compile(lambda x: torch.tanh(x).sum(), backend="new_backendgraph")
    f(torch.randn(8))
    print("done")
"""


def test_dicp_profile_prints_the_table_at_exit(tmp_path):
    result = run_fresh(SCRIPT, tmp_path, DICP_PROFILE="1")
    assert result.returncode == 0, result.stderr[-3000:]
    table = result.stderr[result.stderr.index("dicp compile profile") :]
    for row in (
        "dynamo",
        "aot_autograd",
        "conversion",
        "shape_inference",
        "codegen",
        "build",
        "load",
        "total",
        "graphs (inference)",
        "kernels",
        "compiles per function",
    ):
        assert row in table, table


def test_no_table_without_dicp_profile(tmp_path):
    assert "dicp compile profile" not in run_fresh(SCRIPT, tmp_path).stderr


def test_torch_logs_shows_each_graph(tmp_path):
    result = run_fresh(SCRIPT, tmp_path, TORCH_LOGS="dicp.profile")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "new_backendgraph_inference_0: conversion" in result.stderr, result.stderr[-3000:]


def _profiled_events(fn, *inputs):
    from torch.profiler import ProfilerActivity, profile as torch_profile

    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        result = fn(*inputs)
        result.sum().backward()
    return result, [event.key for event in prof.key_averages()]


def test_profile_kernels_names_each_call_in_torch_profiler(cold_cache, monkeypatch):
    """DICP_PROFILE_KERNELS=1: each kernel and library call of the forward and backward graphs
    is a torch.profiler range named for its graph, call and ATen op; results stay eager's."""
    monkeypatch.setenv("DICP_PROFILE_KERNELS", "1")
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.GELU())
    x = torch.randn(5, 8)
    result, events = _profiled_events(compiled(model), x)
    torch.testing.assert_close(result, model(x))
    kernels = [e for e in events if "/kernel_" in e]
    assert any(e.startswith("new_backendgraph_forward_") for e in kernels), events
    assert any(e.startswith("new_backendgraph_backward_") for e in kernels), events
    # each names the ATen op whose lowering built it, or the graph's output
    assert all(" aten." in e or e.endswith(" graph output") for e in kernels), kernels
    assert any(" library Addmm " in e for e in events), events


def test_without_profile_kernels_no_call_is_named(cold_cache):
    _, events = _profiled_events(
        compiled(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU())), torch.randn(5, 8)
    )
    assert not [e for e in events if e.startswith("new_backendgraph_")], events
