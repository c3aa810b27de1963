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
    def forward(self, end, dtype):
        res_end = torch.ops.aten.arange.default(end, dtype=dtype)
        res_start = torch.ops.aten.arange.start(1, end, dtype=dtype)
        res_step = torch.ops.aten.arange.start_step(-end, end, 3, dtype=dtype)
        # float bounds and step infer float32
        res_float = torch.ops.aten.arange.start_step(0.5, end, 0.25)
        return res_end, res_start, res_step, res_float


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestArange:
    @pytest.mark.parametrize("dtype", [torch.int64, torch.float32])
    # dynamic sizes from 3: at an end of 2, arange(1, end) has one element, and torch's
    # contiguity check on it specializes end == 2 (aot_eager too), so the graph at the second
    # size would be the first dynamic one, not a reuse
    @pytest.mark.parametrize("sizes", [Size(8, 13), Size(1, 3)])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_arange(self, sizes, dtype, compiled_model):
        device = get_device()
        end = sizes.dynamic if compiled_model.dynamic else sizes.static

        output = model(end, dtype)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(end, dtype)

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
            assert dicp_res.device.type == torch.device(device).type
