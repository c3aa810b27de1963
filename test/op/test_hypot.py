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
        # a tensor, and a broadcast one
        return torch.ops.aten.hypot.default(a, b), torch.hypot(a, b[0])


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestHypot:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
    # sizes 1, odd and even
    @pytest.mark.parametrize(
        "sizes", [Size((6,), (8,)), Size((3, 1, 5), (5, 1, 7)), Size((1,), (1,))]
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_hypot(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # b non-contiguous; large values, where squaring first would overflow float16
        b = (torch.randn(size) * 200).to(dtype).transpose(0, -1).requires_grad_()
        a = (torch.randn(b.shape) * 200).to(dtype).requires_grad_()

        output = model(a, b)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(a.to(device), b.to(device))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
        assert_grads_close(output, dicp_output, (a, b))
