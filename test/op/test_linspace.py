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
    def forward(self, steps, dtype):
        # float bounds into an integer dtype: eager truncates the bounds first (4.3 -> 4)
        res_up = torch.ops.aten.linspace.default(4.3, 50, steps, dtype=dtype)
        res_down = torch.ops.aten.linspace.default(30.7, 1.2, steps, dtype=dtype)
        return res_up, res_down


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestLinspace:
    @pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.float32])
    # the second dynamic size repeats the first: the step, (end - start) / (steps - 1), is a
    # float that dynamo specializes, so another `steps` compiles another graph
    @pytest.mark.parametrize("sizes", [Size(50, 37, 37), Size(1, 1), Size(8, 13, 13)])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_linspace(self, sizes, dtype, compiled_model):
        device = get_device()
        steps = sizes.dynamic if compiled_model.dynamic else sizes.static

        output = model(steps, dtype)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(steps, dtype)

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
            assert dicp_res.device.type == torch.device(device).type
