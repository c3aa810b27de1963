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
    def forward(self, a, mask, value):
        res_scalar = torch.ops.aten.masked_fill.Scalar(a, mask, 2)
        res_broadcast = torch.ops.aten.masked_fill.Scalar(a, mask[0], 2)
        res_tensor = torch.ops.aten.masked_fill.Tensor(a, mask, value)
        return res_scalar, res_broadcast, res_tensor


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestMaskedFill:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
    @pytest.mark.parametrize("sizes", [Size((5,), (7,)), Size((3, 1, 4), (5, 1, 2))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_masked_fill(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # transpose(0, -1) makes a non-contiguous when both end dims are > 1; mask[0] broadcasts
        a = (torch.randn(size) * 10).to(dtype).transpose(0, -1)
        mask = torch.rand(a.shape) < 0.5
        # attention masks fill with -inf
        value = torch.tensor(float("-inf"), dtype=dtype)

        output = model(a, mask, value)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(a.to(device), mask.to(device), value.to(device))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
