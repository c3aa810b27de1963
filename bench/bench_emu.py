"""What the emulated device costs per eager op, on the host and in all, against the CPU.

For each case: the host's time to enqueue one call (the loop without waiting), the time per call
including the device's work (the loop, then synchronize), and the same op on the CPU. A native
op's host time is its launch (policy, layouts, allocation, enqueue); a fallback's includes its
copies to the host and back, since it waits for its inputs. One training step of a small MLP
(SGD) closes the table, with isolation on and off as the environment says.

    python bench/bench_emu.py
    DICP_EMU_ISOLATION=0 python bench/bench_emu.py      # device memory readable: no mprotect
"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

import dicp.emu  # noqa: F401

CALLS = 2000


def per_call(fn, sync, calls=CALLS):
    """(host us per call, total us per call)."""
    fn()
    sync()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    enqueued = time.perf_counter()
    sync()
    done = time.perf_counter()
    return (enqueued - start) / calls * 1e6, (done - start) / calls * 1e6


def cases(device):
    x = torch.randn(256, 256, device=device)
    return {
        "add (native)": lambda: x + 1,
        "add_ (native, in place)": lambda: x.add_(1),
        "mm 256 (native)": lambda: x @ x,
        "sum (native)": lambda: x.sum(1),
        "atan (fallback)": lambda: torch.atan(x),
        "cumsum (fallback)": lambda: x.cumsum(1),
        "view (structural)": lambda: x.view(-1),
    }


def training_step(device):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)
    ).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    data, target = torch.randn(128, 64, device=device), torch.randint(0, 10, (128,), device=device)

    def step():
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(data), target).backward()
        optimizer.step()

    return step


def main():
    emu_sync, cpu_sync = torch.emu.synchronize, lambda: None
    print(f"torch {torch.__version__}, isolation {'on' if torch.emu._C.isolation() else 'off'}")
    print(f"{'case':28} {'emu host us':>12} {'emu total us':>13} {'cpu us':>9}")
    emu, cpu = cases("emu"), cases("cpu")
    for name in emu:
        host, total = per_call(emu[name], emu_sync)
        _, on_cpu = per_call(cpu[name], cpu_sync)
        print(f"{name:28} {host:12.1f} {total:13.1f} {on_cpu:9.1f}")
    host, total = per_call(training_step("emu"), emu_sync, calls=50)
    _, on_cpu = per_call(training_step("cpu"), cpu_sync, calls=50)
    print(f"{'MLP SGD step':28} {host:12.1f} {total:13.1f} {on_cpu:9.1f}")


if __name__ == "__main__":
    main()
