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
    def forward(self, a):
        res_last = torch.ops.aten.cumprod.default(a, -1)
        res_first = torch.ops.aten.cumprod.default(a, 0)
        res_float = torch.ops.aten.cumprod.default(a, -1, dtype=torch.float32)
        return res_last, res_first, res_float


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestCumprod:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
    # sizes 1, odd and even
    @pytest.mark.parametrize(
        "sizes", [Size((5,), (7,)), Size((3, 1, 4), (5, 1, 6)), Size((1,), (1,))]
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_cumprod(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # both signs around 1, so products neither vanish nor overflow; an int32 cumprod
        # returns int64; transpose(0, -1) makes the input non-contiguous
        input1 = ((torch.rand(size) + 0.5) * torch.randn(size).sign()) * 1.5
        input1 = input1.to(dtype).transpose(0, -1)
        # torch's cumprod backward specializes the size it traces (aot_eager recompiles at
        # the second size too), so the dynamic graphs are tested without one; torch 2.11's
        # eager backward of a bfloat16 cumprod with a zero fails (masked_scatter of a float
        # source), so gradients are float32's
        grad = dtype == torch.float32 and not compiled_model.dynamic
        if dtype.is_floating_point:
            input1[(0,) * input1.dim()] = 0  # a zero: the backward cannot divide by it
        input1.requires_grad_(grad)

        output = model(input1)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1.to(device))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
        if grad:
            assert_grads_close(output, dicp_output, (input1,))
