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
    """Windows that overlap (step below size), that skip elements (step above size), of the
    input and of a computed tensor, and windows of windows. The backward sums the gradients
    of the windows that share an element (an index_put that accumulates); an output whose
    windows overlap gets its gradient whole (issue 44: x.sin().unfold(0, 3, 1) was 2.95 off)."""

    def forward(self, a):
        unfold = torch.ops.aten.unfold.default
        # each computed tensor viewed once: AOTAutograd returns such a view itself, and a
        # tangent in its overlapping strides lost gradients (views sharing a base it rebuilds)
        return (
            unfold(a.sin(), -1, 2, 1),
            unfold(a * 3, -1, 3, 2),
            unfold(a.exp(), 0, 1, 2),
            unfold(a, 0, 1, 1) * 2,
            unfold(unfold(a.cos(), -1, 2, 1), 0, 1, 1),
        )


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestUnfold:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
    # sizes 1, odd and even; the last dim at least one window of 3
    @pytest.mark.parametrize(
        "sizes", [Size((4, 6), (6, 9)), Size((3, 5, 4), (7, 5, 8)), Size((1, 3), (1, 3))]
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_unfold(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        input1 = torch.randn(size).to(dtype).requires_grad_()

        output = model(input1)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1.to(device))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
            assert all(
                n == 1 or a == b for n, a, b in zip(res.shape, dicp_res.stride(), res.stride())
            )  # eager's windows
        assert_grads_close(output, dicp_output, (input1,))
