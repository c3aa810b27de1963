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
    def forward(self, c, a, b):
        res_default = torch.ops.aten.baddbmm.default(c, a, b)
        # a (N,) input broadcasts over batch and rows
        res_scaled = torch.ops.aten.baddbmm.default(c[0, 0], a, b, beta=0.5, alpha=2)
        return res_default, res_scaled


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestBaddbmm:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
    # Size((B, M, K, N), ...)
    @pytest.mark.parametrize(
        "sizes", [Size((2, 4, 8, 5), (3, 6, 3, 7)), Size((1, 1, 6, 3), (1, 1, 5, 9))]
    )
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_baddbmm(self, sizes, dtype, compiled_model):
        device = get_device()
        batch, m, k, n = sizes.dynamic if compiled_model.dynamic else sizes.static
        a = torch.randn(batch, m, k, dtype=dtype)
        # b is stored transposed (attention's q @ k^T)
        b = torch.randn(batch, n, k, dtype=dtype).transpose(1, 2)
        c = torch.randn(batch, m, n, dtype=dtype)

        output = model(c, a, b)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(c.to(device), a.to(device), b.to(device))

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
