"""A small UNet in the Stable Diffusion layout, and a DDIM scheduler to run it.

ResNet blocks (GroupNorm, SiLU, timestep embedding added between the convs), transformer blocks
(self attention, cross attention to a text context, GEGLU feed-forward) at the lower resolution
and in the middle block, stride-2 conv downsampling, nearest upsampling + conv, and skip
connections from each down block to the matching up block.
"""

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from . import seeded


@dataclass(frozen=True)
class UNetConfig:
    in_channels: int = 4
    channels: tuple = (32, 64)
    num_heads: int = 4
    context_dim: int = 32
    groups: int = 8
    time_dim: int = 32


def timestep_embedding(timesteps, dim):
    """Sinusoidal embedding (B, dim) of float timesteps (B,), periods up to 10000."""
    half = dim // 2
    # A literal, not a float argument: dynamo would trace a float argument as a symbolic input.
    exponent = (
        -math.log(10000.0) * torch.arange(half, dtype=torch.float32, device=timesteps.device) / half
    )
    args = timesteps.float()[:, None] * torch.exp(exponent)[None, :]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class ResBlock(nn.Module):
    def __init__(self, cin, cout, temb_dim, groups):
        super().__init__()
        self.norm1, self.conv1 = nn.GroupNorm(groups, cin), nn.Conv2d(cin, cout, 3, padding=1)
        self.time_proj = nn.Linear(temb_dim, cout)
        self.norm2, self.conv2 = nn.GroupNorm(groups, cout), nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Identity() if cin == cout else nn.Conv2d(cin, cout, 1)

    def forward(self, x, temb):
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.time_proj(F.silu(temb))[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        return self.skip(x) + h


class Attention(nn.Module):
    def __init__(self, dim, context_dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_k = nn.Linear(context_dim, dim, bias=False)
        self.to_v = nn.Linear(context_dim, dim, bias=False)
        self.to_out = nn.Linear(dim, dim)

    def _heads(self, x):
        b, n, d = x.shape
        return x.view(b, n, self.num_heads, d // self.num_heads).transpose(1, 2)

    def forward(self, x, context):
        q = self._heads(self.to_q(x))
        k, v = self._heads(self.to_k(context)), self._heads(self.to_v(context))
        out = F.scaled_dot_product_attention(q, k, v)
        return self.to_out(out.transpose(1, 2).reshape(x.shape))


class GEGLU(nn.Module):
    def __init__(self, dim, mult=4):
        super().__init__()
        self.proj = nn.Linear(dim, 2 * mult * dim)
        self.out = nn.Linear(mult * dim, dim)

    def forward(self, x):
        h, gate = self.proj(x).chunk(2, dim=-1)
        return self.out(h * F.gelu(gate))


class SpatialTransformer(nn.Module):
    """GroupNorm, 1x1 in-projection, one transformer block over the H*W tokens, out-projection."""

    def __init__(self, dim, cfg):
        super().__init__()
        self.norm = nn.GroupNorm(cfg.groups, dim)
        self.proj_in = nn.Conv2d(dim, dim, 1)
        self.norm1, self.attn1 = nn.LayerNorm(dim), Attention(dim, dim, cfg.num_heads)
        self.norm2, self.attn2 = nn.LayerNorm(dim), Attention(dim, cfg.context_dim, cfg.num_heads)
        self.norm3, self.ff = nn.LayerNorm(dim), GEGLU(dim)
        self.proj_out = nn.Conv2d(dim, dim, 1)

    def forward(self, x, context):
        b, c, hgt, wid = x.shape
        h = self.proj_in(self.norm(x)).flatten(2).transpose(1, 2)  # (B, H*W, C)
        n = self.norm1(h)
        h = h + self.attn1(n, n)
        h = h + self.attn2(self.norm2(h), context)
        h = h + self.ff(self.norm3(h))
        return x + self.proj_out(h.transpose(1, 2).reshape(b, c, hgt, wid))


class Level(nn.Module):
    """A ResBlock followed by a SpatialTransformer (one 'layer' of a UNet level)."""

    def __init__(self, cin, cout, temb_dim, cfg):
        super().__init__()
        self.res = ResBlock(cin, cout, temb_dim, cfg.groups)
        self.attn = SpatialTransformer(cout, cfg)

    def forward(self, x, temb, context):
        return self.attn(self.res(x, temb), context)


class UNet(nn.Module):
    """Two resolution levels. As in Stable Diffusion, the highest resolution has ResNet blocks
    only and the transformer blocks sit at the lower resolution and in the middle block."""

    def __init__(self, cfg=UNetConfig()):
        super().__init__()
        self.cfg = cfg
        c0, c1 = cfg.channels
        temb_dim = 4 * cfg.time_dim
        self.time_embed = nn.Sequential(
            nn.Linear(cfg.time_dim, temb_dim), nn.SiLU(), nn.Linear(temb_dim, temb_dim)
        )
        self.conv_in = nn.Conv2d(cfg.in_channels, c0, 3, padding=1)
        self.down0 = ResBlock(c0, c0, temb_dim, cfg.groups)
        self.downsample = nn.Conv2d(c0, c0, 3, stride=2, padding=1)
        self.down1 = Level(c0, c1, temb_dim, cfg)
        self.mid_res1 = ResBlock(c1, c1, temb_dim, cfg.groups)
        self.mid_attn = SpatialTransformer(c1, cfg)
        self.mid_res2 = ResBlock(c1, c1, temb_dim, cfg.groups)
        # Each up block takes the concatenation with the skip from the matching down block.
        self.up1 = Level(c1 + c1, c1, temb_dim, cfg)
        self.upsample = nn.Conv2d(c1, c1, 3, padding=1)
        self.up0 = ResBlock(c1 + c0, c0, temb_dim, cfg.groups)
        self.norm_out = nn.GroupNorm(cfg.groups, c0)
        self.conv_out = nn.Conv2d(c0, cfg.in_channels, 3, padding=1)

    def forward(self, latents, timesteps, context):
        """Predicted noise, shaped like `latents` (B, 4, H, W); H and W must be even."""
        temb = self.time_embed(timestep_embedding(timesteps, self.cfg.time_dim).to(latents.dtype))
        skip0 = self.down0(self.conv_in(latents), temb)
        skip1 = self.down1(self.downsample(skip0), temb, context)
        h = self.mid_res2(self.mid_attn(self.mid_res1(skip1, temb), context), temb)
        h = self.up1(torch.cat([h, skip1], dim=1), temb, context)
        h = self.upsample(F.interpolate(h, scale_factor=2.0, mode="nearest"))
        h = self.up0(torch.cat([h, skip0], dim=1), temb)
        return self.conv_out(F.silu(self.norm_out(h)))


def build_unet(seed=0, dtype=torch.float32, cfg=UNetConfig()):
    with seeded(seed):
        model = UNet(cfg)
    return model.to(dtype).eval()


class DDIMScheduler:
    """Deterministic DDIM (eta = 0) over the 'scaled linear' beta schedule of Stable Diffusion."""

    def __init__(
        self, num_inference_steps, num_train_steps=1000, beta_start=0.00085, beta_end=0.012
    ):
        betas = (
            torch.linspace(beta_start**0.5, beta_end**0.5, num_train_steps, dtype=torch.float64)
            ** 2
        )
        self.alphas_cumprod = torch.cumprod(1.0 - betas, dim=0)
        ratio = num_train_steps // num_inference_steps
        self.timesteps = [num_train_steps - 1 - i * ratio for i in range(num_inference_steps)]
        self.ratio = ratio

    def step(self, noise_pred, t, latents):
        """Latents at the previous timestep, from the noise predicted at timestep t."""
        alpha = self.alphas_cumprod[t].item()
        prev = t - self.ratio
        alpha_prev = self.alphas_cumprod[prev].item() if prev >= 0 else 1.0
        x0 = (latents - (1 - alpha) ** 0.5 * noise_pred) / alpha**0.5
        return alpha_prev**0.5 * x0 + (1 - alpha_prev) ** 0.5 * noise_pred


def denoise(unet, scheduler, latents, context, dtype):
    """Run the scheduler's steps; `unet` runs in `dtype`, the latents stay float32."""
    for t in scheduler.timesteps:
        timesteps = torch.full((latents.shape[0],), float(t))
        noise_pred = unet(latents.to(dtype), timesteps, context.to(dtype)).float()
        latents = scheduler.step(noise_pred, t, latents)
    return latents
