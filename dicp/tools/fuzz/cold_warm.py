"""`python -m dicp.tools.fuzz --cold-warm ...`: the same fuzz run twice, each in a fresh process
sharing one new cache directory, cold then warm. Both must find nothing against eager, and the
warm run, whose programs load from the caches, must compute bit for bit what the cold run did
(DICP_RECORD_RESULTS records every compiled-graph call of each run).
"""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from dicp.bridge.debug.result_record import compare, read


def run_cold_then_warm(argv: list, print=print) -> int:
    """Exit status: 0 when both runs pass and agree, else 1."""
    with tempfile.TemporaryDirectory(prefix="dicp-fuzz-cold-warm-") as folder:
        records = {}
        for name in ("cold", "warm"):
            records[name] = Path(folder) / f"{name}.jsonl"
            print(f"== {name} run")
            status = _run(argv, Path(folder) / "cache", records[name])
            if status:
                print(f"dicp fuzz --cold-warm: the {name} run failed (exit {status})")
                return 1
        difference = compare(read(records["cold"]), read(records["warm"]))
    if difference:
        print(f"dicp fuzz --cold-warm: the warm run computed something else: {difference}")
        return 1
    print("dicp fuzz --cold-warm: the warm run computed bit for bit what the cold run did")
    return 0


def _run(argv, cache: Path, record: Path) -> int:
    env = dict(
        os.environ,
        DICP_CACHE_DIR=str(cache),
        DICP_RECORD_RESULTS=str(record),
        TORCHINDUCTOR_CACHE_DIR=str(cache / "torch"),
    )
    return subprocess.run([sys.executable, "-m", "dicp.tools.fuzz", *argv], env=env).returncode
