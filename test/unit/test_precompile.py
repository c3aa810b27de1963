"""torch's precompile with dicp: aot_compile -> save_compiled_function in one process (real g++),
torch.compiler.load_compiled_function in another with an empty dicp cache and no C++ compiler,
compared with eager. Also: torch's AOTAutogradCache (which aot_compile consults) must not hand
a graph compiled under other dicp knobs to a later aot_compile.
"""

import json
import os
import sys

import pytest
import torch

from .helpers import check_fresh, cold_cache  # noqa: F401  (fixture)

# Functions and inputs both scripts build the same way (seeded).
COMMON = """
import json, os, sys, torch
torch.manual_seed(0)
CASE = os.environ["CASE"]
DEVICE = os.environ.get("DEVICE", "cpu")
if DEVICE == "emu":
    import dicp.emu  # the device's runtime, as a vendor's package registers theirs

def pointwise(x, y):
    return (x * y).sin() + y.sum(dim=1, keepdim=True) / 3

def training(x, w):
    return ((x.sin() * w).sum(dim=1) + w.exp().mean()).tanh()

def with_constant(x, y):  # tensor constants in the graph travel with the artifact
    return (x * y).index_put((torch.tensor([0, 2, 2]),), torch.tensor(3.0))

FUNCTIONS = {"inference": pointwise, "training": training, "dynamic": pointwise,
             "constant": with_constant}

def inputs(rows):
    x = torch.randn(rows, 5).to(DEVICE)
    w = torch.randn(rows, 5).to(DEVICE).requires_grad_(CASE == "training")
    return x, w

def on_device(tensors):  # each checked to be on DEVICE, copied to the host
    assert all(t.device.type == DEVICE for t in tensors), [t.device for t in tensors]
    return [t.cpu() for t in tensors]

def outputs(fn, args):
    out = fn(*args)
    if not args[1].requires_grad:
        return [out]
    out.sum().backward()
    grad = args[1].grad
    args[1].grad = None
    return [out.detach(), grad]
"""

SAVE = (
    COMMON
    + """
fn = FUNCTIONS[CASE]
compiled = torch.compile(fn, fullgraph=True, backend=os.environ["BACKEND"],
                         dynamic=CASE == "dynamic").aot_compile((inputs(6), {}))
compiled.save_compiled_function(os.environ["ARTIFACT"])
args = inputs(6)
pairs = zip(on_device(outputs(compiled, args)), on_device(outputs(fn, args)))
ok = all(torch.allclose(a, b, atol=1e-5) for a, b in pairs)
print(json.dumps({"ok": ok}))
"""
)

LOAD = (
    COMMON
    + """
import shutil
from dicp.bridge.cache.build import cache_stats
assert shutil.which("g++") is None and shutil.which("c++") is None, "a compiler is reachable"
with open(os.environ["ARTIFACT"], "rb") as f:
    compiled = torch.compiler.load_compiled_function(f)
fn = FUNCTIONS[CASE]
rows = [6, 3, 11] if CASE == "dynamic" else [6]
ok = []
for n in rows:
    args = inputs(n)
    got, want = on_device(outputs(compiled, args)), on_device(outputs(fn, args))
    ok.append(all(torch.allclose(a, b, atol=1e-5) for a, b in zip(got, want)))
libraries = list(os.path.join(d, f) for d, _, files in os.walk(os.environ["DICP_CACHE_DIR"])
                 for f in files if f.endswith(".so"))
print(json.dumps({"ok": ok, "builds": cache_stats()["builds"], "libraries": len(libraries)}))
"""
)

NO_COMPILER = {
    "DICP_CXX": "/nonexistent/dicp-no-compiler",
    "CXX": "/nonexistent/c++",
    "PATH": os.path.dirname(sys.executable),
}


def _save_and_load(tmp_path, case, backend="new_backendgraph", device="cpu"):
    artifact = str(tmp_path / f"{case}.pt2")
    env = {
        "CASE": case,
        "ARTIFACT": artifact,
        "BACKEND": backend,
        "DEVICE": device,
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),
    }
    saved = json.loads(check_fresh(SAVE, tmp_path / "save-cache", **env))
    assert saved == {"ok": True}
    empty = tmp_path / "load-cache"
    assert not empty.exists()
    env["TORCHINDUCTOR_CACHE_DIR"] = str(tmp_path / "inductor-load")  # empty too
    loaded = json.loads(check_fresh(LOAD, empty, **env, **NO_COMPILER))
    return loaded


# torch 2.11's compiled functions have no aot_compile (2.13 and 2.15 do): nothing to test there
HAS_AOT_COMPILE = hasattr(torch.compile(lambda x: x), "aot_compile")


@pytest.mark.skipif(
    not HAS_AOT_COMPILE, reason=f"torch {torch.__version__}: compiled functions have no aot_compile"
)
@pytest.mark.parametrize("case", ["inference", "training", "dynamic", "constant"])
def test_precompiled_function_loads_without_cache_or_compiler(case, tmp_path):
    loaded = _save_and_load(tmp_path, case)
    assert all(loaded["ok"]) and loaded["ok"], loaded
    assert loaded["builds"] == 0
    assert loaded["libraries"] >= 1  # the kernels came from the artifact into the cache


@pytest.mark.skipif(
    not HAS_AOT_COMPILE, reason=f"torch {torch.__version__}: compiled functions have no aot_compile"
)
@pytest.mark.parametrize("case", ["inference", "training", "dynamic", "constant"])
def test_a_precompiled_emugraph_function_loads_onto_the_device(case, tmp_path):
    """emugraph's artifact in a process with the device's runtime (built, as a vendor's comes
    installed: run_fresh shares it) and no compiler: the kernels come from the artifact, its
    outputs (and gradients) are on emu and match eager."""
    loaded = _save_and_load(tmp_path, case, backend="emugraph", device="emu")
    assert all(loaded["ok"]) and loaded["ok"], loaded
    assert loaded["builds"] == 0


# torch's AOTAutogradCache holding dicp graphs (what torch.compile does with these two flags
# on): a graph compiled under an injected wrong result must not be reused by a process with
# other dicp knobs; one with the same knobs reuses it (so the miss is the key's doing).
AUTOGRAD_CACHE = (
    COMMON
    + """
from torch._dynamo.utils import counters
torch._functorch.config.force_autograd_cache = True
torch._functorch.config.bundled_autograd_cache = True
args = inputs(6)
compiled = torch.compile(pointwise, backend="new_backendgraph")
ok = torch.allclose(compiled(*args), pointwise(*args), atol=1e-5)
print(json.dumps({"ok": ok, "hit": counters["aot_autograd"]["autograd_cache_hit"]}))
"""
)


def test_autograd_cache_does_not_cross_dicp_knobs(tmp_path):
    env = {"CASE": "inference", "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    fault = {"DICP_INJECT_BUG_TESTING_ONLY": "aten.mul.Tensor:accuracy"}
    runs = [
        json.loads(check_fresh(AUTOGRAD_CACHE, tmp_path / name, **env, **extra))
        for name, extra in (("a", fault), ("b", {}), ("c", {}), ("d", fault))
    ]
    assert runs == [
        {"ok": False, "hit": 0},  # the injected fault shows
        {"ok": True, "hit": 0},  # other knobs: torch's cache misses
        {"ok": True, "hit": 1},  # same knobs: it hits
        {"ok": False, "hit": 1},
    ]
