"""Hugging Face architectures through a dicp backend, against eager: the forward in eval mode
(static, and dynamic at two sizes) and one training step (every parameter's gradient), with
eager and SDPA attention. Models are built from small configs with random weights (no
download) and every dropout, drop-path and layer-drop rate set to 0, so eager is deterministic.

    python test/scripts/hf_models.py                      # every architecture below
    python test/scripts/hf_models.py swin t5 --backend new_backendgraph

One line per check; the exit status is 1 if any compiled result differs from eager or any
compile fails. A model that refuses an attention implementation (a transformers ValueError)
is reported and skipped, since that is transformers' choice, not a failure.
"""

import argparse
import sys

import torch
import transformers

SMALL = dict(
    vocab_size=128,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    max_position_embeddings=128,
)
TEXT = {
    "llama": dict(SMALL, num_key_value_heads=2),
    "mistral": dict(SMALL, num_key_value_heads=2),
    "qwen2": dict(SMALL, num_key_value_heads=2),
    "phi": dict(SMALL),
    "gemma": dict(SMALL, num_key_value_heads=2, head_dim=16),
    "gpt2": dict(vocab_size=128, n_embd=64, n_layer=2, n_head=4, n_positions=128),
    "falcon": dict(vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4),
    "bloom": dict(vocab_size=128, hidden_size=64, n_layer=2, n_head=4),
    "opt": dict(
        vocab_size=128,
        hidden_size=64,
        ffn_dim=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        word_embed_proj_dim=64,
        max_position_embeddings=128,
    ),
    "gpt_neo": dict(
        vocab_size=128,
        hidden_size=64,
        num_layers=2,
        num_heads=4,
        window_size=4,
        attention_types=[[["global", "local"], 1]],
        max_position_embeddings=128,
    ),
    "bert": dict(SMALL),
    "roberta": dict(SMALL, max_position_embeddings=130),
    "distilbert": dict(
        vocab_size=128, dim=64, hidden_dim=128, n_layers=2, n_heads=4, max_position_embeddings=128
    ),
    "albert": dict(SMALL, embedding_size=32),
    "electra": dict(SMALL, embedding_size=32),
    "deberta-v2": dict(SMALL),
    "mobilebert": dict(
        vocab_size=128,
        hidden_size=64,
        embedding_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intra_bottleneck_size=32,
        true_hidden_size=32,
        num_feedforward_networks=2,
    ),
    "t5": dict(vocab_size=128, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4),
    "bart": dict(
        vocab_size=128,
        d_model=64,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=128,
        decoder_ffn_dim=128,
        max_position_embeddings=128,
    ),
    "mixtral": dict(SMALL, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2),
    "qwen2_moe": dict(
        SMALL,
        num_key_value_heads=2,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=32,
        shared_expert_intermediate_size=64,
    ),
    "gpt_neox": dict(SMALL, rotary_pct=0.5),
    "gemma2": dict(SMALL, num_key_value_heads=2, head_dim=16, sliding_window=4),
    "qwen3": dict(SMALL, num_key_value_heads=2, head_dim=16),
    "mpt": dict(
        d_model=64, n_heads=4, n_layers=2, expansion_ratio=2, max_seq_len=128, vocab_size=128
    ),
    "xlnet": dict(vocab_size=128, d_model=64, n_layer=2, n_head=4, d_inner=128),
    "modernbert": dict(SMALL, pad_token_id=0, global_attn_every_n_layers=2, local_attention=4),
}
VISION = {
    "vit": dict(
        image_size=32,
        patch_size=8,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
    ),
    "convnext": dict(image_size=32, hidden_sizes=[16, 32], depths=[1, 1], num_stages=2),
    "resnet": dict(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic"),
    "swin": dict(
        image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 4], window_size=4
    ),
    "swinv2": dict(
        image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 4], window_size=4
    ),
    "segformer": dict(
        num_encoder_blocks=2,
        depths=[1, 1],
        sr_ratios=[2, 1],
        hidden_sizes=[16, 32],
        num_attention_heads=[1, 2],
        decoder_hidden_size=32,
        strides=[4, 2],
        patch_sizes=[7, 3],
    ),
    "mobilevit": dict(
        image_size=32, hidden_sizes=[16, 24, 32], neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64]
    ),
    "dinov2": dict(
        image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=2, num_attention_heads=4
    ),
    "beit": dict(
        image_size=32,
        patch_size=8,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        use_relative_position_bias=True,
    ),
}
# speech encoders on raw audio; no time masks in training (they are random)
SPEECH = dict(
    mask_time_prob=0.0,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=128,
    conv_dim=[16, 16],
    conv_stride=[5, 2],
    conv_kernel=[10, 3],
    num_conv_pos_embeddings=16,
    num_conv_pos_embedding_groups=4,
)
AUDIO = {"wav2vec2": SPEECH, "wavlm": SPEECH}
ALL = list(TEXT) + list(VISION) + list(AUDIO)
SIZES = [(2, 7), (3, 12)]  # (batch, sequence length): the static size, then a second dynamic one
TOLERANCE = dict(rtol=1e-4, atol=1e-4)
GRAD_TOLERANCE = dict(rtol=1e-3, atol=1e-5)


class Refused(Exception):
    """transformers refuses this attention implementation for this model."""


def build(name, attention):
    config = transformers.AutoConfig.for_model(name, **{**TEXT, **VISION, **AUDIO}[name])
    for key, value in config.to_dict().items():
        if "drop" in key and isinstance(value, float):  # dropout, pdrop, drop_path, layerdrop
            setattr(config, key, 0.0)
    config._attn_implementation = attention
    torch.manual_seed(0)
    try:
        return transformers.AutoModel.from_config(config)
    except ValueError as error:
        raise Refused(str(error).splitlines()[0]) from error


def sample(name, batch, length):
    if name in VISION:
        return dict(pixel_values=torch.randn(batch, 3, 32, 32))
    if name in AUDIO:
        return dict(input_values=torch.randn(batch, 400 + 40 * length))
    inputs = dict(
        input_ids=torch.randint(0, 128, (batch, length)),
        attention_mask=torch.ones(batch, length, dtype=torch.long),
    )
    if name != "distilbert":
        inputs["attention_mask"][0, :2] = 0  # padding on the left of the first sequence
    if name in ("t5", "bart"):
        inputs["decoder_input_ids"] = torch.randint(0, 128, (batch, max(1, length - 2)))
    return inputs


def float_outputs(output):
    values = output.values() if hasattr(output, "values") else output
    return [v for v in values if isinstance(v, torch.Tensor) and v.is_floating_point()]


def max_error(got, want):
    return max((g - w).abs().max().item() for g, w in zip(got, want))


def check_inference(name, attention, backend, dynamic):
    """Rows (label, ok, detail) for the eval forward at each size the mode runs."""
    torch._dynamo.reset()
    model = build(name, attention).eval()
    compiled = torch.compile(model, backend=backend, dynamic=dynamic)
    rows = []
    for batch, length in SIZES if dynamic else SIZES[:1]:
        inputs = sample(name, batch, length)
        with torch.no_grad():
            got, want = float_outputs(compiled(**inputs)), float_outputs(model(**inputs))
        ok = len(got) == len(want) and all(
            g.shape == w.shape and torch.allclose(g, w, **TOLERANCE) for g, w in zip(got, want)
        )
        shape = "x".join(map(str, next(iter(inputs.values())).shape))
        rows.append((f"eval {shape}", ok, f"max error {max_error(got, want):.1e}"))
    return rows


def check_training(name, attention, backend, dynamic):
    """One row: the loss and every parameter's gradient after one backward."""
    torch._dynamo.reset()
    model, reference = build(name, attention).train(), build(name, attention).train()
    reference.load_state_dict(model.state_dict())
    inputs = sample(name, *SIZES[0])
    compiled = torch.compile(model, backend=backend, dynamic=dynamic)
    for outputs in (compiled(**inputs), reference(**inputs)):
        sum(t.pow(2).mean() for t in float_outputs(outputs)).backward()
    wrong = [
        n
        for (n, p), q in zip(model.named_parameters(), reference.parameters())
        if q.grad is not None
        and (p.grad is None or not torch.allclose(p.grad, q.grad, **GRAD_TOLERANCE))
    ]
    checked = sum(q.grad is not None for q in reference.parameters())
    detail = f"{checked} gradients" + (f", wrong: {', '.join(wrong[:4])}" if wrong else "")
    return [("train", not wrong, detail)]


def run(name, attention, backend):
    """Print every check of one model with one attention; return whether all passed."""
    passed = True
    for dynamic in (False, True):
        for check in (check_inference, check_training):
            try:
                rows = check(name, attention, backend, dynamic)
            except Refused as refusal:
                print(f"{name:11} {attention:6} skipped: {refusal}", flush=True)
                return passed
            except Exception as error:  # a failed compile is a result to report, not a stop
                rows = [(check.__name__, False, f"{type(error).__name__}: {str(error)[:300]}")]
            for label, ok, detail in rows:
                mode = "dynamic" if dynamic else "static"
                print(
                    f"{name:11} {attention:6} {mode:7} {label:16} "
                    f"{'ok' if ok else 'MISMATCH'}  {detail}",
                    flush=True,
                )
                passed &= ok
    return passed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "models",
        nargs="*",
        metavar="model",
        help=f"architectures to run (default: all): {', '.join(ALL)}",
    )
    parser.add_argument("--backend", default="new_backendgraph")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.models) - set(ALL))
    if unknown:
        parser.error(f"unknown model {', '.join(unknown)}; known: {', '.join(ALL)}")
    passed = True
    for name in args.models or ALL:
        # vision models have no attention choice worth a second run
        for attention in ("eager",) if name in VISION else ("eager", "sdpa"):
            passed &= run(name, attention, args.backend)
    print("all match eager" if passed else "MISMATCHES above")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
