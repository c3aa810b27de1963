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

PAD_2D = torch.ops.aten.replication_pad2d.default
PADS = ([1, 2, 3, 0], [0, -1, 2, 2])


class OpModule(torch.nn.Module):
    def forward(self, x, *grads):
        pad_backward = torch.ops.aten.replication_pad2d_backward.default
        return tuple(pad_backward(grad, x, pad) for grad, pad in zip(grads, PADS, strict=True))


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestReplicationPad2dBackward:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
    # Size((N, C, H, W) or (C, H, W), ...): sizes 1, odd and even. Dynamic dims
    # differ from each other and from the gradients' padded dims at both sizes: dynamo gives
    # equal sizes one symbol, so a coincidence at one size only would trace another graph.
    @pytest.mark.parametrize(
        "sizes",
        [
            Size((2, 3, 7, 6), (2, 5, 9, 19)),
            Size((3, 1, 2), (5, 9, 19)),  # a crop to width 0 is an error from torch 2.14
            Size((1, 1, 4, 5), (1, 1, 9, 19)),
        ],
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_replication_pad2d_backward(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        input1 = torch.randn(size, dtype=dtype)
        # the gradient of each padding: the edge elements take every copy of themselves
        grads = [torch.randn(PAD_2D(input1, pad).shape, dtype=dtype) for pad in PADS]

        output = model(input1, *grads)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1.to(device), *(g.to(device) for g in grads))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
