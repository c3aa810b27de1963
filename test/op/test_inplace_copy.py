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
    def forward(self, a, b):
        a.copy_(b)
        return torch.ops.aten.add.Tensor(a, 1)


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestInplaceCopy:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
    @pytest.mark.parametrize("sizes", [Size((5,), (7,)), Size((3, 1, 4), (5, 1, 2))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_inplace_copy(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # transpose(0, -1) makes a non-contiguous when both end dims are > 1
        a = (torch.randn(size) * 10).to(dtype).transpose(0, -1)
        # float32 values are cast to a's dtype; b broadcasts over dim 0
        b = torch.randn(a.shape[1:]) * 10
        dicp_a = a.clone().to(device)

        output = model(a, b)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(dicp_a, b.to(device))

        assert_close(dicp_output, output)
        # the copy must land in the caller's tensor
        assert_close(dicp_a, a)
