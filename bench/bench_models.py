"""Time the model-suite models under eager and compiled backends, and print a table.

For every model and backend: the steady-state step (median of --repeat runs after warmup), a
cold compile (fresh DICP_CACHE_DIR / TORCHINDUCTOR_CACHE_DIR and torch._dynamo.reset()) and a
warm compile (reset, same cache directories). A compile time is the wall time of the first call,
which includes one run of the step. `eager` is plain PyTorch: the baseline of the ratios.

    python bench/bench_models.py                       # eager, inductor, new_backendgraph
    python bench/bench_models.py --backends eager,aot_eager,inductor --models bert,llama
    python bench/bench_models.py --dynamic             # dynamic shapes (dynamic=True)
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable

import torch
import torch._dynamo as dynamo
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for test.model

from test.model.models.bert import build_bert, make_bert_inputs
from test.model.models.llama import CausalLMLoss, add_lora, build_llama
from test.model.models.resnet import build_resnet50
from test.model.models.unet import build_unet

EAGER = "eager"
DEFAULT_BACKENDS = "eager,inductor,new_backendgraph"
CACHE_ENV_VARS = ("DICP_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR")


@dataclass
class Case:
    """A model and one step of work on fixed inputs; `step(fn)` runs it through `fn`."""

    model: torch.nn.Module
    step: Callable
    dynamic: bool = False  # compiled with dynamic=True (bench_compile.py)


def inference(model, *inputs):
    def step(fn):
        with torch.no_grad():
            return fn(*inputs)

    return Case(model, step)


def training(model, loss_of_output, *inputs):
    def step(fn):
        model.zero_grad(set_to_none=True)
        loss = loss_of_output(fn(*inputs))
        loss.backward()
        return loss

    return Case(model, step)


def llama_prefill():
    model = build_llama()
    k_cache, v_cache = model.empty_cache(2, 64, torch.float32)
    ids = torch.randint(model.cfg.vocab_size, (2, 32), generator=torch.Generator().manual_seed(0))
    return inference(model, ids, torch.arange(32), k_cache, v_cache)


def llama_lora_train():
    model = CausalLMLoss(add_lora(build_llama().train()))
    tokens = torch.randint(128, (2, 33), generator=torch.Generator().manual_seed(0))
    return training(model, lambda loss: loss, tokens[:, :-1], tokens[:, 1:])


def resnet50_train():
    g = torch.Generator().manual_seed(0)
    images, labels = torch.randn(2, 3, 32, 32, generator=g), torch.randint(10, (2,), generator=g)
    return training(build_resnet50().train(), lambda out: F.cross_entropy(out, labels), images)


def unet():
    g = torch.Generator().manual_seed(0)
    return inference(
        build_unet(),
        torch.randn(1, 4, 16, 16, generator=g),
        torch.tensor([999.0]),
        torch.randn(1, 8, 32, generator=g),
    )


def bert():
    return inference(build_bert(), *make_bert_inputs(2, 16))


MODELS = {
    "llama": llama_prefill,
    "llama_lora_train": llama_lora_train,
    "resnet50_train": resnet50_train,
    "unet": unet,
    "bert": bert,
}


def check_backends(backends):
    """Fail before timing anything if a backend is not registered with dynamo."""
    for name in backends:
        if name == EAGER:
            continue
        try:
            dynamo.lookup_backend(name)
        except Exception as err:
            available = ", ".join(dynamo.list_backends())
            hint = " (install dicp: pip install -e .)" if name == "new_backendgraph" else ""
            sys.exit(
                f"bench_models: backend {name!r} is not available{hint}: {err}\n"
                f"available backends: {EAGER}, {available}"
            )


def reset_compilers():
    """Forget compiled code held in memory, so the next compile reads only the disk caches."""
    dynamo.reset()
    try:
        from torch._inductor.utils import clear_inductor_caches

        clear_inductor_caches()
    except ImportError:
        pass


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def steady_ms(case, fn, repeat, warmup=3):
    for _ in range(warmup):
        case.step(fn)
    return 1e3 * statistics.median(timed(lambda: case.step(fn)) for _ in range(repeat))


def first_call_s(case, backend, dynamic):
    """Wall time of the first call of a freshly compiled model, and the compiled model."""
    reset_compilers()
    compiled = torch.compile(case.model, backend=backend, dynamic=dynamic or None)
    return timed(lambda: case.step(compiled)), compiled


def bench_backend(case, backend, repeat, dynamic=False):
    if backend == EAGER:
        return {"step_ms": steady_ms(case, case.model, repeat)}
    with tempfile.TemporaryDirectory(prefix="bench-cache-") as cache_dir:
        os.environ.update({var: cache_dir for var in CACHE_ENV_VARS})
        cold, _ = first_call_s(case, backend, dynamic)
        warm, compiled = first_call_s(case, backend, dynamic)
        step = steady_ms(case, compiled, repeat)
    return {"step_ms": step, "cold_s": cold, "warm_s": warm}


def fmt(value, spec):
    return format("-", ">" + spec.split(".")[0]) if value is None else format(value, spec)


def print_table(rows):
    header = (
        f"{'model':<18} {'backend':<18} {'step ms':>9} {'vs eager':>9} {'cold s':>8} {'warm s':>8}"
    )
    print(header)
    print("-" * len(header))
    for model, backend, r, eager_ms in rows:
        speedup = eager_ms / r["step_ms"]
        print(
            f"{model:<18} {backend:<18} {r['step_ms']:9.2f} {speedup:8.2f}x "
            f"{fmt(r.get('cold_s'), '8.2f')} {fmt(r.get('warm_s'), '8.2f')}"
        )
    print("vs eager: eager step time / backend step time (higher is faster).")
    print("cold/warm: first call after compiling with an empty/filled cache dir (one step incl.).")


def parse_list(text, known=None):
    items = [item.strip() for item in text.split(",") if item.strip()]
    unknown = [i for i in items if known is not None and i not in known]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown {unknown}; choose from {', '.join(known)}")
    return items


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--models",
        type=lambda s: parse_list(s, MODELS),
        default=list(MODELS),
        help=f"comma-separated subset of {', '.join(MODELS)} (default: all)",
    )
    parser.add_argument(
        "--backends",
        type=parse_list,
        default=parse_list(DEFAULT_BACKENDS),
        help=f"comma-separated dynamo backends (default: {DEFAULT_BACKENDS}); "
        f"'{EAGER}' is uncompiled PyTorch",
    )
    parser.add_argument("--repeat", type=int, default=20, help="timed steps per median")
    parser.add_argument(
        "--threads",
        type=int,
        default=torch.get_num_threads(),
        help="intra-op threads (default: %(default)s); 1 gives steadier numbers "
        "on a busy machine, where OpenMP threads wait for each other",
    )
    parser.add_argument(
        "--dynamic",
        action="store_true",
        help="compile with dynamic=True: every size symbolic, as the graphs "
        "dynamo recompiles after an input's size changes",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    load, cpus = os.getloadavg()[0], os.cpu_count()
    print(
        f"# torch {torch.__version__}, {args.threads} thread(s), {cpus} CPUs, load {load:.1f}, "
        f"median of {args.repeat}{', dynamic shapes' if args.dynamic else ''}",
        flush=True,
    )
    if load > cpus:
        print("# warning: the machine is busy; timings will be noisy", file=sys.stderr)
    backends = [EAGER] + [b for b in args.backends if b != EAGER]
    check_backends(backends)

    rows = []
    for name in args.models:
        eager_ms = None
        for backend in backends:
            result = bench_backend(MODELS[name](), backend, args.repeat, args.dynamic)
            eager_ms = eager_ms or result["step_ms"]
            rows.append((name, backend, result, eager_ms))
            print(f"# {name} / {backend}: done", file=sys.stderr, flush=True)
    print_table(rows)


if __name__ == "__main__":
    main()
