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
        return torch.ops.aten.log10.default(a)


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestLog10:
    # int64: the result is float32, computed from the converted integer
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64])
    # sizes 1, odd and even
    @pytest.mark.parametrize(
        "sizes", [Size((5,), (7,)), Size((4, 1, 6), (6, 1, 8)), Size((1,), (1,))]
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_log10(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # magnitudes from 1e-3 to 1e3, exact powers of ten among them; non-contiguous
        exponents = torch.randint(-3, 4, size).double()
        values = 10**exponents * torch.where(torch.rand(size) < 0.5, 1.0, torch.rand(size) + 1)
        if not dtype.is_floating_point:
            values = values + 1
        input1 = values.to(dtype).transpose(0, -1)
        if dtype.is_floating_point:
            input1.requires_grad_()

        output = model(input1)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1.to(device))

        assert_close(dicp_output, output)
        if dtype.is_floating_point:
            assert_grads_close([output], [dicp_output], (input1,))
