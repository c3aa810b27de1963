"""Stable-Diffusion-layout UNet: 3 DDIM denoising steps, compiled UNet vs eager.

Covers float32 (static and dynamic) and bfloat16 (static). The UNet runs in the dtype, the
scheduler keeps float32 latents, and the final latents are compared with the UNet dtype's
tolerance (half precision: or eager's accuracy against float64, see common/tolerance.py).
Static runs use latents
1x4x16x16 and a 1x8x32 context; dynamic runs use two batch/latent/context sizes (batch >= 2,
since dynamo specializes size-1 dimensions).
"""

import pytest

from ..common.utils import (
    MODEL_TOLERANCES,
    Size,
    assert_close,
    assert_close_or_as_accurate,
    dynamo,
    parse_args,
    torch,
    update_dynamo_config,
)
from .helpers import (
    HALF_DTYPES,
    assert_reused,
    compile_one,
    dicp_builds,
    float64_twin,
    graphs_compiled,
    mode_dtype_params,
)
from .models.unet import DDIMScheduler, UNetConfig, build_unet, denoise

args = parse_args()
STEPS = 3
# (batch, latent side, context length) per denoising run.
SHAPES = Size([(1, 16, 8)], [(2, 16, 8), (3, 24, 12)])
DTYPES = (torch.float32, torch.bfloat16)
DYNAMIC_DTYPES = (torch.float32,)


def make_inputs(batch, side, context_len, seed):
    g = torch.Generator().manual_seed(seed)
    cfg = UNetConfig()
    latents = torch.randn(batch, cfg.in_channels, side, side, generator=g)
    context = torch.randn(batch, context_len, cfg.context_dim, generator=g)
    return latents, context


class TestStableDiffusion:
    @pytest.mark.parametrize("dynamic,dtype", mode_dtype_params(args, DTYPES, DYNAMIC_DTYPES))
    def test_ddim_denoising(self, dtype, dynamic):
        unet = build_unet(dtype=dtype)
        compiled = compile_one(unet, args, dynamic)
        scheduler = DDIMScheduler(STEPS)
        dynamo.reset()
        update_dynamo_config(dynamic)
        shapes = SHAPES.dynamic if dynamic else SHAPES.static
        for i, (batch, side, context_len) in enumerate(shapes):
            latents, context = make_inputs(batch, side, context_len, seed=i)
            with torch.no_grad():
                expected = denoise(unet, scheduler, latents, context, dtype)
                actual = denoise(compiled, scheduler, latents, context, dtype)
            if dtype in HALF_DTYPES:
                # the same UNet weights in float64 say how accurate eager itself is
                reference = denoise(
                    float64_twin(unet), scheduler, latents.double(), context.double(), torch.float64
                )
                assert_close_or_as_accurate(actual, expected, reference, dtype=dtype)
            else:
                assert_close(actual, expected, table=MODEL_TOLERANCES, dtype=dtype)
            if i == 0:
                graphs, builds = graphs_compiled(), dicp_builds(args.backend)
            else:
                assert_reused(args.backend, graphs, builds)
