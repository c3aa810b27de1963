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
        res_tensor = torch.ops.aten.gt.Tensor(a, b)
        res_broadcast = torch.ops.aten.gt.Tensor(a, b[0])
        res_scalar = torch.ops.aten.gt.Scalar(a, 1)
        return res_tensor, res_broadcast, res_scalar


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestGt:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
    @pytest.mark.parametrize("sizes", [Size((5,), (7,)), Size((3, 1, 4), (5, 1, 2))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_gt(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # small integers make ties common, so equality and the boundary are exercised
        # transpose(0, -1) makes b non-contiguous when both end dims are > 1; b[0] broadcasts
        b = torch.randint(-3, 4, size).to(dtype).transpose(0, -1)
        a = torch.randint(-3, 4, b.shape).to(dtype)

        output = model(a, b)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(a.to(device), b.to(device))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
