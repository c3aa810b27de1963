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
        res_tensor = torch.ops.aten.maximum.default(a, b)
        res_broadcast = torch.ops.aten.maximum.default(a, b[0])
        return res_tensor, res_broadcast


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestMaximum:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
    @pytest.mark.parametrize("sizes", [Size((5,), (7,)), Size((3, 1, 4), (5, 1, 2))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_maximum(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # transpose(0, -1) makes b non-contiguous when both end dims are > 1; b[0] broadcasts
        b = (torch.randn(size) * 5).to(dtype).transpose(0, -1)
        a = (torch.randn(b.shape) * 5).to(dtype)
        if dtype.is_floating_point:
            # a NaN on either side propagates to the result
            a.view(-1)[0] = float("nan")
            b[(-1,) * b.dim()] = float("nan")

        output = model(a, b)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(a.to(device), b.to(device))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
