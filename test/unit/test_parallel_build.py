"""A graph with more kernels than one source holds (KERNELS_PER_SOURCE) is built from several
sources at once: every kernel is found and right, with and without bounds checks, and a warm
process builds nothing."""

import json

import pytest
import torch

from dicp.vendor.new_backendGraph.codegen.cpp_codegen import KERNELS_PER_SOURCE

from .helpers import check_fresh, cold_cache, compiled, kernel_count  # noqa: F401  (fixture)


def many_kernels(x):
    """A softmax per step along alternating dims: each is a kernel of its own."""
    for step in range(KERNELS_PER_SOURCE + 9):
        x = torch.softmax(x * 1.5, dim=step % 2)
    return x


@pytest.mark.parametrize("bounds_check", ["0", "1"])
def test_kernels_from_several_sources_are_all_right(cold_cache, monkeypatch, bounds_check):
    monkeypatch.setenv("DICP_BOUNDS_CHECK", bounds_check)
    x = torch.randn(5, 7, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(compiled(many_kernels)(x), many_kernels(x))
    sources = list(cold_cache.glob("kernels/*/*.cpp"))
    assert len(sources) >= 2, "the graph was built from one source"
    assert kernel_count(cold_cache) > KERNELS_PER_SOURCE


SCRIPT = """
import json, torch
import dicp
from dicp.bridge.cache.build import cache_stats
from test.unit.test_parallel_build import many_kernels
x = torch.randn(5, 7, generator=torch.Generator().manual_seed(0))
ok = torch.allclose(torch.compile(many_kernels, backend="new_backendgraph")(x), many_kernels(x),
                    atol=1e-6)
print(json.dumps({"ok": ok, "builds": cache_stats()["builds"]}))
"""


def test_warm_process_builds_none_of_the_sources(cold_cache):
    cold = json.loads(check_fresh(SCRIPT, cold_cache, DICP_AOT_CACHE="0"))
    assert cold["ok"] and cold["builds"] >= 2, cold
    warm = json.loads(check_fresh(SCRIPT, cold_cache, DICP_AOT_CACHE="0"))
    assert warm == {"ok": True, "builds": 0}
