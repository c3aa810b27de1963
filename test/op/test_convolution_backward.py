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
    def forward(self, grad, grad_strided, x, weight):
        conv_backward = torch.ops.aten.convolution_backward.default
        plain = conv_backward(
            grad, x, weight, [6], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, True]
        )
        # no bias and no input gradient: only the weight gradient is computed
        strided = conv_backward(
            grad_strided,
            x,
            weight,
            None,
            [2, 2],
            [0, 0],
            [1, 1],
            False,
            [0, 0],
            1,
            [False, True, False],
        )
        return (*plain, strided[1])


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestConvolutionBackward:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
    # Size((N, C, H, W), ...)
    @pytest.mark.parametrize(
        "sizes", [Size((2, 4, 7, 8), (3, 2, 6, 9)), Size((1, 2, 5, 6), (1, 4, 7, 5))]
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_convolution_backward(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # channels-last (NHWC) input memory
        x = torch.randn(size, dtype=dtype).contiguous(memory_format=torch.channels_last)
        weight = torch.randn(6, size[1], 3, 3, dtype=dtype)
        # output gradients shaped like the forward outputs
        conv = torch.ops.aten.convolution.default
        out = conv(x, weight, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
        out_strided = conv(x, weight, None, [2, 2], [0, 0], [1, 1], False, [0, 0], 1)
        grad = torch.randn(out.shape, dtype=dtype)
        grad_strided = torch.randn(out_strided.shape, dtype=dtype)
        inputs = (grad, grad_strided, x, weight)

        output = model(*inputs)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(*(t.to(device) for t in inputs))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
