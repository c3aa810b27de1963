import pytest

from ..common.utils import (Size, assert_close, compile_model, dynamo, get_device, parse_args,
                            torch, update_dynamo_config)


class OpModule(torch.nn.Module):
    def forward(self, a, b):
        res_tensor = torch.ops.aten.pow.Tensor_Tensor(a, b)
        res_broadcast = torch.ops.aten.pow.Tensor_Tensor(a, b[0])
        res_square = torch.ops.aten.pow.Tensor_Scalar(a, 2)
        res_sqrt = torch.ops.aten.pow.Tensor_Scalar(a, 0.5)
        res_scalar_base = torch.ops.aten.pow.Scalar(2, b)
        return res_tensor, res_broadcast, res_square, res_sqrt, res_scalar_base


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestPow:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
    @pytest.mark.parametrize("sizes", [Size((5,), (7,)), Size((3, 1, 4), (5, 1, 2))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_pow(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # bases in [0.5, 3.5) and exponents in [0, 4): defined for floats and integers
        # transpose(0, -1) makes b non-contiguous when both end dims are > 1; b[0] broadcasts
        b = (torch.rand(size) * 4).to(dtype).transpose(0, -1)
        a = (torch.rand(b.shape) * 3 + 0.5).to(dtype)

        output = model(a, b)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(a.to(device), b.to(device))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
