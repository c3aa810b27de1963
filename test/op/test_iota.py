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
    def forward(self, length, dtype, device):
        res_default = torch.ops.prims.iota.default(
            length, start=0, step=1, dtype=dtype, device=device, requires_grad=False
        )
        res_step = torch.ops.prims.iota.default(
            length, start=-3, step=2, dtype=dtype, device=device, requires_grad=False
        )
        return res_default, res_step


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestIota:
    @pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
    @pytest.mark.parametrize("sizes", [Size(8, 13), Size(1, 2)])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_iota(self, sizes, dtype, compiled_model):
        device = torch.device(get_device())
        length = sizes.dynamic if compiled_model.dynamic else sizes.static

        output = model(length, dtype, torch.device("cpu"))
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(length, dtype, device)

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
