"""Data-parallel training with a compiled model: 2 gloo ranks under DistributedDataParallel.

float32. Each rank trains the compiled SmallConvNet for 3 SGD steps on its half of each batch;
every rank must end with the parameters of a single-process eager run on the combined batches.
The ranks share one compile cache directory (DICP_CACHE_DIR) and start compiling together; the
run is repeated with the same directory to show it is repeatable from a warm cache. Static runs
keep the batch size; dynamic runs change it at every step.
"""

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from ..common.shared_builds import share_runtime_builds
from ..common.utils import MODEL_TOLERANCES, Size, assert_close, parse_args, torch
from .distributed_worker import make_batches, make_optimizer, train
from .helpers import assert_state_close, compile_modes, is_dicp_backend
from .models.mlp import build_small_convnet

args = parse_args()
WORLD_SIZE = 2
TIMEOUT_S = 300  # for all ranks of one run together
REPO_ROOT = Path(__file__).resolve().parents[2]
# Per-rank batch size of each SGD step.
RANK_BATCHES = Size([4, 4, 4], [2, 3, 4])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_env(cache_dir):
    env = dict(os.environ, DICP_CACHE_DIR=str(share_runtime_builds(cache_dir)), OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return env


def launch(rank, port, dynamic, rank_batches, workdir, env):
    cmd = [
        sys.executable,
        "-m",
        "test.model.distributed_worker",
        "--rank",
        str(rank),
        "--world-size",
        str(WORLD_SIZE),
        "--port",
        str(port),
        "--backend",
        args.backend,
        "--dynamic",
        str(dynamic),
        "--rank-batches",
        ",".join(map(str, rank_batches)),
        "--out",
        str(workdir / f"rank{rank}.pt"),
        "--watchdog-s",
        str(TIMEOUT_S - 30),
    ]
    # Output goes to files: a full pipe would block a child while we wait on the other.
    with open(workdir / f"rank{rank}.log", "w") as log:
        return subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


def wait_all(procs, workdir):
    """Wait for every rank; on a timeout or a failure kill the rest. Returns the failure report
    (with the failed ranks' output), or None when all ranks succeeded."""
    deadline = time.monotonic() + TIMEOUT_S
    # Poll rather than wait in turn: once a rank fails, its peer would only hang in a collective.
    while time.monotonic() < deadline:
        codes = [p.poll() for p in procs]
        if None not in codes or any(code not in (None, 0) for code in codes):
            break
        time.sleep(0.2)
    timed_out = [p for p in procs if p.poll() is None and time.monotonic() >= deadline]
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    failed = [rank for rank, p in enumerate(procs) if p in timed_out or p.returncode != 0]
    if not failed:
        return None
    logs = "\n".join(
        f"--- rank {r} (exit {procs[r].returncode}) ---\n"
        + (workdir / f"rank{r}.log").read_text()[-6000:]
        for r in failed
    )
    reason = f"timed out after {TIMEOUT_S} s" if timed_out else "failed"
    return f"DDP rank(s) {failed} {reason}:\n{logs}"


def run_ranks(dynamic, rank_batches, cache_dir, workdir):
    """Run all ranks once; returns each rank's saved result."""
    env = child_env(cache_dir)
    for attempt in range(2):
        attempt_dir = workdir / f"attempt{attempt}"
        attempt_dir.mkdir(parents=True)
        port = free_port()
        procs = [
            launch(rank, port, dynamic, rank_batches, attempt_dir, env)
            for rank in range(WORLD_SIZE)
        ]
        failure = wait_all(procs, attempt_dir)
        # The free port can be taken by another process before rank 0 binds it: retry once.
        if failure is None or "address already in use" not in failure.lower():
            break
    if failure is not None:
        pytest.fail(failure, pytrace=False)
    return [torch.load(attempt_dir / f"rank{r}.pt") for r in range(WORLD_SIZE)]


def eager_reference(rank_batches):
    """Single-process eager training on the combined batches."""
    model = build_small_convnet()
    losses = train(model, make_optimizer(model), make_batches(rank_batches, WORLD_SIZE))
    return model, losses


class TestDistributed:
    @pytest.mark.parametrize("dynamic", compile_modes(args))
    def test_ddp_matches_single_process(self, dynamic):
        rank_batches = RANK_BATCHES.dynamic if dynamic else RANK_BATCHES.static
        expected_model, expected_losses = eager_reference(rank_batches)
        with tempfile.TemporaryDirectory(prefix="dicp-ddp-") as tmp:
            cache_dir = Path(tmp) / "cache"
            for run in ("cold", "warm"):
                results = run_ranks(dynamic, rank_batches, cache_dir, Path(tmp) / run)
                for result in results:
                    model = build_small_convnet()
                    model.load_state_dict(result["state"])
                    assert_state_close(model, expected_model)
                # Equal shards: the combined batch's mean loss is the mean of the ranks' losses.
                mean_losses = torch.stack([r["losses"] for r in results]).mean(dim=0)
                assert_close(mean_losses, expected_losses, table=MODEL_TOLERANCES)
                if is_dicp_backend(args.backend) and run == "warm":
                    # The cold run filled the shared cache, so the warm run builds nothing.
                    # A property of dicp's compile cache, checked only for dicp backends.
                    assert [r["builds"] for r in results] == [0] * WORLD_SIZE
