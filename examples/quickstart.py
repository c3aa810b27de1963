"""dicp quick start: compile a small transformer block with new_backendgraph, check it against
eager.

    python examples/quickstart.py [--dynamic] [--steps N]
"""

import argparse
import statistics
import time

import torch


class TransformerBlock(torch.nn.Module):
    """Pre-norm attention + GELU MLP, the building block of GPT/BERT-style models."""

    def __init__(self, dim=128, heads=4):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim)
        )

    def forward(self, x):
        batch, seq, dim = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q, k, v = (t.reshape(batch, seq, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        attention = torch.softmax(q @ k.transpose(-2, -1) / (q.shape[-1] ** 0.5), dim=-1)
        x = x + self.proj((attention @ v).transpose(1, 2).reshape(batch, seq, dim))
        return x + self.mlp(self.norm2(x))


def timed(fn, *args):
    start = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - start


def median_step_times(engines, x, steps, warmup=3):
    """Median seconds per call of each engine: after `warmup` calls each, the engines take
    turns call by call, so a busy machine slows them alike instead of whichever ran last."""
    for engine in engines:
        for _ in range(warmup):
            engine(x)
    samples = [[timed(engine, x)[1] for engine in engines] for _ in range(steps)]
    return [statistics.median(column) for column in zip(*samples)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dynamic", action="store_true", help="compile with dynamic shapes")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per engine (default 20)")
    args = parser.parse_args()

    torch.manual_seed(0)
    model = TransformerBlock().eval()
    x = torch.randn(4, 64, 128)
    compiled = torch.compile(model, backend="new_backendgraph", dynamic=args.dynamic)
    with torch.no_grad():
        expected = model(x)
        actual, compile_seconds = timed(compiled, x)
        eager_seconds, compiled_seconds = median_step_times([model, compiled], x, args.steps)
    diff = (actual - expected).abs()
    print(f"model: TransformerBlock(dim=128, heads=4), input {tuple(x.shape)}")
    print(f"first call (compile + run): {compile_seconds:.2f} s")
    print(
        f"max abs diff vs eager: {diff.max().item():.3e}, mean abs error: {diff.mean().item():.3e}"
    )
    print(
        f"median step time over {args.steps} steps after a warm-up: eager "
        f"{eager_seconds * 1e3:.2f} ms, new_backendgraph "
        f"{compiled_seconds * 1e3:.2f} ms ({compiled_seconds / eager_seconds:.2f}x eager's "
        f"time: lower is faster)"
    )
    ok = torch.allclose(actual, expected, rtol=1e-4, atol=1e-4)
    print("agreement with eager:", "OK" if ok else "MISMATCH")
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
