"""Shared helpers for the unit tests: cache isolation, fresh interpreters, compile shortcuts.

Every test gets DICP_CACHE_DIR under pytest's tmp_path (never the user's cache) and every other
DICP_* knob at its default; tests that change a knob do so with monkeypatch.
"""

import copy
import os
import re
import shutil
import subprocess
import sys
import textwrap
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

import dicp.vendor.new_backendGraph
import dicp.vendor.ovgraph  # noqa: F401  (declares its knobs; openvino is imported only to compile)
from dicp import config as dicp_config

from ..common.shared_builds import SHARED, share_runtime_builds

REPO = Path(__file__).resolve().parents[2]
BACKEND = "new_backendgraph"
# Every declared knob except the harness's own (which pick the backend and shape mode).
KNOBS = tuple(k.env for k in dicp_config.knobs() if k.owner != "tests")


def _isolate(monkeypatch, path):
    share_runtime_builds(path)
    for knob in KNOBS:
        monkeypatch.delenv(knob, raising=False)
    monkeypatch.setenv("DICP_CACHE_DIR", str(path))
    # torch's caches too: a miss in dicp's AOT cache consults and fills torch's AOTAutogradCache
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(path / "torch"))
    torch._dynamo.reset()
    return path


@pytest.fixture
def cold_cache(tmp_path, monkeypatch):
    """An empty cache directory for this test only."""
    return _isolate(monkeypatch, tmp_path / "dicp-cache")


_MODULE_ROOTS: dict = {}  # test module name -> its shared cache directory


@pytest.fixture
def warm_cache(request, tmp_path_factory, monkeypatch):
    """A cache directory shared by the tests of one module (they reuse each other's builds)."""
    name = request.module.__name__
    if name not in _MODULE_ROOTS:
        _MODULE_ROOTS[name] = tmp_path_factory.mktemp("dicp-cache")
    return _isolate(monkeypatch, _MODULE_ROOTS[name])


def compiled(fn, dynamic=False):
    """`fn` compiled by new_backendgraph after a dynamo reset."""
    torch._dynamo.reset()
    return torch.compile(fn, backend=BACKEND, dynamic=dynamic)


@pytest.fixture
def dumps(cold_cache, monkeypatch):
    """An empty cache directory with DICP_DEBUG's dumps (wrapper.py, kernels.cpp) in it."""
    monkeypatch.setenv("DICP_DEBUG", "1")
    return cold_cache


@pytest.fixture
def per_kernel_wrapper(cold_cache, monkeypatch):
    """DICP_NATIVE_ENTRY=0: the Python wrapper with a call per kernel, for tests that read its
    buffer plan in the wrapper's text (a native entry runs the same plan in C++)."""
    monkeypatch.setenv("DICP_NATIVE_ENTRY", "0")
    return cold_cache


def wrapper_sources(cache):
    """Every wrapper dumped into `cache` (see dumps), concatenated."""
    return "".join(p.read_text() for p in sorted(cache.glob("debug/*/wrapper.py")))


def allocates(wrapper, sizes=""):
    """Whether the wrapper source `wrapper` allocates a buffer of `sizes` (rendered as a tuple,
    "(8, 1, 1)") on the CPU (empty_strided_cpu) or a device (torch.empty_strided); without
    sizes, whether its code (its imports aside) names empty_strided at all, an eager
    aten.empty_strided call included."""
    code = "\n".join(
        line for line in wrapper.splitlines() if not line.startswith(("from ", "import "))
    )
    if not sizes:
        return "empty_strided" in code
    return re.search(rf"empty_strided(_cpu)?\({re.escape(sizes)}", code) is not None


def kernel_sources(cache):
    """The C++ of every kernel built into the dicp cache directory `cache`, concatenated."""
    return "".join(path.read_text() for path in sorted(cache.glob("kernels/*/*.cpp")))


def kernel_count(cache):
    """How many kernels were built into the dicp cache directory `cache`."""
    return kernel_sources(cache).count('extern "C" void kernel_')


def compiled_and_eager_grads(model, x, loss):
    """The gradients of `loss(model(x))` for `model`'s parameters: compiled by
    new_backendgraph, then eager."""
    loss(compiled(model)(x)).backward()
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    loss(model(x)).backward()
    return got, [p.grad for p in model.parameters()]


def builds():
    from dicp.bridge.cache.build import cache_stats

    return cache_stats()["builds"]


def cause_of(error, kind):
    """The first exception of type `kind` in `error`'s chain (dynamo wraps backend errors)."""
    seen = error
    while seen is not None:
        if isinstance(seen, kind):
            return seen
        seen = getattr(seen, "inner_exception", None) or seen.__cause__ or seen.__context__
    return None


def run_fresh(code, cache_dir, **env):
    """Run `code` in a fresh interpreter (cwd = repo root) with DICP_CACHE_DIR = cache_dir."""
    full_env = {k: v for k, v in os.environ.items() if k not in KNOBS}
    full_env.update(
        DICP_CACHE_DIR=str(share_runtime_builds(cache_dir)),
        TORCHINDUCTOR_CACHE_DIR=str(Path(cache_dir) / "torch"),
    )
    full_env.update(env)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def check_fresh(code, cache_dir, **env):
    """run_fresh, asserting success; returns stdout's last line (the script's verdict)."""
    result = run_fresh(code, cache_dir, **env)
    assert result.returncode == 0, (
        f"fresh interpreter exited with {result.returncode}\n"
        f"stdout:\n{result.stdout}\nstderr:\n{result.stderr[-4000:]}"
    )
    lines = result.stdout.strip().splitlines()
    return lines[-1] if lines else ""


# The start of a fresh-interpreter script testing a cache: `backend`, new_backendgraph
# registered as "cache_test", whose table converts aten.mul to Add when WRONG_MUL is set (a
# changed conversion-table entry), and a dicp version FAKE_DICP_VERSION can change.
CACHE_TEST_BACKEND = """
import dataclasses, json, os, torch
import dicp, dicp.vendor.new_backendGraph as nb
from dicp.api import compile_fx, register_backend
from dicp.bridge.cache.aot import aot_cache_stats
from dicp.bridge.cache.build import cache_stats
from dicp.bridge.cache.graph import graph_cache_stats

dicp.__version__ = os.environ.get("FAKE_DICP_VERSION", dicp.__version__)
table = dict(nb.BACKEND.conversions)
if os.environ.get("WRONG_MUL"):
    table[torch.ops.aten.mul.Tensor] = table[torch.ops.aten.add.Tensor]
CACHE_TEST = register_backend(dataclasses.replace(nb.BACKEND, name="cache_test",
                                                   conversions=table))

def backend(gm, example_inputs):
    return compile_fx(gm, example_inputs, CACHE_TEST)
"""


DAMAGES = ["bytes", "bytes with a matching digest", "no digest"]


def damage_entry(entry: Path, damage: str) -> None:
    """Damage a checked cache entry (entry_store) one of the DAMAGES ways."""
    import hashlib

    digest = entry.with_suffix(".sha256")
    if damage == "no digest":
        digest.unlink()
        return
    entry.write_bytes(entry.read_bytes()[:40] + b"garbage")
    if damage == "bytes with a matching digest":
        digest.write_text(hashlib.sha256(entry.read_bytes()).hexdigest())


class FirstRuns:
    """The first fresh runs of a module's cache tests, each distinct (run, env) once: a test
    whose first run is one already made gets a copy of the cache that run left and its result,
    not a cold interpreter of its own (4-6 s each; most scenarios start from the same one)."""

    def __init__(self, root: Path):
        self.root, self.made = root, {}

    def into(self, cache: Path, run, **env):
        """`run(cache, **env)`'s result, with `cache` holding what that run left in it."""
        key = (run.__module__, run.__qualname__, tuple(sorted(env.items())))
        if key not in self.made:
            folder = self.root / str(len(self.made))
            self.made[key] = folder, run(folder, **env)
        folder, result = self.made[key]
        shutil.copytree(folder, cache, symlinks=True, dirs_exist_ok=True, ignore=_shared_at(folder))
        return copy.deepcopy(result)


def _shared_at(root):
    """copytree's ignore: the runtime-build links at the top (the copy has its own links)."""
    return lambda folder, names: [n for n in names if n in SHARED and Path(folder) == root]


@pytest.fixture(scope="module")
def first_runs(tmp_path_factory):
    return FirstRuns(tmp_path_factory.mktemp("first-runs"))


def scenario_runs(first_runs, run, cache, first_env, second_env, wrong_envs):
    """Two fresh runs sharing `cache` (the first one shared, see FirstRuns); each is right
    unless its env is one of `wrong_envs` (a fault or a wrong conversion, which must show).
    Returns both results."""
    results = [first_runs.into(cache, run, **first_env), run(cache, **second_env)]
    for env, result in zip((first_env, second_env), results):
        assert result["ok"] == (env not in wrong_envs), (env, result)
    return results


@contextmanager
def torch_setting(get, set_to, value):
    """torch's global setting read by `get` and written by `set_to` at `value` inside the
    block (a thread count, deterministic algorithms), back as it was after."""
    before = get()
    set_to(value)
    try:
        yield value
    finally:
        set_to(before)
