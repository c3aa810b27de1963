"""Compile-time workloads beyond the project's own bench (issue 49's "held-out" set): training
steps compiled whole, inference, models from the transformers library built from configs (tiny,
random, no downloads), a hand-written ResNet-style CNN, and dynamic shapes.

Each entry builds a `Case` (bench_models.Case: a model and one step through a compiled
callable); `compile(case, backend)` is how the step's callable is compiled (dynamic or not).
torchvision is never imported.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from bench.bench_models import Case, inference


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def _seeded(build):
    torch.manual_seed(0)
    return build()


class MLP(nn.Module):
    def __init__(self, sizes=(256, 512, 512, 64)):
        super().__init__()
        layers = []
        for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
            layers += [nn.Linear(a, b)] + ([nn.GELU()] if i < len(sizes) - 2 else [])
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


class Block(nn.Module):
    """A ResNet basic block: conv-BN-ReLU-conv-BN plus the (projected) input, ReLU."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.short = (
            nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
            if stride != 1 or cin != cout
            else nn.Identity()
        )

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + self.short(x))


class SmallResNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2)
        )
        self.blocks = nn.Sequential(Block(16, 16, 1), Block(16, 32, 2), Block(32, 64, 2))
        self.head = nn.Linear(64, classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def mlp_infer():
    return inference(_seeded(MLP).eval(), torch.randn(32, 256, generator=_gen()))


def cnn_train():
    model = _seeded(SmallResNet).train()
    images, labels = torch.randn(4, 3, 32, 32, generator=_gen()), torch.randint(10, (4,))

    def step(fn):
        model.zero_grad(set_to_none=True)
        loss = F.cross_entropy(fn(images), labels)
        loss.backward()
        return loss

    return Case(model, step)


def train_step_adamw():
    """Forward, backward and AdamW's update compiled as one function (the compiled callable
    is the step itself: `step(fn)` calls `fn(x, y)`)."""
    model = _seeded(lambda: MLP((64, 128, 128, 10))).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    x, y = torch.randn(16, 64, generator=_gen()), torch.randint(10, (16,), generator=_gen())

    def train_step(x, y):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss.detach()

    return Case(train_step, lambda fn: fn(x, y))


def _llama_config():
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
    )


def hf_llama_infer():
    from transformers import LlamaForCausalLM

    model = _seeded(lambda: LlamaForCausalLM(_llama_config())).eval()
    ids = torch.randint(256, (2, 16), generator=_gen())

    def step(fn):
        with torch.no_grad():
            return fn(input_ids=ids, use_cache=False).logits

    return Case(model, step)


def hf_bert_train():
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(
        vocab_size=256,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=64,
    )
    model = _seeded(lambda: BertForMaskedLM(config)).train()
    ids = torch.randint(256, (2, 16), generator=_gen())

    def step(fn):
        model.zero_grad(set_to_none=True)
        loss = fn(input_ids=ids, labels=ids).loss
        loss.backward()
        return loss

    return Case(model, step)


def gpt2_model(layers=2, width=64, vocab=256, positions=64):
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=vocab,
        n_positions=positions,
        n_embd=width,
        n_layer=layers,
        n_head=4,
        bos_token_id=0,
        eos_token_id=0,
    )
    return _seeded(lambda: GPT2LMHeadModel(config)).eval()


def gpt2_decode_case(layers=2, width=64):
    """A prefill of 8 tokens, then one decode step with the prefill's cache: two graphs."""
    model = gpt2_model(layers, width)
    ids = torch.randint(256, (1, 8), generator=_gen())

    def step(fn):
        with torch.no_grad():
            out = fn(input_ids=ids, use_cache=True)
            token = out.logits[:, -1:].argmax(-1)
            return fn(input_ids=token, past_key_values=out.past_key_values, use_cache=True).logits

    return Case(model, step)


def hf_gpt2_decode():
    return gpt2_decode_case()


def dynamic(case):
    """`case` compiled with dynamic=True (every size symbolic)."""
    case.dynamic = True
    return case


def dyn_block_infer():
    from examples.quickstart import TransformerBlock

    case = inference(_seeded(TransformerBlock).eval(), torch.randn(2, 24, 128, generator=_gen()))
    return dynamic(case)


def dyn_mlp_train():
    model = _seeded(lambda: MLP((64, 128, 10))).train()
    x, y = torch.randn(12, 64, generator=_gen()), torch.randint(10, (12,), generator=_gen())

    def step(fn):
        model.zero_grad(set_to_none=True)
        loss = F.cross_entropy(fn(x), y)
        loss.backward()
        return loss

    return dynamic(Case(model, step))


HELDOUT = {
    "mlp_infer": mlp_infer,
    "cnn_train": cnn_train,
    "train_step_adamw": train_step_adamw,
    "hf_llama_infer": hf_llama_infer,
    "hf_bert_train": hf_bert_train,
    "hf_gpt2_decode": hf_gpt2_decode,
    "dyn_block_infer": dyn_block_infer,
    "dyn_mlp_train": dyn_mlp_train,
}
