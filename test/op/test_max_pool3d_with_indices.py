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
        pool = torch.ops.aten.max_pool3d_with_indices.default
        res_default = pool(x, [2, 2, 2])
        # overlapping windows over the padding
        res_padded = pool(x, [3, 3, 3], [2, 2, 2], [1, 1, 1])
        res_ceil = pool(x, [3, 2, 2], [2, 1, 2], [1, 0, 1], [1, 1, 1], True)
        res_dilated = pool(x, [2, 2, 2], [1, 1, 1], [0, 0, 0], [2, 1, 2])
        return (*res_default, *res_padded, *res_ceil, *res_dilated)


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestMaxPool3dWithIndices:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
    # Size((N, C, D, H, W) or (C, D, H, W), ...): sizes 1, odd and even. Resized, the
    # pooled dims grow by 6, keeping their remainders by the strides: ceil_mode's output size
    # depends on them, so other remainders would trace another graph.
    @pytest.mark.parametrize(
        "sizes",
        [
            Size((2, 3, 6, 7, 5), (2, 3, 9, 7, 11), resized=(2, 3, 15, 13, 17)),
            Size((3, 5, 8, 6), (5, 9, 7, 11), resized=(5, 15, 13, 17)),
            Size((1, 1, 4, 5, 6), (1, 1, 6, 5, 7), resized=(1, 1, 12, 11, 13)),
        ],
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_max_pool3d_with_indices(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # whole numbers in [-3, 3]: windows hold ties, and the first maximum's index counts;
        # a NaN beats every number. transpose(-2, -1) makes the input non-contiguous.
        x = (torch.randn(size) * 1.5).round().clamp(-3, 3)
        x.view(-1)[::7] = float("nan")
        input1 = x.to(dtype).transpose(-2, -1)

        output = model(input1)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1.to(device))

        # values and the (flat D * H * W) indices of the maxima
        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
