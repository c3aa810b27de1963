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
    """src written over a's main diagonal and over the one below it, in dims (-1, 0)."""

    def forward(self, a, main, below):
        scatter = torch.ops.aten.diagonal_scatter.default
        return scatter(a, main), scatter(a * 2, below, -1, -1, 0)


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestDiagonalScatter:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
    # sizes 1, odd and even; square and not
    @pytest.mark.parametrize(
        "sizes", [Size((4, 6), (6, 9)), Size((3, 5, 4), (7, 5, 8)), Size((1, 1), (1, 1))]
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_diagonal_scatter(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        a = torch.randn(size).to(dtype)
        main = torch.randn(a.diagonal().shape).to(dtype)
        below = torch.randn(a.diagonal(-1, -1, 0).shape).to(dtype)
        inputs = [t.requires_grad_() for t in (a, main, below)]

        output = model(*inputs)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(*(t.to(device) for t in inputs))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
        assert_grads_close(output, dicp_output, inputs)
