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
    def forward(self, bias, c, a, b):
        res_linear = torch.ops.aten.addmm.default(bias, a, b)
        res_scaled = torch.ops.aten.addmm.default(c, a, b, beta=0.5, alpha=2)
        return res_linear, res_scaled


model = OpModule()
args = parse_args()
compiled_model = compile_model(model, args.backend, args.dynamic)


class TestAddmm:
    @pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
    # Size((M, K, N), ...): M = 1 is a vector-matrix product, K = 1 an outer product
    @pytest.mark.parametrize("sizes", [Size((4, 8, 5), (6, 3, 7)), Size((1, 6, 3), (1, 5, 9))])
    @pytest.mark.parametrize("compiled_model", compiled_model)
    def test_torch_addmm(self, sizes, dtype, compiled_model):
        device = get_device()
        m, k, n = sizes.dynamic if compiled_model.dynamic else sizes.static
        a = torch.randn(m, k, dtype=dtype)
        # b is stored transposed, as a linear layer's weight; the (N,) bias broadcasts
        b = torch.randn(n, k, dtype=dtype).t()
        bias = torch.randn(n, dtype=dtype)
        c = torch.randn(m, n, dtype=dtype)

        output = model(bias, c, a, b)
        dynamo.reset()
        update_dynamo_config(compiled_model.dynamic)
        dicp_output = compiled_model.model(
            bias.to(device), c.to(device), a.to(device), b.to(device)
        )

        for dicp_res, res in zip(dicp_output, output, strict=True):
            assert_close(dicp_res, res)
