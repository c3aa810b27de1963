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
    def forward(self, a, repeats, output_size):
        res_dim = torch.ops.aten.repeat_interleave.self_int(a, 2, 0)
        res_flat = torch.ops.aten.repeat_interleave.self_int(a, 3)
        res_tensor = torch.ops.aten.repeat_interleave.self_Tensor(
            a, repeats, -1, output_size=output_size
        )
        return res_dim, res_flat, res_tensor


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestRepeatInterleave:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
    @pytest.mark.parametrize("sizes", [Size((5,), (7,)), Size((3, 1, 4), (5, 1, 2))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_repeat_interleave(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        # transpose(0, -1) makes the input non-contiguous when both end dims are > 1
        input1 = (torch.randn(size) * 10).to(dtype).transpose(0, -1)
        # per-element repeats (zeros drop the element); output_size keeps the shape static
        repeats = torch.randint(0, 3, (input1.shape[-1],))
        output_size = int(repeats.sum())

        output = model(input1, repeats, output_size)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(input1.to(device), repeats.to(device), output_size)

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
