"""Decoding speed: tokens per second of Hugging Face greedy `generate` with a static KV cache,
the model's forward compiled, under eager, inductor and new_backendgraph (issue 48).

Each model is a tiny random configuration of transformers' GPT-2 and LLaMA (no downloads). Every
backend decodes on its own copy of the model with `cache_implementation="static"` and
`disable_compile=True` (transformers would otherwise compile the forward itself, with inductor);
the forward is `torch.compile`d with the backend, warmed up (prefill and decode graphs), then whole
`generate` calls are timed interleaved (bench_workloads.py) and tokens/s is new tokens over the
median call. Each backend's tokens must equal eager's, token for token: a run that differs
says so and exits non-zero.

    python bench/bench_decode.py                          # 2 threads, gpt2 and llama
    python bench/bench_decode.py --models llama --width 256 --layers 4
"""

import argparse
import copy
import sys
from pathlib import Path

import torch
import torch._dynamo as dynamo

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.bench_workloads import BACKENDS, DICP, EAGER, INDUCTOR, interleaved_ms, timing_arguments
from bench.heldout import gpt2_model

VOCAB = 512


def gpt2(width, layers):
    return gpt2_model(layers, width, vocab=VOCAB, positions=256)


def llama(width, layers):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=width,
        intermediate_size=2 * width,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
    )
    return LlamaForCausalLM(config)


MODELS = {"gpt2": gpt2, "llama": llama}


class Decode:
    """Greedy decoding of `new_tokens` tokens after a fixed prompt, through a model whose forward
    is compiled per backend (`for_backend`); `step(model)` is one whole `generate` call."""

    def __init__(self, model, prompt, new_tokens):
        self.model, self.prompt, self.new_tokens = model, prompt, new_tokens

    def for_backend(self, backend):
        model = copy.deepcopy(self.model)
        if backend != EAGER:
            model.forward = torch.compile(model.forward, backend=backend)
        return model

    def step(self, model):
        with torch.no_grad():
            return model.generate(
                self.prompt,
                max_new_tokens=self.new_tokens,
                min_new_tokens=self.new_tokens,
                do_sample=False,
                cache_implementation="static",
                disable_compile=True,
            )


def decode_case(name, args):
    torch.manual_seed(0)
    model = MODELS[name](args.width, args.layers).eval()
    model.generation_config.pad_token_id = 0
    prompt = torch.randint(VOCAB, (1, args.prompt), generator=torch.Generator().manual_seed(0))
    return Decode(model, prompt, args.new_tokens)


def run(name, args):
    """backend -> (tokens/s, whether its tokens equal eager's)."""
    dynamo.reset()
    case = decode_case(name, args)
    models = {backend: case.for_backend(backend) for backend in BACKENDS}
    tokens = {backend: [case.step(m) for _ in range(2)][-1] for backend, m in models.items()}
    ms = interleaved_ms(case, models, args.rounds, args.steps)
    return {
        b: (1e3 * case.new_tokens / ms[b], torch.equal(tokens[b], tokens[EAGER])) for b in BACKENDS
    }


def print_results(results):
    print(
        f"{'model':<8} {'eager tok/s':>12} {'inductor':>9} {'dicp':>9} "
        f"{'dicp/eager':>11} {'dicp/ind':>9} {'tokens = eager':>15}"
    )
    for name, r in results.items():
        speed = {b: r[b][0] for b in BACKENDS}
        same = all(r[b][1] for b in BACKENDS)
        print(
            f"{name:<8} {speed[EAGER]:12.1f} {speed[INDUCTOR]:9.1f} {speed[DICP]:9.1f} "
            f"{speed[DICP] / speed[EAGER]:10.2f}x {speed[DICP] / speed[INDUCTOR]:8.2f}x "
            f"{'yes' if same else 'NO':>15}"
        )
    print("ratios are tokens/s ratios: higher is faster (dicp/ind 1.1x = 10% more tokens/s).")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--width", type=int, default=128, help="hidden size")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--prompt", type=int, default=8, help="prompt length in tokens")
    parser.add_argument("--new-tokens", type=int, default=32)
    args, names = timing_arguments(parser, MODELS, argv)
    results = {}
    for name in names:
        results[name] = run(name, args)
        print(f"# {name}: done", file=sys.stderr, flush=True)
    print_results(results)
    if not all(same for r in results.values() for _, same in r.values()):
        sys.exit("a backend's tokens differ from eager's")


if __name__ == "__main__":
    main()
