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
    def forward(self, a, index_first, index_last, src):
        res_src = torch.ops.aten.scatter.src(a, 0, index_first, src)
        res_value = torch.ops.aten.scatter.value(a, -1, index_last, 2)
        return res_src, res_value


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestScatter:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
    # dynamic dims chosen so no two unrelated input dims are equal (dynamo would share one
    # symbol between them), at the dynamic size and at the resized one
    @pytest.mark.parametrize("sizes", [Size((4, 6), (6, 8)), Size((3, 1, 4), (5, 1, 4))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_scatter(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # transpose(0, -1) makes the input non-contiguous when both end dims are > 1
        input1 = (torch.randn(size) * 10).to(dtype).transpose(0, -1)
        # argsort of noise gives distinct targets along the dim (the winner of a duplicate
        # write is unspecified); the index covers only part of the input
        index_first = torch.rand(input1.shape).argsort(0)[:2]
        index_last = torch.rand(input1.shape).argsort(-1)[..., :1]
        src = (torch.randn(input1.shape) * 10).to(dtype)

        output = model(input1, index_first, index_last, src)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(
            input1.to(device), index_first.to(device), index_last.to(device), src.to(device)
        )

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)


class TestScatterZeroDim:
    # a 0-d input, index and src: eager takes them as one element along dim 0 or -1
    @pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_scatter_0d(self, dtype, compiled_model):
        input1, src = (torch.randn(()) * 10).to(dtype), (torch.randn(()) * 10).to(dtype)
        index = torch.tensor(0)

        output = model(input1, index, index, src)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1, index, index, src)

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
