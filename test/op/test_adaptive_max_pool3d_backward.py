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
    def forward(self, grad, x, indices):
        return torch.ops.aten.adaptive_max_pool3d_backward.default(grad, x, indices)


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestAdaptiveMaxPool3dBackward:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
    # Size((N, C, D, H, W) or (C, D, H, W), ...): sizes 1, odd and even. Dynamic dims differ
    # from each other and from the gradient's 4 x 3 x 2 at both sizes: dynamo gives equal
    # sizes one symbol, and a coincidence at one size only would change the generated code.
    @pytest.mark.parametrize(
        "sizes",
        [
            Size((2, 3, 7, 5, 6), (2, 5, 9, 7, 11), resized=(2, 5, 10, 8, 13)),
            Size((3, 5, 8, 6), (5, 9, 7, 11)),
            Size((1, 1, 4, 3, 5), (1, 1, 6, 5, 7)),
        ],
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_adaptive_max_pool3d_backward(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # few distinct values: overlapping windows (7 into 4) pick the same element, so one
        # input element receives several gradients
        input1 = (torch.randn(size) * 1.5).round().to(dtype).transpose(-2, -1)
        out, indices = torch.ops.aten.adaptive_max_pool3d.default(input1, [4, 3, 2])
        grad = torch.randn(out.shape, dtype=dtype)
        inputs = (grad, input1, indices)

        output = model(*inputs)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(*(t.to(device) for t in inputs))

        assert_close(dicp_output, output)
