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
        pool = torch.ops.aten.adaptive_max_pool2d.default
        # windows that overlap (7 rows into 4), more outputs than rows, one over everything
        return (*pool(x, [4, 3]), *pool(x, [5, 2]), *pool(x, [1, 1]))


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestAdaptiveMaxPool2d:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
    # Size((N, C, H, W) or (C, H, W), ...): sizes 1, odd and even
    @pytest.mark.parametrize(
        "sizes",
        [
            Size((2, 3, 7, 5), (3, 2, 9, 6)),
            Size((1, 8, 6), (1, 11, 7)),
            Size((1, 1, 4, 3), (1, 1, 5, 4)),
        ],
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_adaptive_max_pool2d(self, sizes, dtype, compiled_model):
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

        # values and the (flat H * W) indices of the maxima
        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
