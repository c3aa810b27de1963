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


class TailModule(torch.nn.Module):
    """erfc, and its use where 1 - erf cancels: the tail of a normal distribution."""

    def forward(self, a):
        return torch.ops.aten.erfc.default(a), torch.special.ndtr(-a)


model = TailModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestErfc:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
    # sizes 1, odd and even
    @pytest.mark.parametrize(
        "sizes", [Size((6,), (8,)), Size((3, 1, 5), (5, 1, 7)), Size((1,), (1,))]
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_erfc(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # -4 to 9: erfc from 2 down to 4e-37, where 1 - erf(x) would be 0
        input1 = (torch.rand(size) * 13 - 4).to(dtype).transpose(0, -1).requires_grad_()

        output = model(input1)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1.to(device))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
        assert_grads_close(output, dicp_output, (input1,))
