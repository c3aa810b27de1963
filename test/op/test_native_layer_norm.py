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
    def forward(self, x, weight, bias):
        layer_norm = torch.ops.aten.native_layer_norm.default
        res_last = layer_norm(x, x.shape[-1:], weight, bias, 1e-5)
        # over the last two dims, without affine parameters
        res_two = layer_norm(x, x.shape[-2:], None, None, 1e-6)
        return (*res_last, *res_two)


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestNativeLayerNorm:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
    @pytest.mark.parametrize("sizes", [Size((2, 3, 8), (3, 5, 6)), Size((5, 1, 4), (7, 1, 3))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_native_layer_norm(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # a mean far from zero makes a one-pass E[x^2] - E[x]^2 variance inaccurate;
        # transpose(0, 1) makes the input non-contiguous
        x = (torch.randn(size) + 50).to(dtype).transpose(0, 1)
        weight = torch.randn(size[-1], dtype=dtype)
        bias = torch.randn(size[-1], dtype=dtype)

        output = model(x, weight, bias)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(x.to(device), weight.to(device), bias.to(device))

        # the normalized output, the mean and the reciprocal standard deviation
        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
