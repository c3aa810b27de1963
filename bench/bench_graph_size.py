"""How dicp's cold compile grows with graph size: a GPT-2 decode (prefill + one decode step, two
graphs) at two depths, each compiled cold in a fresh process (bench_compile.py's child), with
the compile profile's stages per kernel and per vendor node. A stage whose time per node grows
with the depth grows faster than linearly with the graph.

    python bench/bench_graph_size.py                    # 2 and 8 layers
    python bench/bench_graph_size.py --layers 2,12 --repeat 3
"""

import argparse
import os
import statistics
import sys
import tempfile
from functools import partial
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench import bench_compile  # noqa: E402
from bench.heldout import gpt2_decode_case  # noqa: E402

LAYERS = (2, 8)
SIZES = {f"gpt2_decode_{n}l": partial(gpt2_decode_case, layers=n) for n in range(1, 25)}
bench_compile.SUITES["graph_size"] = ("bench.bench_graph_size", "SIZES")
SHOWN = ("dynamo", "aot_autograd", "conversion", "codegen", "build", "load")


def cold_profile(model, threads):
    with tempfile.TemporaryDirectory(prefix="bench-graph-size-") as cache_dir:
        return bench_compile.first_call("graph_size", model, "new_backendgraph", cache_dir, threads)


def median_run(runs):
    seconds = statistics.median(r["seconds"] for r in runs)
    return min(runs, key=lambda r: abs(r["seconds"] - seconds))


def print_row(layers, run):
    kernels, nodes = run["counters"].get("kernels", 0), run["counters"].get("vendor nodes", 0)
    stages = run["stages"]
    per_kernel = ", ".join(f"{s} {1000 * stages[s] / max(kernels, 1):.1f}" for s in SHOWN)
    per_node = ", ".join(f"{s} {1000 * stages[s] / max(nodes, 1):.2f}" for s in SHOWN)
    print(
        f"{layers:>3} layers: wall {run['seconds']:.2f} s, {kernels} kernels, {nodes} vendor "
        f"nodes\n    ms per kernel: {per_kernel}\n    ms per node:   {per_node}"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", default=",".join(map(str, LAYERS)))
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    print(f"# {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}", flush=True)
    for layers in map(int, args.layers.split(",")):
        runs = [cold_profile(f"gpt2_decode_{layers}l", args.threads) for _ in range(args.repeat)]
        print_row(layers, median_run(runs))
    print(f"# load at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
