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
    def forward(self, a, index, src):
        res_first = torch.ops.aten.scatter_add.default(a, 0, index, src)
        res_last = torch.ops.aten.scatter_add.default(a, -1, index, src)
        return res_first, res_last


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestScatterAdd:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
    # sizes 1, odd and even; the index repeats targets (values in [0, 2) along both dims)
    @pytest.mark.parametrize(
        "sizes", [Size((4, 6), (6, 8)), Size((3, 1, 5), (5, 1, 7)), Size((), ())]
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_scatter_add(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        input1 = (torch.randn(size) * 10).to(dtype)
        index = torch.randint(0, 2 if input1.dim() else 1, input1.shape)
        src = (torch.randn(input1.shape) * 10).to(dtype)
        if dtype.is_floating_point:
            input1.requires_grad_()
            src.requires_grad_()

        output = model(input1, index, src)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1.to(device), index.to(device), src.to(device))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
        if dtype.is_floating_point:
            assert_grads_close(output, dicp_output, (input1, src))
