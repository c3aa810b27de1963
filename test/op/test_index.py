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
    def forward(self, a, rows, columns):
        res_rows = torch.ops.aten.index.Tensor(a, [rows])
        res_columns = torch.ops.aten.index.Tensor(a, [None, columns])
        # (k, 1) and (m,) indices broadcast to a (k, m) grid
        res_grid = torch.ops.aten.index.Tensor(a, [rows[:, None], columns])
        return res_rows, res_columns, res_grid


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestIndex:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
    # dynamic dims chosen so no two unrelated input dims are equal (dynamo would share one
    # symbol between them), at the dynamic size and at the resized one
    @pytest.mark.parametrize(
        "sizes", [Size((4, 6), (6, 8)), Size((3, 1, 4), (7, 1, 4), resized=(9, 1, 6))]
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_index(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # transpose(0, -1) makes the input non-contiguous when both end dims are > 1
        input1 = (torch.randn(size) * 10).to(dtype).transpose(0, -1)
        # repeated and negative indices
        rows = torch.randint(-input1.shape[0], input1.shape[0], (5,))
        columns = torch.randint(-input1.shape[1], input1.shape[1], (3,))

        output = model(input1, rows, columns)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1.to(device), rows.to(device), columns.to(device))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
