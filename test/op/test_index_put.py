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
    def forward(self, a, unique_rows, rows, values):
        res_put = torch.ops.aten.index_put.default(a, [unique_rows], values)
        # a single row of values broadcasts over the indexed rows
        res_broadcast = torch.ops.aten.index_put.default(a, [unique_rows], values[0])
        res_accumulate = torch.ops.aten.index_put.default(a, [rows], values, True)
        return res_put, res_broadcast, res_accumulate


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestIndexPut:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
    @pytest.mark.parametrize("sizes", [Size((4, 6), (6, 8)), Size((3, 1, 4), (5, 1, 2))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_index_put(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # transpose(0, -1) makes the input non-contiguous when both end dims are > 1
        input1 = (torch.randn(size) * 10).to(dtype).transpose(0, -1)
        # unique rows for plain writes (the winner of a duplicate is unspecified);
        # repeated rows, negative ones included, for accumulate
        unique_rows = torch.randperm(input1.shape[0])[:3]
        rows = torch.randint(-input1.shape[0], input1.shape[0], (unique_rows.numel(),))
        values = (torch.randn(unique_rows.numel(), *input1.shape[1:]) * 10).to(dtype)

        output = model(input1, unique_rows, rows, values)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(
            input1.to(device), unique_rows.to(device), rows.to(device), values.to(device)
        )

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
