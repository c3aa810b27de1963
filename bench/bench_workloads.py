"""Steady-state step time of six small workloads under eager, inductor and new_backendgraph.

The workloads of issue 11: an MLP with GELU, a LLaMA-style block with masked-softmax attention,
a conv+BN+ReLU net, a 6-op pointwise chain over 4M floats, layer_norm+softmax+gelu, and an MLP
training step. All backends are compiled first, then timed interleaved (round after round, each
backend a few steps per round, in rotating order) so load from other processes on a shared
machine hits them alike; a step time is the median over all rounds. Ratios are step time
divided by the eager / inductor step time of the same run (lower is faster), with geometric
means over the workloads.

    python bench/bench_workloads.py                      # 2 threads, all workloads
    python bench/bench_workloads.py --workloads chain,norm_softmax --rounds 30
"""

import argparse
import math
import os
import statistics
import sys
import time
from collections.abc import Callable

import torch
import torch._dynamo as dynamo
import torch.nn as nn
import torch.nn.functional as F

EAGER, INDUCTOR, DICP = "eager", "inductor", "new_backendgraph"
BACKENDS = (EAGER, INDUCTOR, DICP)


def _gen():
    return torch.Generator().manual_seed(0)


class MLP(nn.Module):
    def __init__(self, width=512, hidden=2048):
        super().__init__()
        self.up, self.down = nn.Linear(width, hidden), nn.Linear(hidden, width)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))


class LlamaBlock(nn.Module):
    """RMSNorm, causal attention with an explicit masked softmax, SwiGLU MLP."""

    def __init__(self, dim=256, heads=4, hidden=688):
        super().__init__()
        self.heads = heads
        self.qkv, self.out = nn.Linear(dim, 3 * dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.gate, self.up = nn.Linear(dim, hidden, bias=False), nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)
        self.norm1, self.norm2 = nn.Parameter(torch.ones(dim)), nn.Parameter(torch.ones(dim))

    @staticmethod
    def rms(x, weight):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight

    def attention(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) / math.sqrt(d // self.heads)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        probs = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
        return self.out((probs @ v).transpose(1, 2).reshape(b, t, d))

    def forward(self, x):
        x = x + self.attention(self.rms(x, self.norm1))
        h = self.rms(x, self.norm2)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


def conv_bn_relu_net():
    layers, channels = [], 3
    for out in (32, 64, 64):
        layers += [
            nn.Conv2d(channels, out, 3, padding=1, bias=False),
            nn.BatchNorm2d(out),
            nn.ReLU(),
        ]
        channels = out
    return nn.Sequential(*layers).eval()


class PointwiseChain(nn.Module):
    def forward(self, x):
        y = torch.sigmoid(x) * torch.tanh(x)
        y = torch.where(x > 0, torch.exp(-y), y)
        return torch.clamp(y, -0.5, 0.5)


class NormSoftmaxGelu(nn.Module):
    def __init__(self, width=1024):
        super().__init__()
        self.norm = nn.LayerNorm(width)

    def forward(self, x):
        return F.gelu(torch.softmax(self.norm(x), dim=-1))


class Workload:
    """A module and one step on fixed inputs; `step(fn)` runs the step through `fn`."""

    def __init__(self, model, inputs, train_loss: Callable = None):
        self.model, self.inputs, self.train_loss = model, inputs, train_loss

    def step(self, fn):
        if self.train_loss is None:
            with torch.no_grad():
                return fn(*self.inputs)
        self.model.zero_grad(set_to_none=True)
        loss = self.train_loss(fn(*self.inputs))
        loss.backward()
        return loss


def mlp_training_step():
    model = MLP(256, 1024)
    x, target = torch.randn(256, 256, generator=_gen()), torch.randn(256, 256, generator=_gen())
    return Workload(model, (x,), lambda out: F.mse_loss(out, target))


WORKLOADS = {
    "mlp_gelu": lambda: Workload(MLP().eval(), (torch.randn(256, 512, generator=_gen()),)),
    "llama_block": lambda: Workload(
        LlamaBlock().eval(), (torch.randn(4, 128, 256, generator=_gen()),)
    ),
    "conv_bn_relu": lambda: Workload(
        conv_bn_relu_net(), (torch.randn(4, 3, 64, 64, generator=_gen()),)
    ),
    "pointwise_chain": lambda: Workload(
        PointwiseChain(), (torch.randn(4 * 1024 * 1024, generator=_gen()),)
    ),
    "norm_softmax_gelu": lambda: Workload(
        NormSoftmaxGelu().eval(), (torch.randn(512, 1024, generator=_gen()),)
    ),
    "mlp_train": mlp_training_step,
}


def compiled_steps(workload, backends):
    """backend -> the callable its steps run through, each already compiled and warmed up."""
    fns = {}
    for backend in backends:
        fn = workload.model if backend == EAGER else torch.compile(workload.model, backend=backend)
        for _ in range(3):
            workload.step(fn)
        fns[backend] = fn
    return fns


def interleaved_ms(workload, fns, rounds, steps):
    """backend -> median step time in ms over `rounds` rounds of `steps` steps each."""
    times = {backend: [] for backend in fns}
    order = list(fns)
    for r in range(rounds):
        for backend in order[r % len(order) :] + order[: r % len(order)]:
            for _ in range(steps):
                start = time.perf_counter()
                workload.step(fns[backend])
                times[backend].append(time.perf_counter() - start)
    return {backend: 1e3 * statistics.median(t) for backend, t in times.items()}


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def print_table(results):
    print(
        f"{'workload':<18} {'eager ms':>9} {'inductor':>9} {'dicp ms':>9} "
        f"{'dicp/eager':>11} {'dicp/ind':>9} {'ind/eager':>10}"
    )
    for name, ms in results.items():
        print(
            f"{name:<18} {ms[EAGER]:9.3f} {ms[INDUCTOR]:9.3f} {ms[DICP]:9.3f} "
            f"{ms[DICP] / ms[EAGER]:10.2f}x {ms[DICP] / ms[INDUCTOR]:8.2f}x "
            f"{ms[INDUCTOR] / ms[EAGER]:9.2f}x"
        )
    ratios = lambda a, b: geomean([ms[a] / ms[b] for ms in results.values()])
    print(
        f"{'geomean':<18} {'':>9} {'':>9} {'':>9} {ratios(DICP, EAGER):10.2f}x "
        f"{ratios(DICP, INDUCTOR):8.2f}x {ratios(INDUCTOR, EAGER):9.2f}x"
    )
    print(
        "ratios are step-time ratios: lower is faster (dicp/ind 0.9x = 10% faster than inductor)."
    )


def timing_arguments(parser, workloads, argv=None):
    """The options every step-time bench takes, parsed: (arguments, workload names chosen).
    Sets torch's thread count and prints the run's header."""
    parser.add_argument(
        "--workloads",
        default=",".join(workloads),
        help=f"comma-separated subset of {', '.join(workloads)}",
    )
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds")
    parser.add_argument("--steps", type=int, default=3, help="timed steps per backend per round")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.workloads.split(",") if n.strip()]
    unknown = [n for n in names if n not in workloads]
    if unknown:
        sys.exit(f"{parser.prog}: unknown workloads {unknown}; choose from {list(workloads)}")
    torch.set_num_threads(args.threads)
    print(
        f"# torch {torch.__version__}, {args.threads} threads, load {os.getloadavg()[0]:.1f}, "
        f"median of {args.rounds} rounds x {args.steps} steps",
        flush=True,
    )
    return args, names


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args, names = timing_arguments(parser, WORKLOADS, argv)
    results = {}
    for name in names:
        dynamo.reset()
        workload = WORKLOADS[name]()
        fns = compiled_steps(workload, BACKENDS)
        results[name] = interleaved_ms(workload, fns, args.rounds, args.steps)
        print(f"# {name}: done", file=sys.stderr, flush=True)
    print_table(results)


if __name__ == "__main__":
    main()
