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
    def forward(self, x, weight, bias, running_mean, running_var):
        batch_norm = torch.ops.aten._native_batch_norm_legit_functional.default
        # training: batch statistics, updated running statistics
        res_train = batch_norm(x, weight, bias, running_mean, running_var, True, 0.1, 1e-5)
        # inference: normalize with the running statistics
        res_eval = batch_norm(x, weight, bias, running_mean, running_var, False, 0.1, 1e-5)
        return (*res_train, res_eval[0])


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestNativeBatchNormLegitFunctional:
    # float64: its statistics were computed in float32 (1e-6 off)
    @pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
    # Size((N, C, ...), ...): 4-d and 3-d inputs
    @pytest.mark.parametrize(
        "sizes", [Size((4, 3, 5, 5), (2, 5, 3, 4)), Size((1, 2, 7), (1, 3, 5))]
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch__native_batch_norm_legit_functional(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # a channels-last layout for the 4-d input; float32 parameters, as under autocast
        x = (torch.randn(size) * 2 + 1).to(dtype)
        if x.dim() == 4:
            x = x.contiguous(memory_format=torch.channels_last)
        channels = size[1]
        # float32 parameters and statistics for the half types, as under autocast
        param = torch.float64 if dtype == torch.float64 else torch.float32
        weight, bias = torch.randn(channels, dtype=param), torch.randn(channels, dtype=param)
        running_mean = torch.randn(channels, dtype=param)
        running_var = torch.rand(channels, dtype=param) + 0.5
        inputs = (x, weight, bias, running_mean, running_var)

        output = model(*inputs)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(*(t.to(device) for t in inputs))

        for index, (dicp_res, res) in enumerate(zip(dicp_output, output, strict=True)):
            if index in (1, 2) and dtype in (torch.float16, torch.bfloat16):
                # save_mean/save_invstd of a mixed-precision input: the eager CPU kernel returns
                # float32, torch's meta kernel (so inductor and dicp) types them like x
                assert dicp_res.dtype in (torch.float32, dtype)
                assert_close(dicp_res.to(dtype), res.to(dtype))
            else:
                assert_close(dicp_res, res)
