"""A BERT encoder: token/position/type embeddings, post-LayerNorm layers with GELU, a pooler.

The attention mask marks real tokens (1) and padding (0); padded keys get no attention weight.
"""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from . import seeded


@dataclass(frozen=True)
class BertConfig:
    vocab_size: int = 100
    hidden_size: int = 32
    num_layers: int = 2
    num_heads: int = 4
    intermediate_size: int = 64
    max_positions: int = 64
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12


class SelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.num_heads = cfg.num_heads
        self.qkv = nn.Linear(cfg.hidden_size, 3 * cfg.hidden_size)
        self.out = nn.Linear(cfg.hidden_size, cfg.hidden_size)

    def forward(self, x, key_bias):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=key_bias)
        return self.out(ctx.transpose(1, 2).reshape(b, t, d))


class EncoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.attention = SelfAttention(cfg)
        self.attention_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.intermediate = nn.Linear(cfg.hidden_size, cfg.intermediate_size)
        self.output = nn.Linear(cfg.intermediate_size, cfg.hidden_size)
        self.output_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)

    def forward(self, x, key_bias):
        x = self.attention_norm(x + self.attention(x, key_bias))
        return self.output_norm(x + self.output(F.gelu(self.intermediate(x))))


class BertModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.position_embeddings = nn.Embedding(cfg.max_positions, cfg.hidden_size)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, cfg.hidden_size)
        self.embedding_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.num_layers))
        self.pooler = nn.Linear(cfg.hidden_size, cfg.hidden_size)

    def forward(self, input_ids, attention_mask, token_type_ids):
        """(sequence output (B, T, H), pooled output (B, H))."""
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = (
            self.word_embeddings(input_ids)
            + self.position_embeddings(positions)[None]
            + self.token_type_embeddings(token_type_ids)
        )
        x = self.embedding_norm(x)
        # Additive bias (B, 1, 1, T): 0 for real tokens, the dtype's minimum for padding.
        key_bias = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        for layer in self.layers:
            x = layer(x, key_bias)
        return x, torch.tanh(self.pooler(x[:, 0]))


def build_bert(seed=0, dtype=torch.float32, cfg=BertConfig()):
    with seeded(seed):
        model = BertModel(cfg)
    return model.to(dtype).eval()


def make_bert_inputs(batch, seq_len, seed=0, cfg=BertConfig()):
    """Random ids with right padding: row i keeps a different number of real tokens (>= 1)."""
    g = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(cfg.vocab_size, (batch, seq_len), generator=g)
    lengths = torch.randint(1, seq_len + 1, (batch,), generator=g)
    lengths[0] = seq_len  # at least one row without padding
    attention_mask = (torch.arange(seq_len)[None, :] < lengths[:, None]).long()
    token_type_ids = (torch.arange(seq_len)[None, :] >= seq_len // 2).long().expand(batch, -1)
    return input_ids, attention_mask, token_type_ids.contiguous()
