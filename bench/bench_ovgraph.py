"""Compile time and inference step time of ovgraph against OpenVINO's own torch.compile backend
("openvino", from openvino.torch), Inductor and eager, on the same models in one run.

    python bench/bench_ovgraph.py [--repeat 20] [--threads 2] [--models mlp,attention]

Step times are medians; ratios are against eager measured in this run. Compile time is the
first call (dynamo + AOTAutograd + backend build) with dicp's and OpenVINO's disk caches cold
(a temporary DICP_CACHE_DIR; OpenVINO's own backend keeps no cache unless told).
"""

import argparse
import os
import statistics
import tempfile
import time

import torch

ENGINES = ("eager", "inductor", "openvino", "ovgraph")


class MLP(torch.nn.Module):
    def __init__(self, width=512):
        super().__init__()
        self.up = torch.nn.Linear(width, 4 * width)
        self.norm = torch.nn.LayerNorm(4 * width)
        self.down = torch.nn.Linear(4 * width, width)

    def forward(self, x):
        return torch.softmax(self.down(torch.nn.functional.gelu(self.norm(self.up(x)))), -1)


class Attention(torch.nn.Module):
    """One pre-norm transformer block written with plain ops (no SDPA kernel)."""

    def __init__(self, width=256, heads=4):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.proj = torch.nn.Linear(width, width)
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(width, 4 * width), torch.nn.GELU(), torch.nn.Linear(4 * width, width)
        )

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(c, -1)
        q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in (q, k, v))
        scores = torch.softmax(q @ k.transpose(-1, -2) / (c // self.heads) ** 0.5, -1)
        x = x + self.proj((scores @ v).transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.norm2(x))


MODELS = {
    "mlp 512->2048->512, 64 rows": (MLP, lambda: torch.randn(64, 512)),
    "attention block 256, 4x128 tokens": (Attention, lambda: torch.randn(4, 128, 256)),
}


def compiled(engine, model):
    if engine == "eager":
        return model
    if engine == "openvino":
        import openvino.torch  # noqa: F401  (registers the "openvino" backend)
    if engine == "ovgraph":
        import dicp.vendor.ovgraph as ovgraph

        return torch.compile(model, backend=ovgraph.ovgraph)
    return torch.compile(model, backend=engine)


def measure(engine, model, x, repeat):
    torch._dynamo.reset()
    fn = compiled(engine, model)
    with torch.no_grad():
        start = time.perf_counter()
        out = fn(x)
        compile_s = time.perf_counter() - start
        for _ in range(3):
            fn(x)
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            fn(x)
            times.append(time.perf_counter() - start)
    return compile_s, statistics.median(times), out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    os.environ["DICP_CACHE_DIR"] = tempfile.mkdtemp(prefix="dicp-bench-")
    print(
        f"{'model':36s} {'engine':10s} {'compile s':>10s} {'step ms':>9s} "
        f"{'step vs eager':>14s} {'max |diff|':>11s}"
    )
    for name, (make_model, make_input) in MODELS.items():
        torch.manual_seed(0)
        model, x = make_model().eval(), make_input()
        results = {}
        for engine in ENGINES:
            try:
                results[engine] = measure(engine, model, x, args.repeat)
            except Exception as error:  # one engine failing must not hide the others' numbers
                print(
                    f"{name:36s} {engine:10s} failed: {type(error).__name__}: "
                    f"{str(error).splitlines()[0][:80]}"
                )
        eager_step, reference = results["eager"][1], results["eager"][2]
        for engine, (compile_s, step_s, out) in results.items():
            diff = (out - reference).abs().max().item()
            print(
                f"{name:36s} {engine:10s} {compile_s:10.2f} {step_s * 1e3:9.3f} "
                f"{eager_step / step_s:13.2f}x {diff:11.2e}"
            )


if __name__ == "__main__":
    main()
