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
    def forward(self, a, tail):
        m, n = a.shape
        as_strided = torch.ops.aten.as_strided.default
        # strides address the storage of the transposed product, which is (m, n) row-major:
        # columns 0-1 and, one element further on, columns 1-2 of the transpose
        transposed = (a * 2).t()
        res_columns = as_strided(transposed, [n, 2], [1, n], 0)
        res_shifted = as_strided(transposed, [n, 2], [1, n], n)
        # eager keeps the transposed layout for a pointwise op of a transpose: reading its
        # storage in memory order gives back a * 3
        res_memory_order = as_strided(a.t() * 3, [m, n], [n, 1], 0)
        # an input that starts inside its storage: offsets count from the storage start
        res_input = as_strided(tail, [2, 2], [1, 2], tail.storage_offset() + 1)
        # every other column of a product, reinterpreted over its whole rows: the strides
        # reach the skipped columns, which the view does not cover but its storage does
        res_gaps = as_strided((a + 1)[:, ::2], [m, n - 1], [n, 1], 1)
        # a computed tensor whose own layout has gaps (rows two elements apart): the strides
        # address that storage, not the compact layout a converter might give the value
        gapped = torch.empty_strided((m, n), (n + 2, 1), dtype=a.dtype)
        gapped.copy_(a * 2)
        res_gapped = as_strided(gapped, [m, n // 2], [n + 2, 2], 1)
        return res_columns, res_shifted, res_memory_order, res_input, res_gaps, res_gapped


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestAsStrided:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
    @pytest.mark.parametrize("sizes", [Size((4, 6), (6, 8)), Size((3, 5), (5, 7))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_as_strided(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        input1 = torch.randn(size, dtype=dtype)
        # a view starting at element 3 of its storage
        tail = torch.randn(size[0] * size[1] + 3, dtype=dtype)[3:]

        output = model(input1, tail)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1.to(device), tail.to(device))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
