import pytest

from ..common.utils import (Size, assert_close, compile_model, dynamo, get_device, parse_args,
                            torch, update_dynamo_config)


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
