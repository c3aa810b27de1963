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
    def forward(self, a, low, high):
        res_both = torch.ops.aten.clamp.default(a, -2, 3)
        res_min = torch.ops.aten.clamp.default(a, min=0)
        res_max = torch.ops.aten.clamp.default(a, max=6)
        res_tensor = torch.ops.aten.clamp.Tensor(a, low, high[0])
        return res_both, res_min, res_max, res_tensor


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestClamp:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
    @pytest.mark.parametrize("sizes", [Size((5,), (7,)), Size((3, 1, 4), (5, 1, 2))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_clamp(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # transpose(0, -1) makes a non-contiguous when both end dims are > 1
        a = (torch.randn(size) * 10).to(dtype).transpose(0, -1)
        # independent bounds: where low > high the result is high
        low = (torch.randn(a.shape) * 5).to(dtype)
        high = (torch.randn(a.shape) * 5).to(dtype)

        output = model(a, low, high)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(a.to(device), low.to(device), high.to(device))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
