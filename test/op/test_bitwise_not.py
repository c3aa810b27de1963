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
        return torch.ops.aten.bitwise_not.default(a)


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestBitwiseNot:
    @pytest.mark.parametrize("dtype", [torch.bool, torch.int32])
    @pytest.mark.parametrize("sizes", [Size((5,), (7,)), Size((3, 1, 4), (5, 1, 2))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_bitwise_not(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # half of the elements are zero (False for bool), the rest have mixed bits
        # transpose(0, -1) makes the input non-contiguous when both end dims are > 1
        values = torch.randint(-100, 100, size).mul(torch.rand(size) < 0.5).to(dtype)
        input1 = values.transpose(0, -1)

        output = model(input1)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1.to(device))

        assert_close(dicp_output, output)
