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
    def forward(self, a, b):
        # a tensor, a broadcast one and a number
        return (
            torch.ops.aten.copysign.Tensor(a, b),
            torch.copysign(a, b[0]),
            torch.ops.aten.copysign.Scalar(a, -2.0),
        )


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestCopysign:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
    # sizes 1, odd and even
    @pytest.mark.parametrize(
        "sizes", [Size((6,), (8,)), Size((3, 1, 5), (5, 1, 7)), Size((1,), (1,))]
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_copysign(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # b non-contiguous, with -0.0 and +0.0; integers give float
        b = (torch.randn(size) * 5).to(dtype).transpose(0, -1)
        a = (torch.randn(b.shape) * 5).to(dtype)
        if dtype.is_floating_point:
            b[(0,) * b.dim()] = -0.0
            a, b = a.requires_grad_(), b.requires_grad_()

        output = model(a, b)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(a.to(device), b.to(device))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
        if dtype.is_floating_point:
            assert_grads_close(output, dicp_output, (a, b))
