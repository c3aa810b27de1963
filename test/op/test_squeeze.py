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
        res_dim = torch.ops.aten.squeeze.dim(a, 1)
        res_noop = torch.ops.aten.squeeze.dim(a, -1)
        res_all = torch.ops.aten.squeeze.default(a)
        res_dims = torch.ops.aten.squeeze.dims(a, [0, 1])
        return res_dim, res_noop, res_all, res_dims


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestSqueeze:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
    @pytest.mark.parametrize(
        "sizes", [Size((3, 1, 4), (5, 1, 2)), Size((2, 1, 1, 3), (4, 1, 1, 2))]
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_squeeze(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # the last dim is never 1, so squeezing it is a no-op
        input1 = (torch.randn(size) * 10).to(dtype)

        output = model(input1)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1.to(device))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
