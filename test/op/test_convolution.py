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
    def forward(self, x, x_channels_last, weight, weight_grouped, weight_transposed, bias):
        conv = torch.ops.aten.convolution.default
        res_plain = conv(x, weight, bias, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
        res_strided = conv(x_channels_last, weight, None, [2, 2], [0, 0], [1, 1], False, [0, 0], 1)
        res_grouped = conv(x, weight_grouped, bias, [1, 1], [2, 2], [2, 2], False, [0, 0], 2)
        res_transposed = conv(x, weight_transposed, None, [2, 2], [1, 1], [1, 1], True, [1, 1], 1)
        # conv1d over the flattened spatial dims with a non-contiguous (6, C, 3) weight
        res_1d = conv(x.flatten(2), weight[:, :, 1], bias, [1], [1], [1], False, [0], 1)
        return res_plain, res_strided, res_grouped, res_transposed, res_1d


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestConvolution:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
    # Size((N, C, H, W), ...) with C even for the grouped convolution
    # dynamic dims chosen so no two unrelated input dims are equal (dynamo would share one
    # symbol between them), at the dynamic size and at the resized one
    @pytest.mark.parametrize(
        "sizes",
        [
            Size((2, 4, 7, 8), (5, 4, 7, 9), resized=(5, 8, 9, 10)),
            Size((1, 2, 5, 6), (1, 4, 7, 5), resized=(1, 8, 9, 10)),
        ],
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_convolution(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        channels = size[1]
        x = torch.randn(size, dtype=dtype)
        # the same values in channels-last (NHWC) memory
        x_channels_last = x.contiguous(memory_format=torch.channels_last)
        weight = torch.randn(6, channels, 3, 3, dtype=dtype)
        weight_grouped = torch.randn(6, channels // 2, 3, 3, dtype=dtype)
        weight_transposed = torch.randn(channels, 3, 3, 3, dtype=dtype)
        bias = torch.randn(6, dtype=dtype)
        inputs = (x, x_channels_last, weight, weight_grouped, weight_transposed, bias)

        output = model(*inputs)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(*(t.to(device) for t in inputs))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
