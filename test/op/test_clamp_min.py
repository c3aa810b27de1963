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
    def forward(self, a, low, high):
        res_min = torch.ops.aten.clamp_min.Tensor(a, low)
        res_max = torch.ops.aten.clamp_max.Tensor(a, high)
        res_broadcast = torch.ops.aten.clamp_min.Tensor(a, low.amax())
        return res_min, res_max, res_broadcast


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestClampMin:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
    # sizes 1, odd and even
    @pytest.mark.parametrize(
        "sizes", [Size((5,), (7,)), Size((4, 1, 6), (6, 1, 8)), Size((1,), (1,))]
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_clamp_min(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # values in -2..2: bounds often equal the value, where the gradient picks a side
        a, low, high = (torch.randint(-2, 3, size).to(dtype) for _ in range(3))
        a = a.transpose(0, -1)  # non-contiguous when both end dims are > 1
        low, high = low.transpose(0, -1), high.transpose(0, -1)
        if dtype.is_floating_point:
            for t in (a, low, high):
                t.requires_grad_()

        output = model(a, low, high)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(a.to(device), low.to(device), high.to(device))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
        if dtype.is_floating_point:
            assert_grads_close(output, dicp_output, (a, low, high))
