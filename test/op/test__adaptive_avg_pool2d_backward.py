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
    def forward(self, grad_global, grad_uneven, x):
        res_global = torch.ops.aten._adaptive_avg_pool2d_backward.default(grad_global, x)
        res_uneven = torch.ops.aten._adaptive_avg_pool2d_backward.default(grad_uneven, x)
        return res_global, res_uneven


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestAdaptiveAvgPool2dBackward:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
    # Size((N, C, H, W) or (C, H, W), ...)
    # dynamic dims chosen so no two unrelated input dims are equal (dynamo would share one
    # symbol between them), at the dynamic size and at the resized one
    @pytest.mark.parametrize(
        "sizes", [Size((2, 3, 8, 8), (4, 5, 9, 7)), Size((1, 7, 6), (1, 6, 9))]
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch__adaptive_avg_pool2d_backward(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # transpose(-2, -1) makes the input non-contiguous
        input1 = torch.randn(size, dtype=dtype).transpose(-2, -1)
        # gradients of a global (1, 1) pool and of an uneven (3, 2) pool
        grad_global = torch.randn(*input1.shape[:-2], 1, 1, dtype=dtype)
        grad_uneven = torch.randn(*input1.shape[:-2], 3, 2, dtype=dtype)

        output = model(grad_global, grad_uneven, input1)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(
            grad_global.to(device), grad_uneven.to(device), input1.to(device)
        )

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
