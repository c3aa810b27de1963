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
        var_last, mean_last = torch.ops.aten.var_mean.correction(a, [-1], correction=1)
        var_first, mean_first = torch.ops.aten.var_mean.correction(
            a, [0], correction=0, keepdim=True
        )
        var_all, mean_all = torch.ops.aten.var_mean.correction(a, None, correction=1)
        return var_last, mean_last, var_first, mean_first, var_all, mean_all


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestVarMean:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
    @pytest.mark.parametrize("sizes", [Size((5,), (7,)), Size((3, 1, 4), (5, 1, 2))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_var_mean(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # a mean far from zero makes a one-pass E[x^2] - E[x]^2 variance inaccurate
        # transpose(0, -1) makes the input non-contiguous when both end dims are > 1
        input1 = (torch.randn(size) + 50).to(dtype).transpose(0, -1)

        output = model(input1)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1.to(device))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
