"""The graph cache: a warm process reuses conversion and codegen; anything that changes the
output misses. Each run is a fresh interpreter sharing one DICP_CACHE_DIR; the scenarios try
to get a false hit (a knob, a conversion-table entry, a dtype, a version) and fail on one.
"""

import json

import pytest
import torch

from dicp import config as dicp_config

from .helpers import (
    CACHE_TEST_BACKEND,
    DAMAGES,
    check_fresh,
    cold_cache,  # noqa: F401
    compiled,
    damage_entry,
    first_runs,  # noqa: F401
    scenario_runs,
)

SCRIPT = (
    CACHE_TEST_BACKEND
    + """
def f(x, y):
    return ((x * y).sin() + y.sum(dim=1, keepdim=True)).sum(dim=0)

if os.environ.get("THREADS"):
    torch.set_num_threads(int(os.environ["THREADS"]))
torch.manual_seed(0)
dtype = getattr(torch, os.environ.get("DTYPE", "float32"))
train = bool(os.environ.get("TRAIN"))
x = torch.randn(6, 5, dtype=dtype)
y = torch.randn(6, 5, dtype=dtype, requires_grad=train)
got = torch.compile(f, backend=backend)(x, y)
want = f(x, y)
ok = torch.allclose(got, want, atol=1e-5)
if train:
    (g_got,), (g_want,) = torch.autograd.grad(got.sum(), [y]), torch.autograd.grad(want.sum(), [y])
    ok = ok and torch.allclose(g_got, g_want, atol=1e-5)
print(json.dumps({"ok": ok, **graph_cache_stats(), "builds": cache_stats()["builds"]}))
"""
)

FAULT = {"DICP_INJECT_BUG_TESTING_ONLY": "aten.mul.Tensor:accuracy"}


def run(cache, **env):
    # the AOT cache (test_aot_cache.py) would take these graphs before the graph cache sees them
    return json.loads(check_fresh(SCRIPT, cache, DICP_AOT_CACHE="0", **env))


@pytest.mark.parametrize("train", [False, True])
def test_warm_process_reuses_codegen_and_builds_nothing(first_runs, cold_cache, train):
    env = {"TRAIN": "1"} if train else {}
    cold = first_runs.into(cold_cache, run, **env)
    graphs = 2 if train else 1  # forward and backward, or inference
    assert (
        cold
        == {
            "ok": True,
            "hits": 0,
            "misses": graphs,
            "stores": graphs,
            "rejected": 0,
            "builds": cold["builds"],
        }
        and cold["builds"] >= 1
    )
    warm = run(cold_cache, **env)
    assert warm == {
        "ok": True,
        "hits": graphs,
        "misses": 0,
        "stores": 0,
        "rejected": 0,
        "builds": 0,
    }


@pytest.mark.parametrize("knob", ["DICP_PROFILE", "DICP_RECOMPILE_WARN_LIMIT"])
def test_a_reporting_knob_still_hits(first_runs, cold_cache, knob):
    assert first_runs.into(cold_cache, run)["stores"] == 1
    warm = run(cold_cache, **{knob: "1" if knob == "DICP_PROFILE" else "9"})
    assert warm["hits"] == 1 and warm["misses"] == 0 and warm["builds"] == 0, warm


# (first run's env, its expected correctness) -> the second run must be right and miss.
SCENARIOS = {
    "knob": (FAULT, {}),
    "knob, other order": ({}, FAULT),
    "conversion table": ({"WRONG_MUL": "1"}, {}),
    "conversion table, other order": ({}, {"WRONG_MUL": "1"}),
    "dtype": ({}, {"DTYPE": "float64"}),
    "dicp version": ({"FAKE_DICP_VERSION": "0.0.1"}, {"FAKE_DICP_VERSION": "0.0.2"}),
    # the backend's process state: its convolutions' layouts follow ATen's algorithm, which
    # follows the thread count
    "threads": ({"THREADS": "2"}, {"THREADS": "1"}),
    "threads, other order": ({"THREADS": "1"}, {"THREADS": "2"}),
}
WRONG = ({"WRONG_MUL": "1"}, FAULT)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_a_change_that_affects_output_misses(first_runs, cold_cache, scenario):
    first, second = SCENARIOS[scenario]
    results = scenario_runs(first_runs, run, cold_cache, first, second, WRONG)
    assert results[0]["stores"] == 1
    assert results[1]["hits"] == 0 and results[1]["misses"] == 1, results[1]


@pytest.mark.parametrize("damage", DAMAGES)
def test_corrupt_entry_is_rebuilt(first_runs, cold_cache, damage):
    assert first_runs.into(cold_cache, run)["stores"] == 1
    (entry,) = (cold_cache / "graphs").rglob("*.pkl")
    damage_entry(entry, damage)
    again = run(cold_cache)
    assert again["ok"] and again["hits"] == 0 and again["stores"] == 1, again
    assert again["rejected"] == 1


def test_knob_change_in_one_process_misses(cold_cache):
    def f(x):
        return (x * 3).cos()

    x = torch.randn(7, 3)
    assert torch.allclose(compiled(f)(x), f(x), atol=1e-5)
    with dicp_config.patch(inject_bug_testing_only="aten.mul.Tensor:accuracy"):
        assert not torch.allclose(compiled(f)(x), f(x), atol=1e-5)
    assert torch.allclose(compiled(f)(x), f(x), atol=1e-5)


def test_hit_in_the_same_process_keeps_tensor_constants_real(cold_cache):
    # a graph holding a tensor constant, compiled twice: the second compile is a cache hit
    # inside the compile's fake mode, which must not turn the constant into a fake tensor
    def f(x, i):
        return x.index_put((i,), torch.tensor(3.0)) * 2

    x, i = torch.randn(5, 4), torch.tensor([0, 3, 3])
    from dicp.bridge.cache.graph import graph_cache_stats

    for _ in range(2):
        before = graph_cache_stats()["hits"]
        with dicp_config.patch(aot_cache=False):  # which would take the second compile
            torch.testing.assert_close(compiled(f)(x, i), f(x, i))
    assert graph_cache_stats()["hits"] == before + 1


def test_an_entry_that_does_not_fit_its_graph_is_compiled_again(cold_cache):
    """A stored graph whose inputs or outputs differ from the graph looking it up is refused
    at load, logged and counted, never called."""
    from dicp.bridge.cache import graph as graph_cache

    fn = compiled(lambda a, b: (a * b).sin() + 1)
    x, y = torch.randn(4, 3), torch.randn(4, 3)
    torch.testing.assert_close(fn(x, y), (x * y).sin() + 1)
    (entry,) = (cold_cache / "graphs").rglob("*.pkl")
    key = entry.stem
    stored = graph_cache.lookup(key, _graph_of_arity(2, 1), None)
    assert stored is not None and stored.arity == (2, 1)
    before = graph_cache.graph_cache_stats()["rejected"]
    assert graph_cache.lookup(key, _graph_of_arity(3, 1), None) is None
    assert graph_cache.lookup(key, _graph_of_arity(2, 2), None) is None
    assert graph_cache.graph_cache_stats()["rejected"] == before + 2


def _graph_of_arity(inputs, outputs):
    graph = torch.fx.Graph()
    args = [graph.placeholder(f"x{i}") for i in range(inputs)]
    graph.output(tuple(args[:1] * outputs))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


GUARDING_BACKEND = """
import dataclasses, json, torch
import dicp.vendor.new_backendGraph as nb
from dicp.api import compile_fx, register_backend
from dicp.bridge.cache.aot import aot_cache_stats
from dicp.bridge.cache.graph import graph_cache_stats

def guarding_transform(gm, ctx):
    # a vendor pass that specializes on a size: the bool() adds the guard s0 > 5 to the shape
    # environment, which AOTAutograd's trace of `f` never needed
    values = [n.meta["val"] for n in gm.graph.find_nodes(op="placeholder")]
    first = next(v for v in values if isinstance(v, torch.Tensor))
    bool(first.shape[0] > 5)
    return nb.BACKEND.opset_transform(gm, ctx)

GUARDING = register_backend(dataclasses.replace(nb.BACKEND, name="guarding",
                                                 opset_transform=guarding_transform))
compiles = []

def backend(gm, example_inputs):
    compiles.append(gm)
    return compile_fx(gm, example_inputs, GUARDING)

fn = torch.compile(lambda x: (x * 2).sin(), backend=backend, dynamic=True)
ok = all(torch.allclose(fn(x), (x * 2).sin()) for x in (torch.randn(8), torch.randn(3)))
print(json.dumps({"ok": ok, "compiles": len(compiles), "graphs": graph_cache_stats(),
                  "aot": aot_cache_stats()}))
"""


@pytest.mark.parametrize("cache", ["graphs", "aot"])
def test_a_hit_adds_the_shape_guards_its_compile_added(cold_cache, cache):
    """A backend's pass guards on a size (s0 > 5) that AOTAutograd's trace did not: the cold
    process recompiles at size 3. A warm process skipped the pass on its hit, so dynamo did
    not guard the frame and ran size 3 on code compiled for sizes above 5; a hit now adds the
    guards its compile added. With the AOT cache off the hit is the graph cache's; with it on,
    the AOT cache's (its entry holds the pass's guard too)."""
    aot_on = {"DICP_AOT_CACHE": "1" if cache == "aot" else "0"}
    cold = json.loads(check_fresh(GUARDING_BACKEND, cold_cache, **aot_on))
    warm = json.loads(check_fresh(GUARDING_BACKEND, cold_cache, **aot_on))
    assert cold["ok"] and cold["compiles"] == 2, cold
    assert warm[cache]["hits"] >= 1, warm
    assert (warm["ok"], warm["compiles"]) == (True, cold["compiles"]), warm


def test_a_conversion_table_changed_in_place_changes_the_key():
    """The table's fingerprint is kept between keys (it cost each 1.5 ms): an entry replaced in
    place, or added, must still change it, and putting it back must give the first one again."""
    import dataclasses

    import dicp.vendor.new_backendGraph as nb
    from dicp.bridge.cache.graph import backend_fingerprint

    backend = dataclasses.replace(nb.BACKEND, conversions=dict(nb.BACKEND.conversions))
    table, mul, add = backend.conversions, torch.ops.aten.mul.Tensor, torch.ops.aten.add.Tensor
    first = backend_fingerprint(backend)
    converter = table[mul]
    table[mul] = table[add]
    replaced = backend_fingerprint(backend)
    table[mul] = converter
    assert backend_fingerprint(backend) == first
    table[torch.ops.aten.frac.default] = table[add]
    assert len({first, replaced, backend_fingerprint(backend)}) == 3
