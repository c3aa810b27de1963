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
        group_norm = torch.ops.aten.native_group_norm.default
        n, c = x.shape[:2]
        hxw = x.numel() // (n * c)
        res_two = group_norm(x, weight, bias, n, c, hxw, 2, 1e-5)
        # one group per channel (instance norm), no affine parameters
        res_per_channel = group_norm(x, None, None, n, c, hxw, c, 1e-5)
        # the composite op, whose decomposition views the per-group statistics per channel
        res_composite = torch.ops.aten.group_norm.default(x, 2, weight, bias)
        return (*res_two, *res_per_channel, res_composite)


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestGroupNorm:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
    # Size((N, C, ...), ...) with C divisible by 2
    # native_group_norm specializes the channel count (torch guards on it), so the second
    # dynamic size keeps C
    @pytest.mark.parametrize(
        "sizes",
        [
            Size((2, 4, 3, 3), (3, 6, 2, 4), resized=(4, 6, 3, 5)),
            Size((1, 6, 5), (1, 4, 7), resized=(1, 4, 8)),
        ],
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_group_norm(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # a mean far from zero makes a one-pass E[x^2] - E[x]^2 variance inaccurate
        x = (torch.randn(size) + 50).to(dtype)
        weight = torch.randn(size[1], dtype=dtype)
        bias = torch.randn(size[1], dtype=dtype)

        output = model(x, weight, bias)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(x.to(device), weight.to(device), bias.to(device))

        # the normalized output, the mean and the reciprocal standard deviation per group
        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
