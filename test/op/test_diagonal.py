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
    """The main diagonal, ones above and below it, one past the edge (empty), and one of two
    other dims in reverse order; the backward writes each into zeros (diagonal_scatter). The
    last two view a computed tensor past either edge: an empty one's storage span is 0, where
    the wrapper's copy into its eager layout asked for -2 elements (issue 44: (0, 2, 2))."""

    def forward(self, a):
        diagonal = torch.ops.aten.diagonal.default
        return (
            diagonal(a),
            diagonal(a, 1),
            diagonal(a, -2),
            diagonal(a, 9),
            diagonal(a, 1, -1, 0) * 2,
            diagonal(a.sin(), 1),
            diagonal(a.sin(), -12, 1, 0),
        )


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestDiagonal:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
    # sizes 1, odd and even; square and not; empty
    @pytest.mark.parametrize(
        "sizes",
        [
            Size((4, 6), (6, 9)),
            Size((3, 5, 4), (7, 5, 8)),
            Size((1, 1), (1, 1)),
            Size((0, 2, 2), (0, 3, 2)),
            Size((2, 2, 0), (3, 2, 0)),
        ],
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_diagonal(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        input1 = torch.randn(size).to(dtype).requires_grad_()

        output = model(input1)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1.to(device))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
        assert_grads_close(output, dicp_output, (input1,))
