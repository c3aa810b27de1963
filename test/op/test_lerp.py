import pytest

from ..common.utils import (
    Size,
    assert_close,
    assert_grads_close,
    compile_model,
    dynamo,
    get_device,
    parse_args,
    torch,
    update_dynamo_config,
)


class OpModule(torch.nn.Module):
    def forward(self, a, b, w):
        res_scalar = torch.ops.aten.lerp.Scalar(a, b, 0.3)
        res_tensor = torch.ops.aten.lerp.Tensor(a, b, w)
        res_high = torch.ops.aten.lerp.Scalar(a, b, 0.9)  # weight >= 0.5: the other formula
        return res_scalar, res_tensor, res_high


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestLerp:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
    # sizes 1, odd and even; a depthwise convolution weight's [c, 1, k, k]
    @pytest.mark.parametrize(
        "sizes",
        [Size((6, 1, 4, 4), (8, 1, 5, 5)), Size((3, 1, 5, 7), (5, 1, 3, 3)), Size((1,), (1,))],
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_lerp(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        a = torch.randn(size).to(dtype).requires_grad_()
        # b's size-1 dim has stride 1 (a permuted view): the strides torch's decomposition
        # computes for the result differ from the arithmetic's, and it restores them with
        # prims.copy_strided (an AdamW step's lerp_ on a depthwise convolution's weight)
        b = torch.randn(*size[:1], *size[2:], *size[1:2]).to(dtype)
        b = (b.permute(0, 3, 1, 2) if len(size) == 4 else b).requires_grad_()
        w = torch.rand(size).to(dtype).requires_grad_()

        output = model(a, b, w)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(a.to(device), b.to(device), w.to(device))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
        assert_grads_close(output, dicp_output, (a, b, w))
