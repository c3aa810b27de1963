"""Cold and warm compile time of dicp against Inductor and aot_eager, same workloads, one run.

For every workload and backend, two fresh processes share one pair of empty cache directories
(DICP_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR): the first compiles cold, the second warm (what a
restarted job sees). The time is the wall time of the first call of the compiled model (one
step included; imports and model building excluded), measured inside the process. Ratios are
against the other backends of the same run; the last rows are geometric means.

    python bench/bench_compile.py                          # every workload of bench_models.py
    python bench/bench_compile.py --models bert,llama --backends new_backendgraph,inductor
    python bench/bench_compile.py --suite workloads        # the six of bench_workloads.py
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.bench_models import MODELS, parse_list  # noqa: E402
from bench.bench_workloads import WORKLOADS  # noqa: E402

# suite name -> (module the child process imports it from, the table of cases)
SUITES = {"models": ("bench.bench_models", "MODELS", MODELS),
          "workloads": ("bench.bench_workloads", "WORKLOADS", WORKLOADS)}

BACKENDS = ("new_backendgraph", "inductor", "aot_eager")
CHILD = """
import json, sys, time, torch
sys.path.insert(0, {repo!r})
from {module} import {table} as CASES
torch.set_num_threads({threads})
case = CASES[{model!r}]()
start = time.perf_counter()
case.step(torch.compile(case.model, backend={backend!r}))
print(json.dumps({{"seconds": time.perf_counter() - start}}))
"""


def first_call_s(suite, model, backend, cache_dir, threads):
    env = {**os.environ, "DICP_CACHE_DIR": cache_dir, "TORCHINDUCTOR_CACHE_DIR": cache_dir}
    module, table, _ = SUITES[suite]
    code = CHILD.format(repo=str(REPO), module=module, table=table, model=model,
                        backend=backend, threads=threads)
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"bench_compile: {model} / {backend} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])["seconds"]


def cold_and_warm(suite, model, backend, threads):
    with tempfile.TemporaryDirectory(prefix="bench-compile-") as cache_dir:
        cold = first_call_s(suite, model, backend, cache_dir, threads)
        warm = first_call_s(suite, model, backend, cache_dir, threads)
    return {"cold": cold, "warm": warm}


def geomean(values):
    return math.exp(sum(map(math.log, values)) / len(values))


def print_table(times, models, backends):
    subject, references = backends[0], backends[1:]
    ratios = [f"{kind} vs {ref}" for kind in ("cold", "warm") for ref in references]
    print(f"{'model':<18}" + "".join(f"{b + ' cold/warm s':>30}" for b in backends)
          + "".join(f"{r:>22}" for r in ratios))
    per_ratio = {r: [] for r in ratios}
    for model in models:
        row = f"{model:<18}" + "".join(
            f"{times[model][b]['cold']:>19.2f} / {times[model][b]['warm']:>7.2f}" for b in backends)
        for kind in ("cold", "warm"):
            for ref in references:
                ratio = times[model][subject][kind] / times[model][ref][kind]
                per_ratio[f"{kind} vs {ref}"].append(ratio)
                row += f"{ratio:>21.2f}x"
        print(row)
    print(f"{'geomean':<18}" + " " * 30 * len(backends)
          + "".join(f"{geomean(v):>21.2f}x" for v in per_ratio.values()))
    print(f"ratio: {subject} time / reference time (below 1: {subject} compiles faster).")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", choices=SUITES, default="models",
                        help="models: bench_models.py's; workloads: bench_workloads.py's")
    parser.add_argument("--models", type=parse_list, default=None,
                        help="comma-separated subset of the suite (default: all)")
    parser.add_argument("--backends", type=parse_list, default=list(BACKENDS),
                        help="comma-separated; the first is compared with the others")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    cases = SUITES[args.suite][2]
    args.models = args.models or list(cases)
    unknown = [m for m in args.models if m not in cases]
    if unknown:
        parser.error(f"unknown {unknown}; choose from {', '.join(cases)}")
    load, cpus = os.getloadavg()[0], os.cpu_count()
    print(f"# {args.threads} thread(s), {cpus} CPUs, load {load:.1f}", flush=True)
    times = {}
    for model in args.models:
        times[model] = {b: cold_and_warm(args.suite, model, b, args.threads)
                        for b in args.backends}
        print(f"# {model}: {json.dumps(times[model])}", file=sys.stderr, flush=True)
    print_table(times, args.models, args.backends)


if __name__ == "__main__":
    main()
