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
        res_first = torch.ops.aten.select.int(a, 0, 1)
        res_negative = torch.ops.aten.select.int(a, -1, -1)
        res_middle = torch.ops.aten.select.int(a, 1, 0)
        return res_first, res_negative, res_middle


class IndexArgModule(torch.nn.Module):
    """The index as an argument: compiled with dynamic shapes it is a symbol, so whether it
    counts from the end is known only when the kernel runs."""

    def forward(self, a, dim, index):
        return torch.ops.aten.select.int(a, dim, index) * 2.0


model = OpModule()
index_model = IndexArgModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)
compiled_index_model = compile_model(index_model, args.backend, args.dynamic)


class TestSelect:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
    @pytest.mark.parametrize("sizes", [Size((4, 6), (6, 8)), Size((3, 1, 4), (5, 1, 2))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_select(self, sizes, dtype, compiled_model):
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

    @pytest.mark.parametrize("sizes", [Size((5, 3), (5, 3)), Size((4, 3, 5), (3, 4, 5))])
    @pytest.mark.parametrize("dim", [0, 1])
    @pytest.mark.parametrize("compiled_model", compiled_index_model)
    def test_torch_select_index_argument(self, sizes, dim, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        input1 = torch.randn(size)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        for index in (-1, -2, 2):  # one compile serves each index when dynamic
            output = index_model(input1, dim, index)
            dicp_output = compiled_model.model(input1.to(device), dim, index)
            assert_close(dicp_output, output)
