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
        pool = torch.ops.aten.avg_pool2d.default
        res_default = pool(x, [2, 2])
        res_padded = pool(x, [3, 3], [2, 2], [1, 1])
        res_exclude_pad = pool(x, [3, 3], [2, 2], [1, 1], False, False)
        res_ceil_divisor = pool(x, [3, 2], [2, 1], [1, 0], True, True, 5)
        return res_default, res_padded, res_exclude_pad, res_ceil_divisor


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestAvgPool2d:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
    # Size((N, C, H, W) or (C, H, W), ...)
    @pytest.mark.parametrize(
        "sizes", [Size((2, 3, 8, 8), (3, 2, 9, 7)), Size((1, 7, 6), (1, 6, 9))]
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_avg_pool2d(self, sizes, dtype, compiled_model):
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
