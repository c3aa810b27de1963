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
    def forward(self, grad, grad_padded, x, indices, indices_padded):
        pool_backward = torch.ops.aten.max_pool3d_with_indices_backward.default
        res_default = pool_backward(
            grad, x, [2, 2, 2], [2, 2, 2], [0, 0, 0], [1, 1, 1], False, indices
        )
        # overlapping, dilated windows: one input element can receive several gradients
        res_padded = pool_backward(
            grad_padded, x, [3, 3, 2], [2, 2, 1], [1, 1, 0], [1, 1, 2], True, indices_padded
        )
        return res_default, res_padded


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestMaxPool3dWithIndicesBackward:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
    # Size((N, C, D, H, W) or (C, D, H, W), ...): sizes 1, odd and even. Resized, the
    # pooled dims grow by 6, keeping their remainders by the strides: ceil_mode's output size
    # depends on them. Dynamic dims differ from each other and from the gradients' pooled
    # dims at both sizes: dynamo gives equal sizes one symbol, so a coincidence at one size
    # only would trace another graph.
    @pytest.mark.parametrize(
        "sizes",
        [
            Size((2, 3, 6, 7, 5), (2, 3, 8, 13, 18), resized=(2, 3, 14, 19, 24)),
            Size((3, 5, 8, 6), (5, 6, 14, 20), resized=(5, 12, 20, 26)),
            Size((1, 1, 4, 5, 6), (1, 1, 5, 8, 24), resized=(1, 1, 11, 14, 30)),
        ],
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_max_pool3d_with_indices_backward(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # few distinct values: overlapping windows pick the same element (repeated indices).
        # transpose(-2, -1) makes the input non-contiguous.
        input1 = (torch.randn(size) * 1.5).round().to(dtype).transpose(-2, -1)
        pool = torch.ops.aten.max_pool3d_with_indices.default
        out, indices = pool(input1, [2, 2, 2])
        out_padded, indices_padded = pool(input1, [3, 3, 2], [2, 2, 1], [1, 1, 0], [1, 1, 2], True)
        grad = torch.randn(out.shape, dtype=dtype)
        grad_padded = torch.randn(out_padded.shape, dtype=dtype)
        inputs = (grad, grad_padded, input1, indices, indices_padded)

        output = model(*inputs)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(*(t.to(device) for t in inputs))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
