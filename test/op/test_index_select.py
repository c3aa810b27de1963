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
    def forward(self, a, index_first, index_last):
        res_first = torch.ops.aten.index_select.default(a, 0, index_first)
        res_last = torch.ops.aten.index_select.default(a, -1, index_last)
        # a 0-d index keeps the dim, with size 1
        res_scalar_index = torch.ops.aten.index_select.default(a, 0, index_first[-1])
        return res_first, res_last, res_scalar_index


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestIndexSelect:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
    # dynamic dims chosen so no two unrelated input dims are equal (dynamo would share one
    # symbol between them), at the dynamic size and at the resized one
    @pytest.mark.parametrize("sizes", [Size((4, 6), (6, 8)), Size((3, 1, 4), (7, 1, 4))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_index_select(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # transpose(0, -1) makes the input non-contiguous when both end dims are > 1
        input1 = (torch.randn(size) * 10).to(dtype).transpose(0, -1)
        # repeated indices, more of them than the dim has entries
        index_first = torch.randint(0, input1.shape[0], (input1.shape[0] + 2,))
        index_last = torch.randint(0, input1.shape[-1], (2,))

        output = model(input1, index_first, index_last)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(
            input1.to(device), index_first.to(device), index_last.to(device)
        )

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)


class TestIndexSelectZeroDimInput:
    # a 0-d input with a one-element index: eager takes the input as one element along dim 0
    @pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_index_select_0d_input(self, dtype, compiled_model):
        input1, index = (torch.randn(()) * 10).to(dtype), torch.tensor([0])

        output = model(input1, index, index)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1, index, index)

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
