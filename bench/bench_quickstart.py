"""Time the quick-start model: cold and warm compile, steady-state step vs eager and inductor.

    python bench/bench_quickstart.py [--repeat 30]

Cold compile: a fresh process with an empty DICP_CACHE_DIR (g++ builds everything).
Warm compile: a fresh process reusing that cache (dynamo and codegen run, no g++).
Step times are medians measured in one process, reported as ratios against eager.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

CHILD = r"""
import json, sys, time, torch
sys.path.insert(0, sys.argv[1])
from quickstart import TransformerBlock
torch.manual_seed(0)
model, x = TransformerBlock().eval(), torch.randn(4, 64, 128)
start = time.perf_counter()
with torch.no_grad():
    torch.compile(model, backend=sys.argv[2])(x)
from dicp.bridge.cache.build import cache_stats
print(json.dumps({"seconds": time.perf_counter() - start, **cache_stats()}))
"""


def first_call(backend, cache_dir):
    env = dict(os.environ, DICP_CACHE_DIR=cache_dir)
    examples = str(Path(__file__).resolve().parents[1] / "examples")
    out = subprocess.run(
        [sys.executable, "-c", CHILD, examples, backend],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def median_step(fn, x, repeat):
    import torch

    times = []
    with torch.no_grad():
        for _ in range(3):
            fn(x)
        for _ in range(repeat):
            start = time.perf_counter()
            fn(x)
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    import torch
    from quickstart import TransformerBlock

    with tempfile.TemporaryDirectory() as cache:
        cold = first_call("new_backendgraph", cache)
        warm = first_call("new_backendgraph", cache)
    print(
        f"new_backendgraph first call: cold {cold['seconds']:.2f} s ({cold['builds']} g++ "
        f"builds), warm {warm['seconds']:.2f} s ({warm['builds']} builds, "
        f"{warm['disk_hits']} cache hits)"
    )
    torch.manual_seed(0)
    model, x = TransformerBlock().eval(), torch.randn(4, 64, 128)
    engines = {
        "eager": model,
        "inductor": torch.compile(model, backend="inductor"),
        "new_backendgraph": torch.compile(model, backend="new_backendgraph"),
    }
    steps = {name: median_step(fn, x, args.repeat) for name, fn in engines.items()}
    print(f"{'engine':18s} {'step ms':>9s} {'speed vs eager':>15s}")
    for name, seconds in steps.items():
        print(f"{name:18s} {seconds * 1e3:9.2f} {steps['eager'] / seconds:14.2f}x")


if __name__ == "__main__":
    main()
