"""Training steps compiled whole (forward, backward and the optimizer's update in one
`torch.compile`d function): step time under eager, inductor and new_backendgraph, and where
dicp's step spends its time.

The workloads of issue 48: tiny random configurations of transformers' LLaMA and BERT (no
downloads) and a ResNet-style CNN on 32x32 images, each with SGD (momentum 0.9). Each backend
trains its own copy of the model; steps are timed interleaved (bench_workloads.py) and a step
time is the median over all rounds. Ratios are against the same run's eager and inductor.

`--device emu` runs the steps on the emulated accelerator (dicp.emu) under eager and emugraph,
and reports for each model the peak device memory of one step after warm-up (the allocator's
statistics: the model's resting state plus the step's highest allocation above it, the peak
reset before each step) and the median step time, compiled against eager in the same run. The
emulator runs on the CPU: its times are indicative only.

`--profile` runs dicp's step under torch.profiler with DICP_PROFILE_KERNELS=1, which names each
kernel, library call (matrix product, convolution), eager fallback and copy of the compiled
graphs, and prints per step: time in dicp's kernels, in library calls, in eager fallbacks and
copies, and the rest (the wrapper's Python, autograd's engine, the runtime wrappers), then the
costliest calls by name (`<graph>/<call> <ATen op that built it>`).

    python bench/bench_training.py                       # 2 threads, all workloads
    python bench/bench_training.py --workloads cnn --profile
    python bench/bench_training.py --device emu          # peak memory and time on emu
"""

import argparse
import copy
import os
import sys
from collections import defaultdict
from pathlib import Path

import torch
import torch._dynamo as dynamo
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.bench_workloads import (
    BACKENDS,
    DICP,
    EAGER,
    interleaved_ms,
    print_table,
    timing_arguments,
)

DEVICE_BACKENDS = {"emu": "emugraph"}  # device -> the dicp backend compiling for it


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def sgd(parameters):
    return torch.optim.SGD(parameters, lr=1e-3, momentum=0.9)


class TrainingStep:
    """A model, its loss on fixed inputs and an optimizer's update (SGD with momentum unless
    `optimizer`, a function of the parameters, says otherwise), as one function of no
    arguments per backend (`compiled(backend, device)`), each backend on its own copy of the
    model and inputs on `device`."""

    def __init__(self, model, loss, *inputs, optimizer=sgd):
        self.model, self.loss, self.inputs, self.optimizer = model, loss, inputs, optimizer

    def compiled(self, backend, device="cpu"):
        model = copy.deepcopy(self.model).train().to(device)
        inputs = [t.to(device) for t in self.inputs]
        optimizer = self.optimizer(model.parameters())

        def step():
            loss = self.loss(model, *inputs)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            return loss.detach()

        fn = step if backend == EAGER else torch.compile(step, backend=backend)
        return fn if device == "cpu" else _synchronized(fn, device)

    @staticmethod
    def step(fn):  # interleaved_ms's interface: a step through `fn`
        return fn()


def _synchronized(fn, device):
    """`fn`, returning once the device has done its work (a step's time includes it)."""
    runtime = getattr(torch, device)

    def step():
        out = fn()
        runtime.synchronize()
        return out

    return step


def _seeded(build):
    torch.manual_seed(0)
    return build()


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=512,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
    )
    ids = torch.randint(512, (4, 64), generator=_gen())
    return TrainingStep(
        _seeded(lambda: LlamaForCausalLM(config)),
        lambda model, ids: model(input_ids=ids, labels=ids).loss,
        ids,
    )


def bert():
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(
        vocab_size=512,
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=256,
        max_position_embeddings=128,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    ids = torch.randint(512, (4, 64), generator=_gen())
    return TrainingStep(
        _seeded(lambda: BertForMaskedLM(config)),
        lambda model, ids: model(input_ids=ids, labels=ids).loss,
        ids,
    )


def cnn():
    from bench.heldout import SmallResNet

    images = torch.randn(16, 3, 32, 32, generator=_gen())
    labels = torch.randint(10, (16,), generator=_gen())
    return TrainingStep(
        _seeded(SmallResNet),
        lambda model, images, labels: F.cross_entropy(model(images), labels),
        images,
        labels,
    )


WORKLOADS = {"llama": llama, "bert": bert, "cnn": cnn}


def profile_breakdown(step, steps=10):
    """Per-step milliseconds by kind of call, and the costliest calls by name."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            with torch.profiler.record_function("dicp_bench_step"):
                step()
    kinds, calls = defaultdict(float), defaultdict(float)
    total = 0.0
    for event in prof.key_averages():
        ms = event.cpu_time_total / 1e3 / steps
        if event.key == "dicp_bench_step":
            total = ms
        elif "/" in event.key and event.key.split("/")[0].startswith(DICP):
            kinds[_kind(event.key)] += ms
            calls[event.key] += ms
    kinds["rest (wrapper Python, autograd engine, runtime wrappers)"] = total - sum(kinds.values())
    return total, dict(kinds), sorted(calls.items(), key=lambda kv: -kv[1])


def _kind(label):
    call = label.split("/", 1)[1]
    if call.startswith("kernel_"):
        return "dicp kernels"
    if call.startswith("copy to"):
        return "copies"
    return "library calls" if " library " in call else "eager fallbacks"


def print_profile(name, total, kinds, calls, top=12):
    print(f"\n## {name}: {total:.3f} ms per step")
    for kind, ms in sorted(kinds.items(), key=lambda kv: -kv[1]):
        print(f"  {kind:<58} {ms:8.3f} ms {100 * ms / total:5.1f}%")
    for label, ms in calls[:top]:
        print(f"    {ms:8.3f} ms  {label}")


def device_steps(workload, device):
    """(backend -> step, backend -> peak bytes) on `device` for eager and the device's dicp
    backend, each warmed up. A step's peak is what its copy of the model and inputs holds
    at rest plus the highest allocation above that during one step (the allocator's peak is
    reset just before it)."""
    runtime = getattr(torch, device)
    fns, peaks = {}, {}
    for backend in (EAGER, DEVICE_BACKENDS[device]):
        runtime.synchronize()
        before = runtime.memory_allocated()
        fns[backend] = fn = workload.compiled(backend, device)
        for _ in range(3):
            fn()
        runtime.reset_peak_memory_stats()
        fn()
        peaks[backend] = runtime.max_memory_allocated() - before
    return fns, peaks


def print_device_table(results, device):
    """Peak memory and step time, compiled against eager, per workload on `device`."""
    compiled = DEVICE_BACKENDS[device]
    print(
        f"{'workload':<10} {'eager MB':>9} {'compiled MB':>12} {'memory':>8} "
        f"{'eager ms':>9} {'compiled ms':>12} {'time':>8}"
    )
    for name, (ms, peaks) in results.items():
        mb = {backend: peak / 2**20 for backend, peak in peaks.items()}
        print(
            f"{name:<10} {mb[EAGER]:9.2f} {mb[compiled]:12.2f} {mb[compiled] / mb[EAGER]:7.2f}x "
            f"{ms[EAGER]:9.3f} {ms[compiled]:12.3f} {ms[compiled] / ms[EAGER]:7.2f}x"
        )
    print(
        f"memory: peak device memory of one step, model state included ({compiled} / eager); "
        f"time: median step time ({compiled} / eager); both on {device}, lower is better."
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--profile",
        action="store_true",
        help="print where dicp's step spends its time instead of timing",
    )
    parser.add_argument(
        "--device",
        default="cpu",
        choices=["cpu", *DEVICE_BACKENDS],
        help="run the steps there: eager against the device's dicp backend, "
        "peak memory and step time",
    )
    args, names = timing_arguments(parser, WORKLOADS, argv)
    if args.device != "cpu":
        import dicp.emu  # noqa: F401  (the emulated device; a vendor's runtime imports its own)
    if args.profile:
        os.environ["DICP_PROFILE_KERNELS"] = "1"
    results = {}
    for name in names:
        dynamo.reset()
        workload = WORKLOADS[name]()
        if args.profile:
            print_profile(name, *profile_breakdown(workload.compiled(DICP)))
            continue
        if args.device != "cpu":
            fns, peaks = device_steps(workload, args.device)
            results[name] = interleaved_ms(workload, fns, args.rounds, args.steps), peaks
        else:
            fns = {backend: workload.compiled(backend) for backend in BACKENDS}
            for fn in fns.values():
                for _ in range(3):
                    fn()
            results[name] = interleaved_ms(workload, fns, args.rounds, args.steps)
        print(f"# {name}: done", file=sys.stderr, flush=True)
    if results and args.device != "cpu":
        print_device_table(results, args.device)
    elif results:
        print_table(results)


if __name__ == "__main__":
    main()
