import pytest

from ..common.utils import (
    Size,
    compile_model,
    dynamo,
    get_device,
    parse_args,
    torch,
    update_dynamo_config,
)


class OpModule(torch.nn.Module):
    def forward(self, a, size, stride):
        res_same = torch.ops.aten.new_empty_strided.default(a, size, stride)
        res_dtype = torch.ops.aten.new_empty_strided.default(
            a, size[::-1], stride[::-1], dtype=torch.float16
        )
        return res_same, res_dtype


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestNewEmptyStrided:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.bool])
    @pytest.mark.parametrize("sizes", [Size((5,), (7,)), Size((3, 1, 4), (5, 1, 2))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_new_empty_strided(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        input1 = (torch.randn(size) * 10).to(dtype)
        # the strides of a tensor stored transposed; reversed (with the size) they are contiguous
        stride = input1.transpose(0, -1).contiguous().transpose(0, -1).stride()

        output = model(input1, size, stride)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1.to(device), size, stride)

        # the memory is uninitialized: compare layout only
        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert (dicp_res.shape, dicp_res.dtype) == (res.shape, res.dtype)
            assert dicp_res.stride() == res.stride()
