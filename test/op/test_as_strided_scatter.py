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
    """src written through three views of a contiguous a of r rows and c columns: its
    transpose (the smaller stride outermost), its rows after the first (an offset), and zeros
    of r * c elements as r rows (as as_strided's backward writes its gradient)."""

    def forward(self, a, transposed, rows):
        r, c = a.shape
        scatter = torch.ops.aten.as_strided_scatter.default
        return (
            scatter(a, transposed, (c, r), (1, c), 0),
            scatter(a * 2, rows, (r - 1, c), (c, 1), c),
            scatter(a.new_zeros(r * c), a, (r, c), (c, 1), 0),
        )


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestAsStridedScatter:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
    # sizes 1, odd and even; one row leaves no rows after the first (an empty view)
    @pytest.mark.parametrize(
        "sizes", [Size((4, 6), (6, 9)), Size((3, 5), (7, 5)), Size((1, 1), (1, 1))]
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_as_strided_scatter(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        a = torch.randn(size).to(dtype)
        transposed = torch.randn(a.t().shape).to(dtype)
        rows = torch.randn(a[1:].shape).to(dtype)
        inputs = [t.requires_grad_() for t in (a, transposed, rows)]

        output = model(*inputs)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(*(t.to(device) for t in inputs))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
        assert_grads_close(output, dicp_output, inputs)
