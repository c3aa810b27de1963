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
        res_ascending = torch.ops.aten.sort.default(a, -1)
        res_descending = torch.ops.aten.sort.default(a, 0, True)
        res_stable = torch.ops.aten.sort.stable(a, stable=True, dim=-1, descending=True)
        return res_ascending, res_descending, res_stable


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestSort:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
    @pytest.mark.parametrize("sizes", [Size((5,), (7,)), Size((3, 1, 4), (5, 1, 2))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_sort(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # transpose(0, -1) makes the input non-contiguous when both end dims are > 1
        input1 = (torch.randn(size) * 3).to(dtype).transpose(0, -1)

        output = model(input1)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1.to(device))

        for (dicp_values, dicp_indices), (values, _), dim in zip(
            dicp_output[:2], output[:2], (-1, 0), strict=True
        ):
            assert_close(dicp_values, values)
            # ties (int32) may order equal values either way: check the indices point at them
            assert_close(input1.gather(dim, dicp_indices.cpu()), dicp_values)
        # a stable sort keeps equal values in input order, so its indices are exact
        assert_close(dicp_output[2][0], output[2][0])
        assert_close(dicp_output[2][1], output[2][1])
