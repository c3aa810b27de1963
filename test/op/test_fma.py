"""prims.fma: dynamo writes `addcmul_` and `addcdiv_` with a value, and `add_` with a tensor
alpha, as this multiply-add (every optimizer step has them), so the module below uses those
forms rather than the prim itself."""

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
    def forward(self, a, b, c, value):
        tensor_value = a.clone().addcmul_(b, c, value=value)
        number_value = a.clone().addcmul_(b, c[0], value=-0.75)
        quotient = a.clone().addcdiv_(b, c.abs() + 1, value=value)
        tensor_alpha = a.clone().add_(b, alpha=value)
        return tensor_value, number_value, quotient, tensor_alpha


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestFma:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
    # sizes 1, odd and even
    @pytest.mark.parametrize(
        "sizes", [Size((5,), (7,)), Size((4, 1, 6), (6, 1, 8)), Size((1,), (1,))]
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_fma(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # transpose(0, -1) makes the operands non-contiguous when both end dims are > 1
        a, b, c = (torch.randn(size).to(dtype).transpose(0, -1).requires_grad_() for _ in range(3))
        value = torch.tensor(0.3, dtype=dtype)

        output = model(a, b, c, value)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(
            a.to(device), b.to(device), c.to(device), value.to(device)
        )

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
        assert_grads_close(output, dicp_output, (a, b, c))
