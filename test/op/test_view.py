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
    def forward(self, a, shape):
        res_flat = torch.ops.aten.view.default(a, [-1])
        res_shape = torch.ops.aten.view.default(a, shape)
        return res_flat, res_shape


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestView:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
    @pytest.mark.parametrize("sizes", [Size((5,), (7,)), Size((3, 1, 4), (5, 1, 2))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_view(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # a view needs a layout it can reinterpret: the input is contiguous
        input1 = (torch.randn(size) * 10).to(dtype)
        shape = (1, size[-1], -1)

        output = model(input1, shape)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1.to(device), shape)

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
