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
    def forward(self, grad, out_last, out_first):
        backward = torch.ops.aten._softmax_backward_data.default
        res_last = backward(grad, out_last, -1, grad.dtype)
        res_first = backward(grad, out_first, 0, grad.dtype)
        return res_last, res_first


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestSoftmaxBackwardData:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
    @pytest.mark.parametrize("sizes", [Size((5,), (7,)), Size((3, 1, 4), (5, 1, 2))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch__softmax_backward_data(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # the forward outputs along each dim
        x = (torch.randn(size) * 3).to(dtype)
        out_last = torch.ops.aten._softmax.default(x, -1, False)
        out_first = torch.ops.aten._softmax.default(x, 0, False)
        # transpose(0, -1) makes grad non-contiguous when both end dims are > 1
        grad = torch.randn(size[::-1], dtype=dtype).transpose(0, -1)

        output = model(grad, out_last, out_first)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(
            grad.to(device), out_last.to(device), out_first.to(device)
        )

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
