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
    def forward(self, x):
        pool = torch.ops.aten.max_pool2d_with_indices.default
        res_default = pool(x, [2, 2])
        res_padded = pool(x, [3, 3], [2, 2], [1, 1])
        res_ceil = pool(x, [3, 2], [2, 1], [1, 0], [1, 1], True)
        res_dilated = pool(x, [2, 2], [1, 1], [0, 0], [2, 2])
        return (*res_default, *res_padded, *res_ceil, *res_dilated)


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestMaxPool2dWithIndices:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
    # Size((N, C, H, W) or (C, H, W), ...)
    @pytest.mark.parametrize(
        "sizes", [Size((2, 3, 8, 8), (3, 2, 9, 7)), Size((1, 7, 6), (1, 6, 9))]
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_max_pool2d_with_indices(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # transpose(-2, -1) makes the input non-contiguous
        input1 = torch.randn(size, dtype=dtype).transpose(-2, -1)

        output = model(input1)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1.to(device))

        # values and the (flat H * W) indices of the maxima
        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
