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
    def forward(self, x):
        pool = torch.ops.aten._adaptive_avg_pool3d.default
        res_global = pool(x, [1, 1, 1])
        # windows of unequal, overlapping extents when the sizes do not divide
        res_uneven = pool(x, [3, 2, 4])
        res_larger = pool(x, [2, 4, 13])
        return res_global, res_uneven, res_larger


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestAdaptiveAvgPool3d:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
    # Size((N, C, D, H, W) or (C, D, H, W), ...): sizes 1, odd and even
    @pytest.mark.parametrize(
        "sizes",
        [
            Size((2, 3, 6, 7, 5), (2, 3, 9, 7, 11)),
            Size((3, 5, 8, 6), (5, 9, 7, 11)),
            Size((1, 1, 4, 5, 6), (1, 1, 6, 5, 7)),
        ],
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch__adaptive_avg_pool3d(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # transpose(-2, -1) makes the input non-contiguous
        input1 = torch.randn(size, dtype=dtype).transpose(-2, -1)

        output = model(input1)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1.to(device))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
