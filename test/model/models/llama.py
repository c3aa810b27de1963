"""A LLaMA-architecture decoder: RMSNorm, rotary embeddings, grouped-query attention, SwiGLU.

The KV cache is two explicit tensors of shape (layers, batch, kv_heads, max_len, head_dim)
passed in and returned (updated out of place), so a compiled step is a pure function. The
same forward serves prefill (positions = arange(T)) and decode (positions = [p]).
"""

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from . import seeded


@dataclass(frozen=True)
class LlamaConfig:
    vocab_size: int = 128
    hidden_size: int = 64
    intermediate_size: int = 128
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6

    @property
    def head_dim(self):
        return self.hidden_size // self.num_heads


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        # Normalize in float32 as the reference implementation does, whatever the model dtype.
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


def rotary_cos_sin(positions, head_dim, theta, dtype):
    """cos and sin of shape (T, head_dim) for integer positions of shape (T,)."""
    exponent = torch.arange(0, head_dim, 2, dtype=torch.float32, device=positions.device)
    inv_freq = 1.0 / (theta ** (exponent / head_dim))
    freqs = positions.float()[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary(x, cos, sin):
    return x * cos + rotate_half(x) * sin


def repeat_kv(x, groups):
    """(B, kv_heads, L, D) -> (B, kv_heads * groups, L, D) for grouped-query attention."""
    b, h, n, d = x.shape
    return x[:, :, None].expand(b, h, groups, n, d).reshape(b, h * groups, n, d)


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        d, hd = cfg.hidden_size, cfg.head_dim
        self.q_proj = nn.Linear(d, cfg.num_heads * hd, bias=False)
        self.k_proj = nn.Linear(d, cfg.num_kv_heads * hd, bias=False)
        self.v_proj = nn.Linear(d, cfg.num_kv_heads * hd, bias=False)
        self.o_proj = nn.Linear(cfg.num_heads * hd, d, bias=False)

    def _heads(self, x, n):
        b, t, _ = x.shape
        return x.view(b, t, n, self.cfg.head_dim).transpose(1, 2)

    def forward(self, x, cos, sin, positions, k_cache, v_cache):
        cfg = self.cfg
        q = apply_rotary(self._heads(self.q_proj(x), cfg.num_heads), cos, sin)
        k = apply_rotary(self._heads(self.k_proj(x), cfg.num_kv_heads), cos, sin)
        v = self._heads(self.v_proj(x), cfg.num_kv_heads)
        if k_cache is None:  # training: attend to this sequence only
            keys, values, key_positions = k, v, positions
        else:  # write this step into the cache; unwritten slots are masked below
            k_cache = k_cache.index_copy(2, positions, k)
            v_cache = v_cache.index_copy(2, positions, v)
            keys, values = k_cache, v_cache
            key_positions = torch.arange(k_cache.shape[2], device=x.device)
        groups = cfg.num_heads // cfg.num_kv_heads
        keys, values = repeat_kv(keys, groups), repeat_kv(values, groups)
        scores = q @ keys.transpose(-1, -2) / math.sqrt(cfg.head_dim)
        visible = positions[:, None] >= key_positions[None, :]
        scores = scores.masked_fill(~visible, torch.finfo(scores.dtype).min)
        probs = F.softmax(scores.float(), dim=-1).to(q.dtype)
        out = (probs @ values).transpose(1, 2).reshape(x.shape[0], x.shape[1], -1)
        return self.o_proj(out), k_cache, v_cache


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.input_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = Attention(cfg)
        self.post_attention_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = MLP(cfg)

    def forward(self, x, cos, sin, positions, k_cache, v_cache):
        h, k_cache, v_cache = self.self_attn(
            self.input_norm(x), cos, sin, positions, k_cache, v_cache
        )
        x = x + h
        return x + self.mlp(self.post_attention_norm(x)), k_cache, v_cache


class LlamaForCausalLM(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)

    def forward(self, input_ids, positions, k_cache=None, v_cache=None):
        """Logits (B, T, vocab) and the updated caches (None when no cache is passed)."""
        x = self.embed_tokens(input_ids)
        cos, sin = rotary_cos_sin(positions, self.cfg.head_dim, self.cfg.rope_theta, x.dtype)
        new_k, new_v = [], []
        for i, layer in enumerate(self.layers):
            layer_k = None if k_cache is None else k_cache[i]
            layer_v = None if v_cache is None else v_cache[i]
            x, layer_k, layer_v = layer(x, cos, sin, positions, layer_k, layer_v)
            new_k.append(layer_k)
            new_v.append(layer_v)
        logits = self.lm_head(self.norm(x))
        if k_cache is None:
            return logits, None, None
        return logits, torch.stack(new_k), torch.stack(new_v)

    def empty_cache(self, batch, max_len, dtype):
        cfg = self.cfg
        shape = (cfg.num_layers, batch, cfg.num_kv_heads, max_len, cfg.head_dim)
        return torch.zeros(shape, dtype=dtype), torch.zeros(shape, dtype=dtype)


def _init_weights(model):
    # Variance-preserving projections, and a wide lm_head so greedy choices are rarely near-ties.
    for name, p in model.named_parameters():
        if name.endswith("norm.weight"):
            continue
        fan_in = p.shape[-1] if p.dim() > 1 and "embed" not in name else 1
        scale = 4.0 if name.startswith("lm_head") else 1.0
        nn.init.normal_(p, std=scale / math.sqrt(fan_in))


def build_llama(seed=0, dtype=torch.float32, cfg=LlamaConfig()):
    with seeded(seed):
        model = LlamaForCausalLM(cfg)
        _init_weights(model)
    return model.to(dtype).eval()


def greedy_generate(step, model, input_ids, max_new_tokens):
    """Greedy decoding through `step` (the model or its compiled form) with a preallocated cache.

    Returns (tokens (B, max_new_tokens), logits (max_new_tokens, B, vocab)); each logits row is
    the one the token at that step was chosen from.
    """
    batch, prompt_len = input_ids.shape
    dtype = model.embed_tokens.weight.dtype
    k_cache, v_cache = model.empty_cache(batch, prompt_len + max_new_tokens, dtype)
    positions = torch.arange(prompt_len)
    tokens, step_logits = [], []
    ids = input_ids
    for _ in range(max_new_tokens):
        logits, k_cache, v_cache = step(ids, positions, k_cache, v_cache)
        last = logits[:, -1]
        step_logits.append(last)
        tokens.append(last.argmax(-1))
        ids = tokens[-1][:, None]
        positions = positions[-1:] + 1
    return torch.stack(tokens, dim=1), torch.stack(step_logits)


class LoRALinear(nn.Module):
    """A frozen linear layer plus a trainable low-rank update: W x + (B A x) * alpha / r."""

    def __init__(self, base, rank, alpha):
        super().__init__()
        self.base = base
        self.scaling = alpha / rank
        fan_in = base.in_features
        self.lora_a = nn.Parameter(torch.randn(rank, fan_in) / math.sqrt(fan_in))
        # Nonzero (unlike the usual zeros) so both adapter matrices get gradients from step 1.
        self.lora_b = nn.Parameter(torch.randn(base.out_features, rank) * 0.01)

    def forward(self, x):
        return self.base(x) + (x @ self.lora_a.t() @ self.lora_b.t()) * self.scaling


def add_lora(model, rank=4, alpha=8.0, seed=1):
    """Wrap the attention projections with LoRA adapters and freeze everything else."""
    for p in model.parameters():
        p.requires_grad_(False)
    with seeded(seed):
        for layer in model.layers:
            attn = layer.self_attn
            for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
                setattr(attn, name, LoRALinear(getattr(attn, name), rank, alpha))
    return model


class CausalLMLoss(nn.Module):
    """Next-token cross entropy of a causal LM over a whole sequence (no cache)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, labels):
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        logits, _, _ = self.model(input_ids, positions)
        return F.cross_entropy(logits.float().flatten(0, 1), labels.flatten())
