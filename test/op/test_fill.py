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
    def forward(self, a, value):
        res_scalar = torch.ops.aten.fill.Scalar(a, 3)
        res_tensor = torch.ops.aten.fill.Tensor(a, value)
        return res_scalar, res_tensor


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestFill:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.bool])
    @pytest.mark.parametrize("sizes", [Size((5,), (7,)), Size((3, 1, 4), (5, 1, 2))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_fill(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # transpose(0, -1) makes a non-contiguous when both end dims are > 1
        a = (torch.randn(size) * 10).to(dtype).transpose(0, -1)
        # a 0-d float value is cast to a's dtype
        value = torch.tensor(-2.5)

        output = model(a, value)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(a.to(device), value.to(device))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
