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
        res_all = torch.ops.aten.any.default(a)
        res_last = torch.ops.aten.any.dim(a, -1)
        res_first = torch.ops.aten.any.dims(a, [0], True)
        # a 0-d input (its last element, a negative select): the result is still bool
        res_scalar = torch.ops.aten.any.default(a.flatten()[-1])
        return res_all, res_last, res_first, res_scalar


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestAny:
    @pytest.mark.parametrize("dtype", [torch.bool, torch.float32])
    @pytest.mark.parametrize("sizes", [Size((5,), (7,)), Size((3, 1, 4), (5, 1, 2))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_any(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # mostly zeros, so some rows have no nonzero element
        # transpose(0, -1) makes the input non-contiguous when both end dims are > 1
        input1 = (torch.rand(size) < 0.2).to(dtype).transpose(0, -1)

        output = model(input1)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1.to(device))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
