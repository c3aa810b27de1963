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
        res_default = torch.ops.aten.clone.default(a)
        res_contiguous = torch.ops.aten.clone.default(a, memory_format=torch.contiguous_format)
        return res_default, res_contiguous


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestClone:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.bool])
    @pytest.mark.parametrize("sizes", [Size((5,), (7,)), Size((3, 1, 4), (5, 1, 2))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_clone(self, sizes, dtype, compiled_model):
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
        assert dicp_output[1].is_contiguous()
        assert dicp_output[0].data_ptr() != input1.data_ptr()
