"""Step time of ops whose backward stores through computed indices (issue 18): the ResNet stem
pool, nearest upsampling, embedding and scatter_add, forward + backward, against eager and
inductor in one run.

    python bench/bench_indexed_writes.py [--repeat 20] [--threads 2]

Kernels that store through a computed index run their colliding loops serially with no SIMD
(codegen/loops.py); these numbers are what that rule costs next to inductor's choices.
"""

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

WORKLOADS = {
    "max_pool2d(3, 2, 1) 32x64x56x56": (
        lambda x: F.max_pool2d(x, 3, 2, 1),
        lambda: (torch.randn(32, 64, 56, 56),),
    ),
    "nearest upsample x2 16x64x32x32": (
        lambda x: F.interpolate(x, scale_factor=2, mode="nearest"),
        lambda: (torch.randn(16, 64, 32, 32),),
    ),
    "embedding 32000x512, 8x512 tokens": (
        lambda w, i: F.embedding(i, w),
        lambda: (torch.randn(32000, 512), torch.randint(32000, (8, 512))),
    ),
    "scatter_add 64x4096 -> 64x512": (
        lambda x, i: torch.zeros(64, 512).scatter_add(1, i, x),
        lambda: (torch.randn(64, 4096), torch.randint(512, (64, 4096))),
    ),
}
ENGINES = ("eager", "inductor", "new_backendgraph")


def step(fn, inputs):
    leaves = [t.detach().requires_grad_(t.is_floating_point()) for t in inputs]
    out = fn(*leaves)
    out.backward(torch.ones_like(out))


def median_seconds(fn, inputs, repeat):
    for _ in range(3):
        step(fn, inputs)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        step(fn, inputs)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(
        f"{'workload':36s} "
        + " ".join(f"{e + ' ms':>20s}" for e in ENGINES)
        + f" {'dicp vs inductor':>17s}"
    )
    for name, (fn, make) in WORKLOADS.items():
        torch.manual_seed(0)
        inputs = make()
        times = {
            engine: median_seconds(
                fn if engine == "eager" else torch.compile(fn, backend=engine), inputs, args.repeat
            )
            for engine in ENGINES
        }
        ratio = times["new_backendgraph"] / times["inductor"]
        print(
            f"{name:36s} "
            + " ".join(f"{times[e] * 1e3:20.2f}" for e in ENGINES)
            + f" {ratio:16.2f}x"
        )


if __name__ == "__main__":
    main()
