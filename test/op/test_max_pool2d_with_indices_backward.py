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
    def forward(self, grad, grad_padded, x, indices, indices_padded):
        pool_backward = torch.ops.aten.max_pool2d_with_indices_backward.default
        res_default = pool_backward(grad, x, [2, 2], [2, 2], [0, 0], [1, 1], False, indices)
        # overlapping windows: one input element can receive several gradients
        res_padded = pool_backward(
            grad_padded, x, [3, 3], [2, 2], [1, 1], [1, 1], False, indices_padded
        )
        return res_default, res_padded


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestMaxPool2dWithIndicesBackward:
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
    def test_torch_max_pool2d_with_indices_backward(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # transpose(-2, -1) makes the input non-contiguous
        input1 = torch.randn(size, dtype=dtype).transpose(-2, -1)
        pool = torch.ops.aten.max_pool2d_with_indices.default
        out, indices = pool(input1, [2, 2])
        out_padded, indices_padded = pool(input1, [3, 3], [2, 2], [1, 1])
        grad = torch.randn(out.shape, dtype=dtype)
        grad_padded = torch.randn(out_padded.shape, dtype=dtype)
        inputs = (grad, grad_padded, input1, indices, indices_padded)

        output = model(*inputs)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(*(t.to(device) for t in inputs))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
