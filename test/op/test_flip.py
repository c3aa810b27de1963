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
        res_first = torch.ops.aten.flip.default(a, [0])
        res_last = torch.ops.aten.flip.default(a, [-1])
        res_all = torch.ops.aten.flip.default(a, list(range(a.dim())))
        res_none = torch.ops.aten.flip.default(a, [])  # a copy, not `a` itself
        # cumsum's gradient flips, cumsums and flips back
        res_cumsum = torch.cumsum(a, 0) if a.dtype.is_floating_point else a
        return res_first, res_last, res_all, res_none, res_cumsum


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestFlip:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
    # sizes 1, odd and even
    @pytest.mark.parametrize(
        "sizes", [Size((5,), (7,)), Size((4, 1, 6), (6, 1, 8)), Size((1,), (1,)), Size((), ())]
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_flip(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        input1 = (torch.randn(size) * 5).to(dtype)
        if input1.dim():
            input1 = input1.transpose(0, -1)  # non-contiguous when both end dims are > 1
        if dtype.is_floating_point:
            input1.requires_grad_()

        output = model(input1)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1.to(device))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
        assert dicp_output[3].data_ptr() != input1.data_ptr()  # eager's flip never aliases
        if dtype.is_floating_point:
            assert_grads_close(output, dicp_output, input1)
