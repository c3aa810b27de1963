"""Training steps compiled whole (forward, backward and the optimizer's update in one
`torch.compile`d function): step time under eager, inductor and new_backendgraph, and where
dicp's step spends its time.

The workloads of issue 48: tiny random configurations of transformers' LLaMA and BERT (no
downloads) and a ResNet-style CNN on 32x32 images, each with SGD (momentum 0.9). Each backend
trains its own copy of the model; steps are timed interleaved (bench_workloads.py) and a step
time is the median over all rounds. Ratios are against the same run's eager and inductor.

`--profile` runs dicp's step under torch.profiler with DICP_PROFILE_KERNELS=1, which names each
kernel, library call (matrix product, convolution), eager fallback and copy of the compiled
graphs, and prints per step: time in dicp's kernels, in library calls, in eager fallbacks and
copies, and the rest (the wrapper's Python, autograd's engine, the runtime wrappers), then the
costliest calls by name (`<graph>/<call> <ATen op that built it>`).

    python bench/bench_training.py                       # 2 threads, all workloads
    python bench/bench_training.py --workloads cnn --profile
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
from bench.bench_workloads import (BACKENDS, DICP, EAGER, interleaved_ms,
                                   print_table, timing_arguments)


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


class TrainingStep:
    """A model, its loss on fixed inputs and an SGD update, as one function of no arguments
    per backend (`compiled(backend)`), each backend on its own copy of the model."""

    def __init__(self, model, loss):
        self.model, self.loss = model, loss

    def compiled(self, backend):
        model = copy.deepcopy(self.model).train()
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)

        def step():
            loss = self.loss(model)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            return loss.detach()
        return step if backend == EAGER else torch.compile(step, backend=backend)

    @staticmethod
    def step(fn):  # interleaved_ms's interface: a step through `fn`
        return fn()


def _seeded(build):
    torch.manual_seed(0)
    return build()


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    config = LlamaConfig(vocab_size=512, hidden_size=128, intermediate_size=256,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=128)
    ids = torch.randint(512, (4, 64), generator=_gen())
    return TrainingStep(_seeded(lambda: LlamaForCausalLM(config)),
                        lambda model: model(input_ids=ids, labels=ids).loss)


def bert():
    from transformers import BertConfig, BertForMaskedLM
    config = BertConfig(vocab_size=512, hidden_size=128, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=256, max_position_embeddings=128,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    ids = torch.randint(512, (4, 64), generator=_gen())
    return TrainingStep(_seeded(lambda: BertForMaskedLM(config)),
                        lambda model: model(input_ids=ids, labels=ids).loss)


def cnn():
    from bench.heldout import SmallResNet
    images = torch.randn(16, 3, 32, 32, generator=_gen())
    labels = torch.randint(10, (16,), generator=_gen())
    return TrainingStep(_seeded(SmallResNet),
                        lambda model: F.cross_entropy(model(images), labels))


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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", action="store_true",
                        help="print where dicp's step spends its time instead of timing")
    args, names = timing_arguments(parser, WORKLOADS, argv)
    if args.profile:
        os.environ["DICP_PROFILE_KERNELS"] = "1"
    results = {}
    for name in names:
        dynamo.reset()
        workload = WORKLOADS[name]()
        if args.profile:
            print_profile(name, *profile_breakdown(workload.compiled(DICP)))
            continue
        fns = {backend: workload.compiled(backend) for backend in BACKENDS}
        for fn in fns.values():
            for _ in range(3):
                fn()
        results[name] = interleaved_ms(workload, fns, args.rounds, args.steps)
        print(f"# {name}: done", file=sys.stderr, flush=True)
    if results:
        print_table(results)


if __name__ == "__main__":
    main()
