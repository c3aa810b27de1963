"""Cold and warm compile time of dicp against Inductor and aot_eager, as users feel it.

The time is the wall time from `torch.compile(model, backend=...)` to the end of the first call
of the compiled model (one step), in a fresh process. What every backend pays is done before the
timer: `import torch`, `import torch._dynamo`, torch's backend registry (`list_backends()`:
dynamo loads it for every backend, Inductor's too, at its first compile; it imports no
backend's own module), building the model. What only one backend pays is inside it: dicp's
imports (torch imports the backend's package through its entry point when torch.compile looks
the name up), Inductor's, and any torch module only one of them pulls in. dicp's bytecode is
compiled first (`compileall`), as an installed package's is: torch's is, and this sandbox's
PYTHONDONTWRITEBYTECODE would otherwise charge dicp for compiling its sources in every process.

For every workload, repetition and backend, two fresh processes share one pair of new cache
directories (DICP_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR): the first compiles cold, the second warm
(what a restarted job sees). Backends alternate within a repetition, in a rotating order, so
that load from other processes on a shared machine falls on all of them; a time is the median
over the repetitions, and ratios are taken against the other backends of the same run, with
geometric means over the workloads.

For dicp the child also reads the compile profile (dicp.stats()); `--profile` prints its
stages per workload and how their sum compares with the measured wall time.

    python bench/bench_compile.py                          # the model suite (bench_models.py)
    python bench/bench_compile.py --suite heldout --repeat 3 --profile
    python bench/bench_compile.py --suite workloads --models mlp_gelu,mlp_train
"""

import argparse
import compileall
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# suite name -> (module the child process imports its table from, the table's name)
SUITES = {
    "models": ("bench.bench_models", "MODELS"),
    "workloads": ("bench.bench_workloads", "WORKLOADS"),
    "heldout": ("bench.heldout", "HELDOUT"),
}

BACKENDS = ("new_backendgraph", "inductor", "aot_eager")
CHILD = """
import json, sys, time
import torch, torch._dynamo  # every backend's: before the timer
torch._dynamo.list_backends()  # torch's backend registry, every backend's too
sys.path.insert(0, {repo!r})
from {module} import {table} as CASES
torch.set_num_threads({threads})
case = CASES[{model!r}]()
start = time.perf_counter()
compiled = torch.compile(case.model, backend={backend!r},
                         dynamic=True if getattr(case, "dynamic", False) else None)
case.step(compiled)
seconds = time.perf_counter() - start
result = {{"seconds": seconds}}
if "dicp" in sys.modules:
    import dicp
    stats = dicp.stats()
    result["stages"] = dict(stats.stages)
    result["counters"] = dict(stats.counters)
print(json.dumps(result))
"""


def case_names(suite):
    module, table = SUITES[suite]
    __import__(module)
    return list(getattr(sys.modules[module], table))


def first_call(suite, model, backend, cache_dir, threads):
    env = {**os.environ, "DICP_CACHE_DIR": cache_dir, "TORCHINDUCTOR_CACHE_DIR": cache_dir}
    module, table = SUITES[suite]
    code = CHILD.format(
        repo=str(REPO), module=module, table=table, model=model, backend=backend, threads=threads
    )
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=REPO
    )
    if result.returncode != 0:
        sys.exit(f"bench_compile: {model} / {backend} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def cold_and_warm(suite, model, backend, threads):
    with tempfile.TemporaryDirectory(prefix="bench-compile-") as cache_dir:
        return {
            "cold": first_call(suite, model, backend, cache_dir, threads),
            "warm": first_call(suite, model, backend, cache_dir, threads),
        }


def measure(suite, model, backends, threads, repeat):
    """backend -> {"cold": [result per repetition], "warm": [...]}, backends alternating."""
    runs = {b: {"cold": [], "warm": []} for b in backends}
    for rep in range(repeat):
        order = backends[rep % len(backends) :] + backends[: rep % len(backends)]
        for backend in order:
            for kind, result in cold_and_warm(suite, model, backend, threads).items():
                runs[backend][kind].append(result)
    return runs


def median_seconds(results):
    return statistics.median(r["seconds"] for r in results)


def geomean(values):
    return math.exp(sum(map(math.log, values)) / len(values))


def print_table(runs, models, backends):
    subject, references = backends[0], backends[1:]
    ratios = [f"{kind} vs {ref}" for kind in ("cold", "warm") for ref in references]
    print(
        f"{'model':<18}"
        + "".join(f"{b + ' cold/warm s':>30}" for b in backends)
        + "".join(f"{r:>22}" for r in ratios)
    )
    per_ratio = {r: [] for r in ratios}
    for model in models:
        times = {
            b: {k: median_seconds(runs[model][b][k]) for k in ("cold", "warm")} for b in backends
        }
        row = f"{model:<18}" + "".join(
            f"{times[b]['cold']:>19.2f} / {times[b]['warm']:>7.2f}" for b in backends
        )
        for kind in ("cold", "warm"):
            for ref in references:
                ratio = times[subject][kind] / times[ref][kind]
                per_ratio[f"{kind} vs {ref}"].append(ratio)
                row += f"{ratio:>21.2f}x"
        print(row)
    print(
        f"{'geomean':<18}"
        + " " * 30 * len(backends)
        + "".join(f"{geomean(v):>21.2f}x" for v in per_ratio.values())
    )
    print(f"ratio: {subject} time / reference time, medians (below 1: {subject} compiles faster).")


def print_profiles(runs, models, backend):
    """Per workload, cold and warm: the median run's profile stages, their sum, the wall time."""
    print(f"\ncompile profile of {backend} (the median run's), against its wall time")
    for model in models:
        for kind in ("cold", "warm"):
            results = sorted(runs[model][backend][kind], key=lambda r: r["seconds"])
            median = results[len(results) // 2]
            stages = median.get("stages", {})
            total = sum(stages.values())
            parts = ", ".join(f"{s} {t:.2f}" for s, t in stages.items() if t >= 0.005)
            print(
                f"{model:<18} {kind}: wall {median['seconds']:.2f} s, stages {total:.2f} s "
                f"({100 * total / median['seconds']:.0f}%): {parts}"
            )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--suite",
        choices=SUITES,
        default="models",
        help="models: bench_models.py's; workloads: bench_workloads.py's; heldout: heldout.py's",
    )
    parser.add_argument(
        "--models", default=None, help="comma-separated subset of the suite (default: all)"
    )
    parser.add_argument(
        "--backends",
        default=",".join(BACKENDS),
        help="comma-separated; the first is compared with the others",
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="cold/warm pairs per backend and workload; times are medians",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="print the first backend's compile profile against wall time",
    )
    parser.add_argument("--json", default=None, help="also write every run's results here")
    args = parser.parse_args(argv)
    cases = case_names(args.suite)
    models = args.models.split(",") if args.models else cases
    backends = args.backends.split(",")
    unknown = [m for m in models if m not in cases]
    if unknown:
        parser.error(f"unknown {unknown}; choose from {', '.join(cases)}")
    compileall.compile_dir(REPO / "dicp", quiet=1)
    print(
        f"# {args.threads} thread(s), {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, "
        f"{args.repeat} repetition(s)",
        flush=True,
    )
    runs = {}
    for model in models:
        runs[model] = measure(args.suite, model, backends, args.threads, args.repeat)
        brief = {
            b: [round(median_seconds(runs[model][b][k]), 2) for k in ("cold", "warm")]
            for b in backends
        }
        print(
            f"# {model}: {json.dumps(brief)}, load {os.getloadavg()[0]:.1f}",
            file=sys.stderr,
            flush=True,
        )
    print_table(runs, models, backends)
    if args.profile:
        print_profiles(runs, models, backends[0])
    print(f"# load at the end {os.getloadavg()[0]:.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
