"""The AOT cache: a warm process takes AOTAutograd's whole result from the cache, compiling no
graph and building nothing; anything that changes the result misses. Each run is a fresh
interpreter sharing one DICP_CACHE_DIR (and one torch cache directory); the scenarios try to
get a false hit and fail on one.
"""

import json

import pytest
import torch

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
if os.environ.get("DEFAULT_DTYPE"):
    torch.set_default_dtype(getattr(torch, os.environ["DEFAULT_DTYPE"]))
if os.environ.get("THREADS"):
    torch.set_num_threads(int(os.environ["THREADS"]))

def f(x, y):  # torch.ones takes the default dtype when AOTAutograd traces it
    return ((x * y).sin() + y.sum(dim=1, keepdim=True)).sum(dim=0) + torch.ones(5)

def inputs():
    torch.manual_seed(0)
    dtype = getattr(torch, os.environ.get("DTYPE", "float32"))
    rows = int(os.environ.get("ROWS", "6"))
    base = torch.randn(2, rows, 5, dtype=dtype)
    x = base[0]
    if os.environ.get("ALIAS"):
        y = base[1]  # x and y share a storage
    elif os.environ.get("TRANSPOSED"):
        y = torch.randn(5, rows, dtype=dtype).t()
    else:
        y = base[1].clone()
    return x, y.requires_grad_(bool(os.environ.get("TRAIN")))

grad_mode = torch.no_grad() if os.environ.get("NO_GRAD") else torch.enable_grad()
dynamic = True if os.environ.get("DYNAMIC") else None
with grad_mode:
    x, y = inputs()
    got = torch.compile(f, backend=backend, dynamic=dynamic)(x, y)
    x2, y2 = inputs()
    want = f(x2, y2)
ok = got.dtype == want.dtype and torch.allclose(got, want, atol=1e-5)
if y.requires_grad and got.requires_grad:
    (g_got,), (g_want,) = torch.autograd.grad(got.sum(), [y]), torch.autograd.grad(want.sum(), [y2])
    ok = ok and torch.allclose(g_got, g_want, atol=1e-5)
print(json.dumps({"ok": ok, "aot": aot_cache_stats(), "graphs": graph_cache_stats(),
                  "builds": cache_stats()["builds"]}))
"""
)

FAULT = {"DICP_INJECT_BUG_TESTING_ONLY": "aten.mul.Tensor:accuracy"}


def run(cache, **env):
    return json.loads(check_fresh(SCRIPT, cache, **env))


@pytest.mark.parametrize("train", [False, True])
def test_warm_process_compiles_no_graph_and_builds_nothing(first_runs, cold_cache, train):
    env = {"TRAIN": "1"} if train else {}
    cold = first_runs.into(cold_cache, run, **env)
    assert cold["ok"] and cold["aot"] == {"hits": 0, "misses": 1, "stores": 1, "rejected": 0}
    graphs = 2 if train else 1  # forward and backward (compiled with it), or inference
    assert cold["graphs"]["misses"] == graphs and cold["builds"] >= 1, cold
    warm = run(cold_cache, **env)
    assert warm == {
        "ok": True,
        "aot": {"hits": 1, "misses": 0, "stores": 0, "rejected": 0},
        "graphs": {"hits": 0, "misses": 0, "stores": 0, "rejected": 0},
        "builds": 0,
    }


def test_a_warm_dynamic_graph_compiles_no_graph_and_builds_nothing(cold_cache):
    cold = run(cold_cache, DYNAMIC="1", TRAIN="1")
    assert cold["ok"] and cold["aot"]["stores"] == 1 and cold["graphs"]["misses"] == 2, cold
    warm = run(cold_cache, DYNAMIC="1", TRAIN="1")
    assert warm == {
        "ok": True,
        "aot": {"hits": 1, "misses": 0, "stores": 0, "rejected": 0},
        "graphs": {"hits": 0, "misses": 0, "stores": 0, "rejected": 0},
        "builds": 0,
    }


GUARDS = (
    CACHE_TEST_BACKEND
    + """
import torch.nn.functional as F

def f(x):  # AOTAutograd's avg_pool1d with ceil_mode adds shape guards over the width
    return F.avg_pool1d(x[None], 3, 2, ceil_mode=True)[0]

compiled = torch.compile(f, backend=backend, dynamic=True)
results = [compiled(torch.arange(7.0 * width).reshape(7, width)).tolist() for width in (9, 3, 5)]
print(json.dumps({"results": results, "aot": aot_cache_stats()}))
"""
)


def test_a_dynamic_hit_adds_the_shape_guards_its_compile_added(cold_cache):
    """The cold process compiles width 9, then again for width 3, which fails a guard that
    AOTAutograd added; a warm process must recompile where the cold one did (a hit that did
    not add the guards reused the width-9 graph for width 3: one hit), with the same results."""
    cold = json.loads(check_fresh(GUARDS, cold_cache))
    assert cold["aot"]["misses"] == 2 and cold["aot"]["stores"] == 2, cold
    warm = json.loads(check_fresh(GUARDS, cold_cache))
    assert warm["results"] == cold["results"], (cold, warm)
    assert warm["aot"] == {"hits": 2, "misses": 0, "stores": 0, "rejected": 0}, warm


# (first run's env, second run's env): the second run must miss, and both be right unless
# their env is WRONG (a fault or a wrong conversion, which must show).
SCENARIOS = {
    "knob": (FAULT, {}),
    "knob, other order": ({}, FAULT),
    "conversion table": ({"WRONG_MUL": "1"}, {}),
    "dtype": ({}, {"DTYPE": "float64"}),
    "shape": ({}, {"ROWS": "7"}),
    "strides": ({}, {"TRANSPOSED": "1"}),
    "inputs sharing a storage": ({}, {"ALIAS": "1"}),
    "requires_grad": ({}, {"TRAIN": "1"}),
    "grad mode": ({"TRAIN": "1"}, {"TRAIN": "1", "NO_GRAD": "1"}),
    "default dtype": ({}, {"DEFAULT_DTYPE": "float64"}),
    "threads (the backend's process state)": ({"THREADS": "2"}, {"THREADS": "1"}),
}
WRONG = ({"WRONG_MUL": "1"}, FAULT)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_a_change_that_affects_the_result_misses(first_runs, cold_cache, scenario):
    first, second = SCENARIOS[scenario]
    results = scenario_runs(first_runs, run, cold_cache, first, second, WRONG)
    assert results[0]["aot"]["stores"] == 1
    assert results[1]["aot"]["hits"] == 0 and results[1]["aot"]["misses"] == 1, results[1]


@pytest.mark.parametrize("damage", DAMAGES)
def test_corrupt_entry_is_compiled_again(first_runs, cold_cache, damage):
    assert first_runs.into(cold_cache, run)["aot"]["stores"] == 1
    (entry,) = (cold_cache / "aot").rglob("*.pkl")
    damage_entry(entry, damage)
    again = run(cold_cache)
    assert again["ok"] and again["aot"]["hits"] == 0 and again["aot"]["stores"] == 1, again
    assert again["aot"]["rejected"] == 1


def test_two_graphs_in_one_process_never_share_an_entry(cold_cache):
    """Same input layouts, different code: each graph gets its own result (a key that did
    not depend on the graph, such as one drawn from Python's random state, which dynamo
    restores around each compile, handed the second graph the first one's)."""
    x, y = torch.randn(4, 3), torch.randn(4, 3)
    for fn in (lambda a, b: a * b + 1, lambda a, b: a - b * 2, lambda a, b: (a + b).exp()):
        torch.testing.assert_close(compiled(fn)(x, y), fn(x, y))


def test_off_where_torch_caches_are_off(cold_cache):
    from dicp.bridge.cache.aot import aot_cache_stats

    before = aot_cache_stats()
    with torch.compiler.config.patch(force_disable_caches=True):
        x = torch.randn(4, 3)
        torch.testing.assert_close(compiled(lambda a: a * 3 + 1)(x), x * 3 + 1)
    assert aot_cache_stats() == before


def test_a_graph_calling_a_module_gets_no_key():
    """A submodule's parameters and state are not in the key: such a graph is not cached."""
    from dicp.bridge.cache import aot as aot_cache
    from dicp.api import get_backend

    gm = torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.Linear(3, 2)))
    assert any(node.op == "call_module" for node in gm.graph.nodes)
    assert aot_cache.key(gm, [torch.randn(4, 3)], get_backend("new_backendgraph")) is None


OPTIMIZER_STEP = (
    CACHE_TEST_BACKEND
    + """
import torch.nn.functional as F
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
opt = getattr(torch.optim, os.environ["OPTIMIZER"])(model.parameters(), lr=0.1)

def step(x, y):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()  # dynamo registers the parameters and the optimizer's state on its graph
    opt.zero_grad()
    return loss.detach()

step = torch.compile(step, backend=backend)
x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
losses = [step(x, y).item() for _ in range(3)]
print(json.dumps({"losses": losses, "params": [p.tolist() for p in model.parameters()],
                  "aot": aot_cache_stats()}))
"""
)


@pytest.mark.parametrize("optimizer", ["SGD", "Adam"])
def test_a_warm_optimizer_step_equals_the_cold_one(cold_cache, optimizer):
    """The optimizer's graph holds the parameters and state as attributes, which AOTAutograd
    lifts to inputs ahead of dynamo's: a warm process hit the entry, called it without them
    and crashed (SGD: 'expected 8, got 4'; Adam: IndexError)."""
    cold = json.loads(check_fresh(OPTIMIZER_STEP, cold_cache, OPTIMIZER=optimizer))
    warm = json.loads(check_fresh(OPTIMIZER_STEP, cold_cache, OPTIMIZER=optimizer))
    assert cold["aot"]["stores"] >= 2 and warm["aot"]["hits"] == cold["aot"]["stores"], warm
    assert (warm["losses"], warm["params"]) == (cold["losses"], cold["params"])


def test_an_entry_that_does_not_fit_its_caller_is_compiled_again(cold_cache):
    """A hit whose result takes other inputs than its caller passes is refused at load,
    logged and counted, never called."""
    from dicp.bridge.cache import aot as aot_cache

    seen = {}

    def remember(gm, example_inputs):
        from dicp.bridge.entry import compile_fx

        seen["key"] = aot_cache.key(gm, example_inputs, get_backend("new_backendgraph"))
        seen["gm"], seen["inputs"] = gm, example_inputs
        return compile_fx(gm, example_inputs, get_backend("new_backendgraph"))

    from dicp.api import get_backend

    torch._dynamo.reset()
    x = torch.randn(4, 3)
    torch.testing.assert_close(torch.compile(lambda a: a * 2 + 1, backend=remember)(x), x * 2 + 1)
    other = torch.fx.GraphModule(torch.nn.Module(), seen["gm"].graph)
    other.weight = torch.nn.Parameter(torch.randn(3))  # a caller that would pass two inputs
    before = aot_cache.aot_cache_stats()["rejected"]
    assert aot_cache.lookup(seen["key"], other, seen["inputs"]) is None
    assert aot_cache.aot_cache_stats()["rejected"] == before + 1
    assert aot_cache.lookup(seen["key"], seen["gm"], seen["inputs"]) is not None


FLOAT_RESTART = (
    CACHE_TEST_BACKEND
    + """
import torch.nn.functional as F

def f(x, eps):  # AOTAutograd cannot compute layer_norm's eps as a tensor: dynamo restarts
    return F.layer_norm(x, (x.shape[-1],), eps=eps) * 2

compiled = torch.compile(f, backend=backend, dynamic=True)
x = torch.randn(3, 5, 6)
ok = True
for eps in map(float, os.environ["EPS"].split(",")):
    ok = ok and torch.allclose(compiled(x, eps), f(x, eps), atol=1e-5)
print(json.dumps({"ok": ok, "aot": aot_cache_stats(), "builds": cache_stats()["builds"]}))
"""
)


def test_a_warm_process_asks_dynamo_for_the_restart_without_tracing(cold_cache):
    """A dynamic graph with a float input that AOTAutograd's tensorify pass cannot keep makes
    dynamo trace again with the float specialized: the cold process stores that restart, a
    warm one asks for it from the entry (a hit, no store) and builds nothing; a float value
    the cold process never saw compiles its own graph, and every result matches eager."""
    cold = json.loads(check_fresh(FLOAT_RESTART, cold_cache, EPS="1e-5"))
    assert cold["ok"] and cold["aot"]["stores"] == 2, cold  # the restart, then the graph
    warm = json.loads(check_fresh(FLOAT_RESTART, cold_cache, EPS="1e-5"))
    assert warm == {
        "ok": True,
        "aot": {"hits": 2, "misses": 0, "stores": 0, "rejected": 0},
        "builds": 0,
    }
    other = json.loads(check_fresh(FLOAT_RESTART, cold_cache, EPS="1e-5,0.25"))
    assert other["ok"] and other["aot"]["misses"] == 1 and other["aot"]["stores"] == 1, other


def test_a_restart_dynamo_asked_for_already_compiles_the_graph(cold_cache):
    """A stored restart whose floats dynamo has specialized already does not apply: the retrace
    made the same graph (the tensorify pass names every float of the shape environment, some
    no input of the graph), which then compiles, as in the cold process. Taken again, it made
    dynamo restart 100 times and run the frame eagerly (an OpInfo case of sigmoid)."""
    from dicp.bridge.cache import aot as aot_cache
    from dicp.bridge.pipeline.torch_compat import restart_specializing, tensorify_restart_type

    torch._dynamo.reset()  # no float specialized yet
    gm, inputs, key = torch.fx.symbolic_trace(lambda x: x + 1), [torch.randn(3)], "ab" * 32
    with pytest.raises(tensorify_restart_type()), aot_cache.restarts_stored(key):
        restart_specializing(["zf7"])  # as the tensorify pass does
    before = aot_cache.aot_cache_stats()
    assert aot_cache.lookup(key, gm, inputs) is None  # zf7 is specialized: a miss
    torch._dynamo.reset()
    with pytest.raises(tensorify_restart_type()):
        aot_cache.lookup(key, gm, inputs)  # a new frame: the restart is asked for
    after = aot_cache.aot_cache_stats()
    assert (after["misses"] - before["misses"], after["hits"] - before["hits"]) == (1, 1)
