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
    def forward(self, a, b):
        res_tensor = torch.ops.aten.div.Tensor(a, b)
        res_floor = torch.ops.aten.div.Tensor_mode(a, b, rounding_mode="floor")
        res_trunc = torch.ops.aten.div.Tensor_mode(a, b[0], rounding_mode="trunc")
        res_scalar = torch.ops.aten.div.Scalar(a, 4)
        return res_tensor, res_floor, res_trunc, res_scalar


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestDiv:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64])
    @pytest.mark.parametrize("sizes", [Size((5,), (7,)), Size((3, 1, 4), (5, 1, 2))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_div(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # divisors are in +-[1, 6) so integer division is defined; quotients of both signs
        # transpose(0, -1) makes b non-contiguous when both end dims are > 1; b[0] broadcasts
        b = (torch.randn(size).sign() * (torch.rand(size) * 5 + 1)).to(dtype).transpose(0, -1)
        a = (torch.randn(b.shape) * 10).to(dtype)

        output = model(a, b)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(a.to(device), b.to(device))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
