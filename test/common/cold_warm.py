"""`pytest --cold-warm`: each selected test runs twice in a fresh interpreter, cold (an empty
cache directory) then warm (the cache the cold run left), and passes only if both pass and the
warm run's compiled graphs computed bit for bit what the cold run's did.

A cache is part of the compiler: whatever a warm process loads (AOTAutograd's result from the
AOT cache, generated code from the graph cache, kernels from the build cache) must behave as
the compile it replaces. Each run records a digest of every compiled-graph call's outputs and
updated inputs (DICP_RECORD_RESULTS, dicp/bridge/debug/result_record.py); the records must be
equal. The warm run must also build nothing and miss no entry the cold run stored.

Registered with the harness plugin (test/common/conftest.py). COLD_WARM_WARM_ENV (JSON) adds
variables to the warm run only: the mode's own test uses it to show a difference is caught.
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

CHILD = "COLD_WARM_RUN"  # set in the runs: they run their test, not this mode
STATS = "COLD_WARM_STATS"  # where a run writes its cache statistics
WARM_ENV = "COLD_WARM_WARM_ENV"
TIMEOUT = 900  # seconds per run


def enabled(config) -> bool:
    return config.getoption("--cold-warm") and not os.environ.get(CHILD)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    if not enabled(pyfuncitem.config):
        return None
    with tempfile.TemporaryDirectory(prefix="dicp-cold-warm-") as folder:
        cold, warm = (_run(pyfuncitem, Path(folder), name) for name in ("cold", "warm"))
    _check(cold, warm)
    return True  # the test ran, twice, in the child processes


def pytest_sessionfinish(session):
    """In a run: write this process's cache statistics for the parent to check."""
    path = os.environ.get(STATS)
    if path and os.environ.get(CHILD):
        from dicp.bridge.cache.aot import aot_cache_stats
        from dicp.bridge.cache.build import cache_stats
        from dicp.bridge.cache.graph import graph_cache_stats

        Path(path).write_text(
            json.dumps(
                {
                    "aot": aot_cache_stats(),
                    "graphs": graph_cache_stats(),
                    "builds": cache_stats()["builds"],
                }
            )
        )


def _run(item, folder: Path, name: str) -> dict:
    from .shared_builds import share_runtime_builds

    record, stats = folder / f"{name}.jsonl", folder / f"{name}-stats.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_") and k != WARM_ENV}
    env.update(
        {
            CHILD: "1",
            STATS: str(stats),
            "DICP_RECORD_RESULTS": str(record),
            "DICP_CACHE_DIR": str(share_runtime_builds(folder / "cache")),
            "TORCHINDUCTOR_CACHE_DIR": str(folder / "cache" / "torch"),
        }
    )
    if name == "warm":
        env.update(json.loads(os.environ.get(WARM_ENV, "{}")))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", item.nodeid, *_options(item.config)],
        cwd=item.config.rootpath,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    if result.returncode != 0:
        pytest.fail(
            f"the {name} run failed (exit {result.returncode}):\n"
            f"{(result.stdout + result.stderr)[-6000:]}",
            pytrace=False,
        )
    from dicp.bridge.debug.result_record import read

    return {
        "name": name,
        "record": read(record) if record.exists() else [],
        "stats": json.loads(stats.read_text()),
    }


def _options(config) -> list:
    return [
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        "--backend",
        config.getoption("--backend"),
        "--dynamic",
        str(config.getoption("--dynamic")),
        "--seed-base",
        str(config.getoption("--seed-base")),
        *(["--allow-fallback"] if config.getoption("--allow-fallback") else []),
    ]


def _check(cold: dict, warm: dict) -> None:
    from dicp.bridge.debug.result_record import compare

    difference = compare(cold["record"], warm["record"])
    if difference:
        pytest.fail(
            f"the warm run computed something else than the cold run: {difference}", pytrace=False
        )
    problems = _warm_cache_problems(cold["stats"], warm["stats"])
    if problems:
        pytest.fail(
            f"the warm run {'; '.join(problems)} (cold {cold['stats']}, warm {warm['stats']})",
            pytrace=False,
        )


def _warm_cache_problems(cold: dict, warm: dict) -> list:
    problems = []
    if warm["builds"]:
        problems.append(f"built {warm['builds']} libraries again")
    for layer in ("aot", "graphs"):
        unstored = cold[layer]["misses"] - cold[layer]["stores"]  # entries cold could not store
        if warm[layer]["misses"] > max(unstored, 0):
            problems.append(f"missed {warm[layer]['misses']} {layer} entries")
        if warm[layer]["rejected"]:
            problems.append(f"rejected {warm[layer]['rejected']} {layer} entries")
    return problems
