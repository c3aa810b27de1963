import pytest

from ..common.utils import (Size, compile_model, dynamo, get_device, parse_args, torch,
                            update_dynamo_config)


class OpModule(torch.nn.Module):
    def forward(self, a, b):
        return torch.ops.aten.add.Tensor(a, b)


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestAdd:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
    @pytest.mark.parametrize("sizes", [Size((5,), (5, 3)), Size((3, 5), (5, 3)),
                                       Size((2, 3, 4), (2, 4))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_add(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        input1 = torch.randn(size, dtype=dtype)
        input2 = torch.randn(size, dtype=dtype)

        output = model(input1, input2)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1.to(device), input2.to(device))

        assert torch.allclose(output, dicp_output.cpu(), equal_nan=True)
