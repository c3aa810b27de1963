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
    def forward(self, grad, x, weight, running_mean, running_var, save_mean, save_invstd):
        backward = torch.ops.aten.native_batch_norm_backward.default
        res_train = backward(
            grad,
            x,
            weight,
            running_mean,
            running_var,
            save_mean,
            save_invstd,
            True,
            1e-5,
            [True, True, True],
        )
        # inference uses the running statistics; no weight gradient requested
        res_eval = backward(
            grad, x, weight, running_mean, running_var, None, None, False, 1e-5, [True, False, True]
        )
        return (*res_train, res_eval[0], res_eval[2])


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestNativeBatchNormBackward:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
    # Size((N, C, ...), ...): 4-d and 3-d inputs
    @pytest.mark.parametrize(
        "sizes", [Size((4, 3, 5, 5), (2, 5, 3, 4)), Size((1, 2, 7), (1, 3, 5))]
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_native_batch_norm_backward(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        x = (torch.randn(size) * 2 + 1).to(dtype)
        channels = size[1]
        # float32 parameters and statistics, as under autocast
        weight, bias = torch.randn(channels), torch.randn(channels)
        running_mean, running_var = torch.randn(channels), torch.rand(channels) + 0.5
        _, save_mean, save_invstd = torch.ops.aten.native_batch_norm.default(
            x, weight, bias, running_mean.clone(), running_var.clone(), True, 0.1, 1e-5
        )
        grad = torch.randn(size, dtype=dtype)
        inputs = (grad, x, weight, running_mean, running_var, save_mean, save_invstd)

        output = model(*inputs)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(*(t.to(device) for t in inputs))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)

    @pytest.mark.parametrize("sizes", [Size((2, 2), (5, 4)), Size((1, 3, 5), (2, 4, 6))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_strided_parameters(self, sizes, compiled_model):
        """Weight and statistics sliced with a step. Eager's CPU kernel reads a strided weight
        as if it were contiguous (torch 2.11, 2.13: the gradient of x came out wrong by 0.7 for
        w = randn(6)[::3]), so the expected values come from contiguous copies: the same
        values, the layout eager handles."""
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        channels = size[1]

        def strided(values):  # step 13: no size equals it, so dynamo keeps sizes symbolic
            wide = torch.zeros(channels * 13)
            wide[::13] = values
            return wide[::13]

        x = torch.randn(size) * 2 + 1
        weight, running_mean = strided(torch.randn(channels)), strided(torch.randn(channels))
        running_var = strided(torch.rand(channels) + 0.5)
        _, save_mean, save_invstd = torch.ops.aten.native_batch_norm.default(
            x, weight.contiguous(), None, running_mean.clone(), running_var.clone(), True, 0.1, 1e-5
        )
        grad = torch.randn(size)
        inputs = (grad, x, weight, running_mean, running_var, save_mean, save_invstd)

        output = model(*(t.contiguous() for t in inputs))
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(*(t.to(device) for t in inputs))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
