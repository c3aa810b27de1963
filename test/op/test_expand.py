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
    def forward(self, a, shape):
        return torch.ops.aten.expand.default(a, shape)


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestExpand:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.bool])
    @pytest.mark.parametrize("sizes", [Size((3, 1, 4), (5, 1, 2)), Size((1, 6), (1, 8))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_expand(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # transpose(0, -1) makes the input non-contiguous when both end dims are > 1
        input1 = (torch.randn(size) * 10).to(dtype).transpose(0, -1)
        # a new leading dim; size-1 dims grow to 3, the others stay (-1)
        shape = [2] + [3 if s == 1 else -1 for s in input1.shape]

        output = model(input1, shape)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1.to(device), shape)

        assert_close(dicp_output, output)

    @pytest.mark.parametrize("empty_from", ["size-1 dim", "empty input"])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_expand_to_no_elements(self, empty_from, compiled_model):
        """A size-1 dim expanded to 0, and an empty input expanded: the result has no elements
        and the shape eager gives (OpenVINO's Broadcast kept (1, 3) for (0, 3), and divided by
        zero on an empty input)."""
        device = get_device()
        input1 = torch.randn(1, 3) if empty_from == "size-1 dim" else torch.randn(1, 0, 3)
        shape = [0, 3] if empty_from == "size-1 dim" else [2, 0, 3]
        output = model(input1, shape) * 2
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1.to(device), shape) * 2

        assert dicp_output.shape == output.shape
        assert_close(dicp_output, output)
