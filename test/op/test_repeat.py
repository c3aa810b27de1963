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
        res_each = torch.ops.aten.repeat.default(a, [2] * a.dim())
        res_new_dim = torch.ops.aten.repeat.default(a, [3] + [1] * a.dim())
        res_mixed = torch.ops.aten.repeat.default(a, [2] + [3] + [2] * (a.dim() - 1))
        return res_each, res_new_dim, res_mixed


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestRepeat:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.bool])
    # an empty dim (transposed: 3 x 0): views of it divide indices by 0 in code that never runs
    @pytest.mark.parametrize(
        "sizes", [Size((5,), (7,)), Size((3, 1, 4), (5, 1, 2)), Size((0, 3), (0, 4))]
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_repeat(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # transpose(0, -1) makes the input non-contiguous when both end dims are > 1
        input1 = (torch.randn(size) * 10).to(dtype).transpose(0, -1)

        output = model(input1)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1.to(device))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
