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
    def forward(self, a):
        convert = torch.ops.prims.convert_element_type.default
        # a conversion to a half type rounds even when the value is converted back at once
        # (fused into one kernel, it stays in a float register): found by the fuzzer
        through_half = convert(convert(a, torch.float16), torch.float64)
        through_bf16 = convert(convert(a, torch.bfloat16), torch.float32)
        return (
            convert(a, torch.float32),
            convert(a, torch.float16),
            convert(a, torch.bfloat16),
            convert(a, torch.int32),
            convert(a, torch.int64),
            convert(a, torch.bool),
            through_half,
            through_bf16,
        )


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestConvertElementType:
    @pytest.mark.parametrize(
        "dtype", [torch.float32, torch.float64, torch.float16, torch.int64, torch.bool]
    )
    @pytest.mark.parametrize("sizes", [Size((5,), (7,)), Size((3, 1, 4), (5, 1, 2))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_convert_element_type(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # floats of both signs: the cast to integers truncates toward zero
        # transpose(0, -1) makes the input non-contiguous when both end dims are > 1
        input1 = (torch.randn(size) * 10).to(dtype).transpose(0, -1)

        output = model(input1)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1.to(device))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
