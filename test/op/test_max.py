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
    def forward(self, a):
        max_last = torch.ops.aten.max.dim(a, -1)
        max_first = torch.ops.aten.max.dim(a, 0, True)
        min_last = torch.ops.aten.min.dim(a, -1, True)
        min_first = torch.ops.aten.min.dim(a, 0)
        return (
            *max_last,
            *max_first,
            *min_last,
            *min_first,
            torch.ops.aten.max.default(a),
            torch.ops.aten.min.default(a),
        )


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


def sample(size, dtype, nan):
    """Values in -3..3, so every row repeats its extreme: the index of the first one is
    returned. With `nan`, a NaN is placed mid-tensor, which max and min return, and its index."""
    values = torch.randint(-3, 4, size).to(dtype)
    if nan and values.numel() > 1:
        values.view(-1)[values.numel() // 2] = float("nan")
    # transpose(0, -1) makes the input non-contiguous when both end dims are > 1
    return values.transpose(0, -1) if values.dim() else values


class TestMax:
    # NaN exists only in floating types
    @pytest.mark.parametrize(
        "dtype,nan",
        [
            (torch.float32, False),
            (torch.float32, True),
            (torch.float16, False),
            (torch.float16, True),
            (torch.int32, False),
            (torch.bool, False),
        ],
    )
    # sizes 1, odd and even
    @pytest.mark.parametrize(
        "sizes", [Size((5,), (7,)), Size((4, 1, 6), (6, 1, 8)), Size((1,), (1,)), Size((), ())]
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_max(self, sizes, dtype, nan, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        input1 = sample(size, dtype, nan)
        if dtype.is_floating_point:
            input1.requires_grad_()

        output = model(input1)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1.to(device))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
        if dtype.is_floating_point:
            assert_grads_close(
                [r for r in output if r.is_floating_point()],
                [r for r in dicp_output if r.is_floating_point()],
                input1,
            )
