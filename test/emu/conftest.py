"""Tests of the emulated device (dicp.emu).

Each test process imports dicp.emu once (the `emu` fixture, for every test of this folder),
building the device's runtime into the cache directory the session started with if this torch
has no build there yet; other processes load that build. Tests that need a process of their
own (a crash, a PrivateUse1 nobody claimed) run code with `run_python`.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import torch._dynamo

from dicp import config

from ..common.conftest import backend, dynamic  # noqa: F401  (re-exported fixtures)

REPO = Path(__file__).resolve().parents[2]
# Where the runtime is built: read now, before any test points DICP_CACHE_DIR elsewhere.
RUNTIME_CACHE = Path(config.cache_dir)


@pytest.fixture(scope="session", autouse=True)
def emu():
    import dicp.emu

    return dicp.emu


@pytest.fixture(autouse=True)
def idle_device(emu):
    """Each test starts and ends with no device work pending (a failed test's stall must not
    hold the next test's stream)."""
    torch.emu.synchronize(0)
    torch.emu.synchronize(1)
    yield
    torch.emu.synchronize(0)
    torch.emu.synchronize(1)


@pytest.fixture
def fresh_dynamo():
    """Dynamo's caches dropped around a test of compiled graphs: each test compiles its own."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def compiled(fn, dynamic=False):
    """`fn` compiled by emugraph, the device's backend."""
    return torch.compile(fn, backend="emugraph", dynamic=dynamic)


def on_emu(*tensors):
    return [t.to("emu") for t in tensors]


def run_python(code: str, timeout=900, **env) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter of this checkout, loading the runtime built above; DICP_*
    knobs are taken from `env` only. Overrunning `timeout` seconds (a hang) raises."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("DICP_")}
    full.update(DICP_CACHE_DIR=str(RUNTIME_CACHE), **env)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO,
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
