import pytest

from ..common.utils import (
    Size,
    assert_close,
    assert_grads_close,
    compile_model,
    dynamo,
    get_device,
    parse_args,
    torch,
    update_dynamo_config,
)


class OpModule(torch.nn.Module):
    """Attention's softmax under a mask (scaled_dot_product_attention's math path): rows all
    -inf give zeros, not NaN; over the last dim and over the first."""

    def forward(self, a, mask):
        masked = a.masked_fill(mask, float("-inf"))
        res_last = torch.ops.aten._safe_softmax.default(masked, -1)
        res_first = torch.ops.aten._safe_softmax.default(masked, 0)
        return res_last, res_first


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestSafeSoftmax:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
    # sizes 1, odd and even
    @pytest.mark.parametrize(
        "sizes", [Size((5, 8), (7, 6)), Size((3, 1, 4), (5, 1, 9)), Size((1, 1), (1, 1))]
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch__safe_softmax(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        a = (torch.randn(size) * 10).to(dtype).requires_grad_()
        # the first row and the first column wholly masked, a third of the rest
        mask = torch.rand(size) < 0.3
        mask[0], mask[(slice(None),) * (len(size) - 1) + (0,)] = True, True

        output = model(a, mask)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(a.to(device), mask.to(device))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
        assert_grads_close(output, dicp_output, [a])
