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
        pool = torch.ops.aten.avg_pool3d.default
        res_default = pool(x, [2, 2, 2])
        res_padded = pool(x, [3, 3, 3], [2, 2, 2], [1, 1, 1])
        res_exclude_pad = pool(x, [3, 3, 3], [2, 2, 2], [1, 1, 1], False, False)
        res_ceil_divisor = pool(x, [3, 2, 2], [2, 1, 2], [1, 0, 1], True, True, 5)
        return res_default, res_padded, res_exclude_pad, res_ceil_divisor


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestAvgPool3d:
    # eager's CPU avg_pool3d has no float16 or bfloat16 kernel to compare with
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
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
    def test_torch_avg_pool3d(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # transpose(-2, -1) makes the input non-contiguous
        input1 = torch.randn(size, dtype=dtype).transpose(-2, -1)

        output = model(input1)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1.to(device))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
