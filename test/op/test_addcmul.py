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
    def forward(self, a, b, c):
        res_default = torch.ops.aten.addcmul.default(a, b, c)
        res_broadcast = torch.ops.aten.addcmul.default(a, b, c[0], value=0.5)
        return res_default, res_broadcast


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestAddcmul:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
    @pytest.mark.parametrize("sizes", [Size((5,), (7,)), Size((3, 1, 4), (5, 1, 2))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_addcmul(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # transpose(0, -1) makes c non-contiguous when both end dims are > 1; c[0] broadcasts
        c = torch.randn(size, dtype=dtype).transpose(0, -1)
        a = torch.randn(c.shape, dtype=dtype)
        b = torch.randn(c.shape, dtype=dtype)

        output = model(a, b, c)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(a.to(device), b.to(device), c.to(device))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
