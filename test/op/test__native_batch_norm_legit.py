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
    def forward(self, x, weight, bias):
        # no running statistics: instance norm, and batch norm with track_running_stats=False
        no_stats = torch.ops.aten._native_batch_norm_legit.no_stats(
            x, weight, bias, True, 0.1, 1e-5
        )
        instance = torch.nn.functional.instance_norm(x, weight=weight, bias=bias)
        return (*no_stats, instance)


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestNativeBatchNormLegit:
    @pytest.mark.parametrize("dtype", [torch.float32])
    # Size((N, C, ...), ...): sizes 1, odd and even; 4-d and 3-d inputs (instance norm needs
    # two elements per instance when training)
    @pytest.mark.parametrize(
        "sizes",
        [Size((4, 3, 5, 6), (2, 5, 3, 4)), Size((1, 2, 7), (1, 3, 5)), Size((2, 1, 2), (3, 1, 4))],
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch__native_batch_norm_legit(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        x = (torch.randn(size) * 2 + 1).to(dtype).requires_grad_()
        channels = size[1]
        weight = torch.randn(channels).requires_grad_()
        bias = torch.randn(channels).requires_grad_()
        inputs = (x, weight, bias)

        output = model(*inputs)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(*(t.to(device) for t in inputs))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
        # the normalized results: save_mean and save_invstd have no gradient
        assert_grads_close((output[0], output[3]), (dicp_output[0], dicp_output[3]), inputs)
