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
    def forward(self, a):
        res_main = torch.ops.aten.tril.default(a)
        res_above = torch.ops.aten.tril.default(a, 1)
        res_below = torch.ops.aten.tril.default(a, -2)
        return res_main, res_above, res_below


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestTril:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.bool])
    @pytest.mark.parametrize("sizes", [Size((1, 5), (1, 7)), Size((2, 5, 3), (3, 4, 6))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_tril(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # wide and tall matrices; transpose(-2, -1) makes the input non-contiguous
        input1 = (torch.randn(size) * 10).to(dtype).transpose(-2, -1)

        output = model(input1)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1.to(device))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
