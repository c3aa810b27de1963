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
        pool_backward = torch.ops.aten._adaptive_avg_pool3d_backward.default
        return pool_backward(grad_global, x), pool_backward(grad_uneven, x)


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestAdaptiveAvgPool3dBackward:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
    # Size((N, C, D, H, W) or (C, D, H, W), ...): sizes 1, odd and even
    @pytest.mark.parametrize(
        "sizes",
        [
            Size((2, 3, 6, 7, 5), (2, 5, 9, 7, 11), resized=(2, 5, 10, 8, 13)),
            Size((3, 5, 8, 6), (5, 9, 7, 11)),
            Size((1, 1, 4, 5, 6), (1, 1, 6, 5, 7)),
        ],
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch__adaptive_avg_pool3d_backward(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # transpose(-2, -1) makes the input non-contiguous
        input1 = torch.randn(size, dtype=dtype).transpose(-2, -1)
        # gradients of a global (1, 1, 1) pool and of an uneven (3, 2, 4) pool
        grad_global = torch.randn(*input1.shape[:-3], 1, 1, 1, dtype=dtype)
        grad_uneven = torch.randn(*input1.shape[:-3], 3, 2, 4, dtype=dtype)

        output = model(grad_global, grad_uneven, input1)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(
            grad_global.to(device), grad_uneven.to(device), input1.to(device)
        )

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
