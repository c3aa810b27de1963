import pytest

from ..common.utils import (Size, assert_close, assert_grads_close, compile_model, dynamo,
                            get_device, parse_args, torch, update_dynamo_config)


class OpModule(torch.nn.Module):
    def forward(self, a):
        return torch.ops.aten.erfc.default(a)


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestErfc:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
    # sizes 1, odd and even
    @pytest.mark.parametrize("sizes", [Size((5,), (7,)), Size((4, 1, 6), (6, 1, 8)),
                                       Size((1,), (1,))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_erfc(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # transpose(0, -1) makes the input non-contiguous when both end dims are > 1
        input1 = (torch.randn(size) * 2).to(dtype).transpose(0, -1).requires_grad_()

        output = model(input1)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1.to(device))

        assert_close(dicp_output, output)
        assert_grads_close([output], [dicp_output], (input1,))
