"""A GPT-2-style decoder built on F.scaled_dot_product_attention: learned positions, pre-norm
blocks, causal (optionally grouped-query) attention, GELU MLP, tied input/output embeddings.
Dropout sits where GPT-2 has it (attention probabilities, residual branches, embeddings)."""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from . import seeded


@dataclass(frozen=True)
class GptConfig:
    vocab_size: int = 96
    max_positions: int = 32
    hidden_size: int = 48
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 4  # fewer than num_heads: grouped-query attention
    dropout: float = 0.0

    @property
    def head_dim(self):
        return self.hidden_size // self.num_heads


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        kv = cfg.num_kv_heads * cfg.head_dim
        self.q = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.kv = nn.Linear(cfg.hidden_size, 2 * kv)
        self.out = nn.Linear(cfg.hidden_size, cfg.hidden_size)

    def forward(self, x):
        cfg, (batch, length, _) = self.cfg, x.shape
        q = self.q(x).view(batch, length, cfg.num_heads, cfg.head_dim).transpose(1, 2)
        k, v = self.kv(x).view(batch, length, 2, cfg.num_kv_heads, cfg.head_dim).unbind(2)
        attended = F.scaled_dot_product_attention(
            q,
            k.transpose(1, 2),
            v.transpose(1, 2),
            is_causal=True,
            dropout_p=cfg.dropout if self.training else 0.0,
            enable_gqa=cfg.num_kv_heads != cfg.num_heads,
        )
        return self.out(attended.transpose(1, 2).reshape(batch, length, -1))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(cfg.hidden_size), nn.LayerNorm(cfg.hidden_size)
        self.attention = Attention(cfg)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.hidden_size, 4 * cfg.hidden_size),
            nn.GELU(),
            nn.Linear(4 * cfg.hidden_size, cfg.hidden_size),
        )
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x):
        x = x + self.dropout(self.attention(self.norm1(x)))
        return x + self.dropout(self.mlp(self.norm2(x)))


class Gpt(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.positions = nn.Embedding(cfg.max_positions, cfg.hidden_size)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.num_layers))
        self.norm = nn.LayerNorm(cfg.hidden_size)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, input_ids, labels):
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.dropout(self.tokens(input_ids) + self.positions(positions))
        for block in self.blocks:
            x = block(x)
        logits = self.norm(x) @ self.tokens.weight.T  # tied embeddings
        return F.cross_entropy(logits.flatten(0, 1), labels.flatten())


def build_gpt(cfg=GptConfig(), seed=0):
    with seeded(seed):
        return Gpt(cfg)


def make_batch(batch, length, vocab, seed):
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(vocab, (batch, length + 1), generator=generator)
    return tokens[:, :-1], tokens[:, 1:]
