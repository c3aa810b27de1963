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
    def forward(self, grad, x, mean, rstd, weight, bias):
        backward = torch.ops.aten.native_layer_norm_backward.default
        res_all = backward(grad, x, x.shape[-1:], mean, rstd, weight, bias, [True, True, True])
        # the input gradient alone
        res_input = backward(grad, x, x.shape[-1:], mean, rstd, weight, bias, [True, False, False])
        return (*res_all, res_input[0])


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestNativeLayerNormBackward:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
    @pytest.mark.parametrize("sizes", [Size((2, 3, 8), (3, 5, 6)), Size((5, 1, 4), (7, 1, 3))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_native_layer_norm_backward(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # transpose(0, 1) makes the input non-contiguous
        x = (torch.randn(size) * 2 + 1).to(dtype).transpose(0, 1)
        weight = torch.randn(size[-1], dtype=dtype)
        bias = torch.randn(size[-1], dtype=dtype)
        _, mean, rstd = torch.ops.aten.native_layer_norm.default(
            x, x.shape[-1:], weight, bias, 1e-5
        )
        grad = torch.randn(x.shape, dtype=dtype)
        inputs = (grad, x, mean, rstd, weight, bias)

        output = model(*inputs)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(*(t.to(device) for t in inputs))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
