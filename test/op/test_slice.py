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
        res_start = torch.ops.aten.slice.Tensor(a, 0, 1)
        res_inner = torch.ops.aten.slice.Tensor(a, -1, 1, -1)
        res_step = torch.ops.aten.slice.Tensor(a, -1, 0, 9223372036854775807, 2)
        res_negative = torch.ops.aten.slice.Tensor(a, 0, -2)
        res_clamped = torch.ops.aten.slice.Tensor(a, 1, 0, 100)
        return res_start, res_inner, res_step, res_negative, res_clamped


class BoundArgModule(torch.nn.Module):
    """The bounds as arguments: compiled with dynamic shapes they are symbols, so whether they
    count from the end is known only when the kernel runs."""

    def forward(self, a, start, end):
        return torch.ops.aten.slice.Tensor(a, 1, start, end) * 2.0


model = OpModule()
bound_model = BoundArgModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)
compiled_bound_model = compile_model(bound_model, args.backend, args.dynamic)


class TestSlice:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
    @pytest.mark.parametrize("sizes", [Size((4, 6), (6, 8)), Size((3, 1, 4), (5, 1, 2))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_slice(self, sizes, dtype, compiled_model):
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

    @pytest.mark.parametrize("sizes", [Size((3, 7), (3, 7)), Size((2, 7, 3), (3, 7, 4))])
    @pytest.mark.parametrize("compiled_model", compiled_bound_model)
    def test_torch_slice_bound_arguments(self, sizes, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        input1 = torch.randn(size)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        # one compile serves each when dynamic; no bound equals a size, which dynamo would
        # give the size's symbol
        for start, end in ((-4, 6), (2, -2), (-3, -1)):
            output = bound_model(input1, start, end)
            dicp_output = compiled_model.model(input1.to(device), start, end)
            assert_close(dicp_output, output)
