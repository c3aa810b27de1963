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
        var = torch.ops.aten.var.correction
        # no dim and no correction: every element, Bessel's correction (torch.var(a))
        res_all = var(a)
        res_last = var(a, [-1], correction=0, keepdim=True)
        res_first = var(a, [0], correction=2)
        return res_all, res_last, res_first


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestVar:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
    @pytest.mark.parametrize("sizes", [Size((5, 3), (7, 4)), Size((3, 1, 6), (5, 1, 4))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_var(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # a mean far from zero makes a one-pass E[x^2] - E[x]^2 variance inaccurate
        input1 = (torch.randn(size) + 20).to(dtype)

        output = model(input1)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1.to(device))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
