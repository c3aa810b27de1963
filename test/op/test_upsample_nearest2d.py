import pytest

from ..common.utils import (
    Size,
    assert_close,
    compile_model,
    dynamo,
    get_device,
    parse_args,
    torch,
    update_dynamo_config,
)


class OpModule(torch.nn.Module):
    def forward(self, x, output_size):
        res_size = torch.ops.aten.upsample_nearest2d.default(x, output_size)
        res_scales = torch.ops.aten.upsample_nearest2d.vec(x, None, [2.0, 2.0])
        return res_size, res_scales


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestUpsampleNearest2d:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
    # Size((N, C, H, W), ...)
    @pytest.mark.parametrize(
        "sizes", [Size((2, 3, 4, 4), (3, 2, 5, 3)), Size((1, 2, 1, 6), (1, 3, 1, 4))]
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_upsample_nearest2d(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # transpose(-2, -1) makes the input non-contiguous
        input1 = torch.randn(size, dtype=dtype).transpose(-2, -1)
        # non-integer ratios: an upscale along H, a downscale along W when W > 2
        output_size = [input1.shape[-2] * 2 + 1, input1.shape[-1] // 2 + 1]

        output = model(input1, output_size)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1.to(device), output_size)

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
