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
    def forward(self, grad, grad_padded, x):
        pool_backward = torch.ops.aten.avg_pool2d_backward.default
        res_default = pool_backward(grad, x, [2, 2], [2, 2], [0, 0], False, True, None)
        # overlapping windows, padding excluded from the divisor
        res_padded = pool_backward(grad_padded, x, [3, 3], [2, 2], [1, 1], False, False, None)
        res_divisor = pool_backward(grad_padded, x, [3, 3], [2, 2], [1, 1], False, True, 5)
        return res_default, res_padded, res_divisor


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestAvgPool2dBackward:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
    # Size((N, C, H, W) or (C, H, W), ...)
    # dynamic dims chosen so no two unrelated input dims are equal (dynamo would share one
    # symbol between them), at the dynamic size and at the resized one
    @pytest.mark.parametrize(
        "sizes",
        [
            Size((2, 3, 8, 8), (3, 4, 15, 11), resized=(3, 4, 21, 17)),
            Size((1, 7, 6), (1, 15, 11), resized=(1, 21, 17)),
        ],
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_avg_pool2d_backward(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # transpose(-2, -1) makes the input non-contiguous
        input1 = torch.randn(size, dtype=dtype).transpose(-2, -1)
        out = torch.ops.aten.avg_pool2d.default(input1, [2, 2])
        out_padded = torch.ops.aten.avg_pool2d.default(input1, [3, 3], [2, 2], [1, 1])
        grad = torch.randn(out.shape, dtype=dtype)
        grad_padded = torch.randn(out_padded.shape, dtype=dtype)

        output = model(grad, grad_padded, input1)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(
            grad.to(device), grad_padded.to(device), input1.to(device)
        )

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
