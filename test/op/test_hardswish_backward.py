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
    def forward(self, grad, x):
        return torch.ops.aten.hardswish_backward.default(grad, x)


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestHardswishBackward:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
    @pytest.mark.parametrize("sizes", [Size((5,), (7,)), Size((3, 1, 4), (5, 1, 2))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_hardswish_backward(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # multiples of 0.5 hit the piece boundaries -3 and 3 exactly
        x = ((torch.randn(size) * 8).round() / 2).to(dtype)
        # transpose(0, -1) makes grad non-contiguous when both end dims are > 1
        grad = torch.randn(size[::-1], dtype=dtype).transpose(0, -1)

        output = model(grad, x)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(grad.to(device), x.to(device))

        assert_close(dicp_output, output)
