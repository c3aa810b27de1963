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
    def forward(self, x):
        res_train = torch.ops.aten.native_dropout.default(x, 0.3, True)
        res_eval = torch.ops.aten.native_dropout.default(x, 0.3, False)
        return (*res_train, *res_eval)


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestNativeDropout:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
    # large enough for the statistical bound to be tight
    @pytest.mark.parametrize("sizes", [Size((32, 64), (48, 40)), Size((1, 700), (1, 900))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_native_dropout(self, sizes, dtype, compiled_model):
        device = get_device()
        size = sizes.dynamic if compiled_model.dynamic else sizes.static
        p = 0.3
        # transpose(0, -1) makes the input non-contiguous
        x = torch.randn(size, dtype=dtype).transpose(0, -1)

        output = model(x)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(x.to(device))

        # random: compare properties, never values
        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert (dicp_res.shape, dicp_res.dtype) == (res.shape, res.dtype)
        out, mask, eval_out, eval_mask = (t.cpu() for t in dicp_output)
        # kept elements are scaled by 1 / (1 - p), dropped ones are zero
        assert_close(out, torch.where(mask, x * (1 / (1 - p)), torch.zeros((), dtype=dtype)))
        # the keep rate is within 5 standard deviations of 1 - p
        keep_rate = mask.double().mean().item()
        assert abs(keep_rate - (1 - p)) <= 5 * (p * (1 - p) / mask.numel()) ** 0.5
        # inference keeps everything unscaled
        assert_close(eval_out, x)
        assert eval_mask.all()
