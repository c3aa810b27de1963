"""Training steps of more architectures than bench_training.py's three, compiled whole
(forward, backward and the optimizer's update in one `torch.compile`d function): tiny random
configurations of transformers' GPT-2, Qwen2, ViT, Swin, ConvNeXt, MobileNetV2 and ResNet (no
downloads), and hand-written TransformerEncoder, VGG-style, MLP and GRU models; AdamW or Adam
where such models usually train with it, SGD with momentum elsewhere. Timed like
bench_training.py: eager, inductor and new_backendgraph interleaved, each on its own copy.

The issue-48 held-out check, kept here so every machine has it: models beyond the bench's
own, including optimizers over more parameters than a small bench model has.

    python bench/bench_training_models.py                    # every model, 2 threads
    python bench/bench_training_models.py --workloads vit,swin --rounds 20
"""

import argparse
import sys
from pathlib import Path

import torch
import torch._dynamo as dynamo
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.bench_training import TrainingStep, _gen, _seeded, sgd
from bench.bench_workloads import BACKENDS, interleaved_ms, print_table, timing_arguments


def adamw(parameters):
    return torch.optim.AdamW(parameters, lr=1e-3)


def adam(parameters):
    return torch.optim.Adam(parameters, lr=1e-3)


def _text(config_class, model_class, optimizer, **config):
    ids = torch.randint(512, (4, 64), generator=_gen())
    return TrainingStep(
        _seeded(lambda: model_class(config_class(vocab_size=512, **config))),
        lambda model, ids: model(input_ids=ids, labels=ids).loss,
        ids,
        optimizer=optimizer,
    )


def _vision(config_class, model_class, optimizer, **config):
    images = torch.randn(8, 3, 64, 64, generator=_gen())
    labels = torch.randint(10, (8,), generator=_gen())
    return TrainingStep(
        _seeded(lambda: model_class(config_class(num_labels=10, **config))),
        lambda model, x, y: F.cross_entropy(model(pixel_values=x).logits, y),
        images,
        labels,
        optimizer=optimizer,
    )


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    dropouts = dict(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    shape = dict(n_positions=128, n_embd=128, n_layer=2, n_head=4)
    return _text(GPT2Config, GPT2LMHeadModel, sgd, **shape, **dropouts)


def qwen2():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    shape = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2)
    heads = dict(num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    return _text(Qwen2Config, Qwen2ForCausalLM, adamw, **shape, **heads)


def vit():
    from transformers import ViTConfig, ViTForImageClassification

    shape = dict(image_size=64, patch_size=8, hidden_size=128, intermediate_size=256)
    return _vision(
        ViTConfig,
        ViTForImageClassification,
        adamw,
        num_hidden_layers=2,
        num_attention_heads=4,
        **shape,
    )


def swin():
    from transformers import SwinConfig, SwinForImageClassification

    shape = dict(image_size=64, patch_size=4, embed_dim=32, depths=[1, 1], num_heads=[2, 4])
    return _vision(SwinConfig, SwinForImageClassification, adamw, window_size=4, **shape)


def convnext():
    from transformers import ConvNextConfig, ConvNextForImageClassification

    shape = dict(hidden_sizes=[16, 32, 64, 64], depths=[1, 1, 1, 1])
    return _vision(ConvNextConfig, ConvNextForImageClassification, adamw, **shape)


def mobilenet():
    from transformers import MobileNetV2Config, MobileNetV2ForImageClassification

    config = dict(image_size=64, depth_multiplier=0.35)
    return _vision(MobileNetV2Config, MobileNetV2ForImageClassification, sgd, **config)


def resnet():
    from transformers import ResNetConfig, ResNetForImageClassification

    shape = dict(embedding_size=16, hidden_sizes=[16, 32, 64, 64], depths=[1, 1, 1, 1])
    return _vision(ResNetConfig, ResNetForImageClassification, sgd, layer_type="basic", **shape)


def encoder():
    def build():
        layer = nn.TransformerEncoderLayer(128, 4, 256, dropout=0.0, batch_first=True)
        return nn.TransformerEncoder(layer, 2)

    x = torch.randn(8, 32, 128, generator=_gen())
    return TrainingStep(_seeded(build), lambda m, x: m(x).square().mean(), x, optimizer=adam)


def vgg():
    def block(cin, cout):
        return [nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU()]

    def build():
        features = [*block(3, 16), *block(16, 16), nn.MaxPool2d(2), *block(16, 32)]
        features += [*block(32, 32), nn.MaxPool2d(2), nn.Flatten()]
        return nn.Sequential(*features, nn.Linear(32 * 8 * 8, 64), nn.ReLU(), nn.Linear(64, 10))

    x, y = torch.randn(16, 3, 32, 32, generator=_gen()), torch.randint(10, (16,), generator=_gen())
    loss = lambda m, x, y: F.cross_entropy(m(x), y)
    return TrainingStep(_seeded(build), loss, x, y, optimizer=adam)


def mlp_adamw():
    def build():
        layers = [nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 512), nn.GELU()]
        return nn.Sequential(*layers, nn.Linear(512, 64))

    x = torch.randn(64, 256, generator=_gen())
    return TrainingStep(_seeded(build), lambda m, x: m(x).square().mean(), x, optimizer=adamw)


class GRULanguageModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(256, 64)
        self.rnn = nn.GRU(64, 128, batch_first=True)
        self.out = nn.Linear(128, 256)

    def forward(self, ids):
        return self.out(self.rnn(self.embed(ids))[0])


def gru():
    ids = torch.randint(256, (8, 24), generator=_gen())
    loss = lambda m, ids: F.cross_entropy(m(ids).flatten(0, 1), ids.flatten())
    return TrainingStep(_seeded(GRULanguageModel), loss, ids)


WORKLOADS = {
    f.__name__: f
    for f in (gpt2, qwen2, encoder, vgg, mlp_adamw, gru, resnet, convnext, vit, mobilenet, swin)
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args, names = timing_arguments(parser, WORKLOADS, argv)
    results = {}
    for name in names:
        dynamo.reset()
        workload = WORKLOADS[name]()
        fns = {backend: workload.compiled(backend) for backend in BACKENDS}
        for fn in fns.values():
            for _ in range(3):
                fn()
        results[name] = interleaved_ms(workload, fns, args.rounds, args.steps)
        print(f"# {name}: done", file=sys.stderr, flush=True)
    print_table(results)


if __name__ == "__main__":
    main()
