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
    def forward(self, grad, x, mean, rstd, weight):
        n, c = x.shape[:2]
        hxw = x.numel() // (n * c)
        return torch.ops.aten.native_group_norm_backward.default(
            grad, x, mean, rstd, weight, n, c, hxw, 2, [True, True, True]
        )


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestNativeGroupNormBackward:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
    # Size((N, C, ...), ...) with C divisible by 2
    # dynamic dims chosen so no two unrelated input dims are equal (dynamo would share one
    # symbol between them), at the dynamic size and at the resized one
    @pytest.mark.parametrize(
        "sizes",
        [
            Size((2, 4, 3, 3), (3, 6, 5, 4), resized=(4, 8, 7, 5)),
            Size((1, 6, 5), (1, 4, 7), resized=(1, 6, 8)),
        ],
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_native_group_norm_backward(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        x = (torch.randn(size) * 2 + 1).to(dtype)
        weight = torch.randn(size[1], dtype=dtype)
        n, c = size[:2]
        _, mean, rstd = torch.ops.aten.native_group_norm.default(
            x, weight, None, n, c, x.numel() // (n * c), 2, 1e-5
        )
        grad = torch.randn(size, dtype=dtype)
        inputs = (grad, x, mean, rstd, weight)

        output = model(*inputs)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(*(t.to(device) for t in inputs))

        # gradients of the input, the weight and the bias
        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
